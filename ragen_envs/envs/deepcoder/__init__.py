"""Coding problems (:mod:`.problems`), test drivers (:mod:`.harness`), sandboxed judging (:mod:`.judge`) and our problems (:mod:`.ragen_problems`)."""
