"""ragen_bench (under construction)."""
