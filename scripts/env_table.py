"""Write (or check) the environment table of README.md from ragen_envs.list_envs().

    python scripts/env_table.py            # rewrite the table in README.md
    python scripts/env_table.py --print    # print the markdown table
    python scripts/env_table.py --check    # exit 1 if README.md's table differs

The table sits in README.md between the markers <!-- env-table:start --> and
<!-- env-table:end -->; tests/test_readme.py runs the check.
"""

from __future__ import annotations

import sys
from pathlib import Path

import ragen_envs

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- env-table:start -->", "<!-- env-table:end -->"


def table() -> str:
    rows = ["| id | v | turns × actions | description | spec |", "|---|---|---|---|---|"]
    for e in ragen_envs.list_envs():
        a = e.agent_defaults
        proto = f"{a.get('max_turns', '–')} × {a.get('max_actions_per_turn', '–')}"
        rows.append(
            f"| `{e.id}` | {e.version} | {proto} | {e.description} | [docs/envs/{e.env_key}.md](docs/envs/{e.env_key}.md) |"
        )
    return "\n".join(rows)


def current() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index(START) + len(START) : text.index(END)].strip()


if __name__ == "__main__":
    if "--check" in sys.argv:
        ok = current() == table()
        print(
            "README environment table is up to date"
            if ok
            else "README table differs: run scripts/env_table.py"
        )
        sys.exit(0 if ok else 1)
    if "--print" in sys.argv:
        print(table())
        sys.exit(0)
    text = README.read_text(encoding="utf-8")
    head, tail = text[: text.index(START) + len(START)], text[text.index(END) :]
    README.write_text(f"{head}\n{table()}\n{tail}", encoding="utf-8")
    print(f"updated the environment table in {README}")
