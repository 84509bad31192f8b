"""Write the bundled SearchQA files (corpus + questions) and their provenance sidecars.

Run ``python -m ragen_envs.search.build_corpus`` (``--check`` compares instead of
writing and exits 1 when a file is out of date).  It writes, into
``ragen_envs/data/bundled/`` (the data layer's bundled registry, :mod:`ragen_envs.data.bundled`):

* ``searchqa-countries-corpus.jsonl`` — the passages (:func:`ragen_envs.search.countries.build_documents`);
* ``searchqa-countries.jsonl`` — the questions (:func:`ragen_envs.search.countries.build_questions`);
* ``<name>.provenance.json`` for each (licence CC0-1.0: our own text about public facts).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

from .. import jsonutil
from ..data.bundled import BUNDLED_DIR
from .countries import build_documents, build_questions, load_countries

__all__ = ["build", "main"]

_META = {
    "source": "ragen: passages and questions generated from ragen_envs/search/country_facts.tsv, a table of "
              "public facts about 165 countries (capital, continent, currency, official languages, rounded "
              "population) written by the ragen authors; facts are not copyrightable and the wording is ours",
    "source_url": "https://github.com/ragen-dev/ragen",
    "license": "CC0-1.0",
    "copyright": "No rights reserved: dedicated to the public domain by the ragen developers (CC0 1.0)",
    "license_file": None,
    "created_by": "python -m ragen_envs.search.build_corpus",
}


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(jsonutil.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")


def outputs() -> dict[str, bytes]:
    """File name -> bytes of every file this module writes."""
    countries = load_countries()
    out: dict[str, bytes] = {}
    for name, fmt, desc, records in (
        ("searchqa-countries-corpus", "wiki-18",
         "Passages about 165 countries (4 per country) for the SearchQA BM25 index, wiki-18 layout "
         "(id, title, text, contents).", build_documents(countries)),
        ("searchqa-countries", "ragen",
         "Single-hop, two-hop and yes/no questions about 165 countries (11 per country), answers stated in "
         "searchqa-countries-corpus.", build_questions(countries)),
    ):
        data = _jsonl(records)
        out[f"{name}.jsonl"] = data
        sidecar = {"name": name, "file": f"{name}.jsonl", "format": fmt, "description": desc,
                   "records": len(records), "sha256": hashlib.sha256(data).hexdigest(), **_META}
        out[f"{name}.provenance.json"] = (jsonutil.dumps(sidecar, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return out


def build(check: bool = False) -> list[str]:
    """Write (or, with ``check``, compare) the files; return the names that differ."""
    bad = []
    for fname, data in outputs().items():
        path = BUNDLED_DIR / fname
        if check:
            if not path.is_file() or path.read_bytes() != data:
                bad.append(fname)
        else:
            path.write_bytes(data)
    return bad


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
