"""The leaderboard site: ``ragen-bench site leaderboards/*.json --out site/``.

Layout of ``DIR``::

    index.html              every board: name, description, split, counts
    <board>.html            one page per board (the JSON file's stem): a sortable, filterable table
    matrix.html             models x environment families (:mod:`ragen_bench.site.matrix`)
    data/<board>.json|.csv  each board to download (and data/all.csv), linked from every page
    runs/<run_id>.html      the run report of each entry whose run directory was found

A board entry names its run by ``run_id``; the run directory is looked up as
``<root>/<run_id>`` and ``<root>/*/<run_id>`` for every ``runs_roots`` folder (``runs/`` by
default, so ``runs/baselines/oracle-Bandit-v0`` is found).  An entry without a run
directory is listed without a link.

The output is deterministic: the same boards and runs give byte-identical files (no build
time is written; entries keep the board's order).  Files of an earlier build that this
build does not write are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .page import provenance_flags, render_page, report_name, slug, write_page


class SiteError(ValueError):
    """A board file cannot be published (unreadable, not a board, or two boards with one name)."""


def load_boards(paths: Sequence[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Read and check board files (``schemas/leaderboard.schema.json``), in the order given.

    Raises:
        SiteError: a file is missing, is not JSON, fails the schema (the message names the
            file and the field), or two files have the same stem (one page name).
    """
    import jsonschema

    from ragen_bench.validate import validate_file

    out: list[tuple[Path, dict[str, Any]]] = []
    stems: dict[str, Path] = {}
    for given in paths:
        p = Path(given)
        if not p.is_file():
            raise SiteError(f"{p}: no such board file")
        try:
            validate_file(p, "leaderboard")
            board = json.loads(p.read_text(encoding="utf-8"))
        except jsonschema.ValidationError as exc:  # its message names the file and the field
            raise SiteError(f"not a valid leaderboard: {exc.message}") from None
        except ValueError as exc:  # not JSON
            raise SiteError(f"{p}: not a valid leaderboard: {exc}") from None
        stem = slug(p.stem)
        if stem in stems:
            raise SiteError(f"{p} and {stems[stem]} would both publish as {stem}.html; rename one")
        stems[stem] = p
        out.append((p, board))
    return out


def find_run(run_id: str, roots: Iterable[str | Path]) -> Path | None:
    """The run directory of ``run_id`` under one of ``roots`` (``root/run_id`` or
    ``root/*/run_id``, first match in root order, then sorted), or ``None``."""
    for root in roots:
        root = Path(root)
        direct = root / run_id
        if (direct / "run.json").is_file():
            return direct
        if root.is_dir():
            for sub in sorted(p for p in root.iterdir() if p.is_dir()):
                if (sub / run_id / "run.json").is_file():
                    return sub / run_id
    return None


def build_site(
    boards: Sequence[str | Path],
    out_dir: str | Path,
    *,
    runs_roots: Sequence[str | Path] = ("runs",),
    reports: bool = True,
) -> list[Path]:
    """Build the static leaderboard site; return the files written (sorted).

    Args:
        boards: leaderboard JSON files (``leaderboards/*.json``).
        out_dir: the site folder (created).
        runs_roots: folders searched for the entries' run directories (see :func:`find_run`).
        reports: write a run report for every entry whose run was found (and link it).

    Raises:
        SiteError: see :func:`load_boards`; also when ``boards`` is empty or ``out_dir``
            is a file.
        FileNotFoundError / ValueError: a found run directory is unreadable (from
            :func:`ragen_bench.report.render_run_report`).
    """
    from ragen_bench.report import protocol_text, render_run_report

    if not boards:
        raise SiteError(
            "no board files given (e.g. ragen-bench site leaderboards/*.json --out site/)"
        )
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SiteError(f"--out {out} is a file; the site needs a folder (it is created)")
    loaded = load_boards(boards)
    written: list[Path] = []
    report_of: dict[str, str | None] = {}  # run_id -> href relative to out/
    nav = [("leaderboards", "index.html"), ("models × envs", "matrix.html")] + [
        (b["name"], f"{slug(p.stem)}.html") for p, b in loaded
    ]
    from .matrix import matrix, write_data

    written += write_data(out, [(slug(p.stem), p, b) for p, b in loaded])
    downloads = [
        (f"{slug(p.stem)}.{ext}", f"data/{slug(p.stem)}.{ext}")
        for p, _ in loaded
        for ext in ("json", "csv")
    ] + [("all boards (CSV)", "data/all.csv")]
    grid = matrix([(b["name"], b) for _, b in loaded])
    written.append(
        write_page(
            out / "matrix.html",
            render_page(
                "matrix.html",
                title="models × environments · ragen leaderboards",
                nav=nav,
                downloads=downloads,
                n_boards=len(loaded),
                **grid,
            ),
        )
    )

    page_owner: dict[str, str] = {}  # report file stem -> its run id (one page per run id)

    def report_for(run_id: str) -> str | None:
        if run_id not in report_of:
            run_dir = find_run(run_id, runs_roots) if reports else None
            href = None
            if run_dir is not None:
                name = report_name(run_id)
                while name in page_owner and page_owner[name] != run_id:  # a crafted id
                    name += "_"
                page_owner[name] = run_id
                href = f"runs/{name}.html"
                run_nav = [(label, f"../{h}") for label, h in nav]
                written.append(write_page(out / href, render_run_report(run_dir, nav=run_nav)))
            report_of[run_id] = href
        return report_of[run_id]

    summaries = []
    for path, board in loaded:
        page = f"{slug(path.stem)}.html"
        protocols = {
            env_id: protocol_text(info.get("protocol") or {})
            for env_id, info in board["envs"].items()
        }
        rows = [
            {
                "entry": e,
                "report": report_for(e["run_id"]),
                "protocol": protocol_text(
                    board["envs"].get(e["env_id"], {}).get("protocol") or {}, short=True
                ),
                "protocol_full": protocols.get(e["env_id"], "–"),
                "flags": provenance_flags(e),
            }
            for e in board["entries"]
        ]
        envs = sorted(board["envs"])
        written.append(
            write_page(
                out / page,
                render_page(
                    "board.html",
                    title=f"{board['name']} · ragen leaderboard",
                    nav=nav,
                    board=board,
                    rows=rows,
                    envs=envs,
                    protocols=protocols,
                    downloads=downloads,
                ),
            )
        )
        summaries.append(
            {
                "name": board["name"],
                "href": page,
                "description": board.get("description", ""),
                "split": board["split"],
                "n_envs": len(envs),
                "n_entries": len(rows),
                "latest": max((e["date"] for e in board["entries"]), default=""),
            }
        )
    listed = sorted((run_id, href) for run_id, href in report_of.items() if href)
    written.append(
        write_page(
            out / "index.html",
            render_page(
                "index.html",
                title="ragen leaderboards",
                nav=nav,
                boards=summaries,
                reports=listed,
                downloads=downloads,
            ),
        )
    )
    return sorted(set(written))
