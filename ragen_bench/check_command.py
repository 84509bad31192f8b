"""``ragen-bench check-env``: :func:`ragen_envs.check_env` from the command line."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from .console import make_console, print_error

out = make_console()
err = make_console(stderr=True)

_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


def register(app: typer.Typer) -> None:
    """Add ``check-env`` to the ``ragen-bench`` app."""

    @app.command("check-env")
    def check_env_command(
        env_id: Annotated[
            str | None,
            typer.Argument(help="A registered id, e.g. ragen/Sokoban-v0 (or use --entry-point)."),
        ] = None,
        entry_point: Annotated[
            str | None,
            typer.Option(
                "--entry-point",
                help="Your own env class as module:Class (importable from the current directory "
                "or PYTHONPATH), instead of a registered id.",
            ),
        ] = None,
        seeds: Annotated[int, typer.Option(min=1, max=1000, help="Seeds per check.")] = 5,
        as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    ) -> None:
        """Check an environment against the ragen env contract: Gymnasium's checker, its JSON
        Schemas, reproducible seeds, disjoint splits, bad actions as penalties, the oracle's
        optimum (docs/envs/adding-an-env.md).  Exits 0 when every check passes or is skipped,
        1 when one fails, 2 when the env cannot be loaded."""
        import sys

        from ragen_envs.checker import check_env

        if (env_id is None) == (entry_point is None):
            print_error(err, "give an env id or --entry-point module:Class (one of them)")
            raise typer.Exit(2)
        target = entry_point or env_id
        if entry_point and "" not in sys.path:
            sys.path.insert(0, "")  # module:Class from the current directory, like python -m
        try:
            report = check_env(target, seeds=seeds)
        except (ValueError, TypeError, LookupError) as exc:
            print_error(err, str(exc))
            raise typer.Exit(2) from None
        if as_json:
            out.print_json(json.dumps(report.to_dict()))
        else:
            table = Table(title=f"check-env {escape(report.env)}")
            for col in ("check", "result", "detail"):
                table.add_column(col, overflow="fold")
            for c in report.checks:
                table.add_row(c.name, f"[{_STYLE[c.status]}]{c.status}[/]", escape(c.detail))
            out.print(table)
            out.print(
                "passed"
                if report.passed
                else f"[bold red]failed[/]: {len(report.failures())} check(s)"
            )
        raise typer.Exit(0 if report.passed else 1)
