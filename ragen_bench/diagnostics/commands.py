"""Command-line glue: ``ragen-bench diagnose`` and the ``--diagnostics`` step of ``run``.

:func:`register` adds the ``diagnose`` command to the ``ragen-bench`` typer app;
:func:`after_run` is what ``ragen-bench run --diagnostics`` calls once the run is done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..console import make_console, print_error
from ..options import CliOption
from .collapse import DEFAULT_NUM_SAMPLES

console = make_console(stderr=True)
out = make_console()

SCORER_HELP = "Scorer: hf:<model> (directory, hub id or 'tiny') or openai:<base_url>:<model>."

#: The ``--diagnostics`` options of ``ragen-bench run`` (read by :func:`after_run`'s caller).
RUN_OPTIONS: tuple[CliOption, ...] = (
    CliOption(
        "diagnostics",
        bool,
        False,
        "After the run, add reasoning-collapse diagnostics to summary.json (docs/diagnostics.md).",
        flags=("--diagnostics",),
    ),
    CliOption(
        "scorer",
        Optional[str],
        None,
        "--diagnostics scorer: hf:<model> | openai:<base_url>:<model> "
        "(default: the run's own hf model).",
    ),
    CliOption(
        "diagnostics_samples",
        int,
        DEFAULT_NUM_SAMPLES,
        "--diagnostics: rows per sampler (RAGEN default 64).",
    ),
    CliOption("diagnostics_sampler", str, "both", "--diagnostics: first_turn | trajectory | both."),
)


def needs_scorer(backend: str, diagnostics: bool, scorer: str | None) -> None:
    """Fail before a run starts when ``--diagnostics`` has nothing to score with.

    Raises:
        typer.BadParameter: a non-``hf`` back-end without ``--scorer``.
    """
    if diagnostics and scorer is None and backend != "hf":
        raise typer.BadParameter(
            f"--diagnostics with the {backend} back-end needs --scorer "
            "hf:<model> | openai:<base_url>:<model>",
            param_hint="--scorer",
        )
    if scorer is not None:
        from .harness import parse_scorer_spec

        try:
            parse_scorer_spec(scorer)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--scorer") from None


def scorer_for_run(
    run_dir: Path,
    scorer: str | None,
    policy: Any = None,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    tokenizer: str | None = None,
) -> Any:
    """The scorer of ``--diagnostics``: ``--scorer`` if given, else the run's own hf model
    (the live policy when there is one, else reloaded from ``run.json``).

    Raises:
        ValueError: no scorer and the run's back-end is not ``hf``.
    """
    from .harness import make_scorer

    if scorer:
        return make_scorer(scorer, device=device, dtype=dtype, tokenizer=tokenizer)
    if policy is not None and getattr(policy, "name", None) == "hf":
        from .hf_scorer import HFScorer

        return HFScorer.from_policy(policy)
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    if meta.get("backend") != "hf" or not meta.get("model"):
        raise ValueError(
            f"--diagnostics for a {meta.get('backend')} run needs --scorer hf:<model> | "
            "openai:<base_url>:<model>"
        )
    opts = meta.get("policy_options") or {}
    return make_scorer(
        f"hf:{meta['model']}", device=opts.get("device", device), dtype=opts.get("dtype", dtype)
    )


def print_block(block: dict[str, Any]) -> None:
    """The headline numbers of a diagnostics block as a table."""
    table = Table(
        title=escape(
            f"collapse diagnostics · scorer {block['scorer'].get('kind')}:{block['scorer'].get('model')}"
        )
    )
    for col in ("sampler", "regime", "N×M", "MI/logM", "MI/tok", "H(Z|X)/tok", "ret@1 (chance)"):
        table.add_column(col, overflow="fold")
    m = block["metrics"]
    for name, regime in block["regimes"].items():
        p = f"collapse/{name}/"

        def f(key: str, fmt: str = "{:.3f}") -> str:
            return fmt.format(m[p + key]) if p + key in m else "–"

        table.add_row(
            escape(name),
            escape(regime),
            f"{int(m.get(p + 'num_rows', 0))} × {int(m.get(p + 'num_columns', 0))}",
            f("mi_seq_normalized"),
            f("mi_estimate"),
            f("conditional_entropy_est"),
            f"{f('retrieval_accuracy')} ({f('retrieval_chance_level')})",
        )
    out.print(table)
    extra = [
        f"{k.split('/', 1)[1]} {v:.3f}"
        for k, v in m.items()
        if k
        in (
            "collapse/valid_thinking_rate",
            "collapse/degenerate_rate",
            "collapse/token_entropy_sampled",
        )
    ]
    out.print(escape("  " + " · ".join(extra + [f"{block['timing_s']:.1f} s"])))


def after_run(
    path: Path,
    *,
    scorer: str | None,
    policy: Any,
    num_samples: int,
    samplers: str,
    seed: int = 0,
    device: str = "cpu",
    dtype: str = "float32",
) -> None:
    """``run --diagnostics``: add the block to the finished run's summary, or exit 2 with the reason."""
    from .harness import diagnose_run, parse_samplers
    from .scorer import ScoringNotSupported

    try:
        sc = scorer_for_run(path, scorer, policy, device=device, dtype=dtype)
        block = diagnose_run(
            path, sc, num_samples=num_samples, samplers=parse_samplers(samplers), seed=seed
        )
    except (ScoringNotSupported, ValueError, ImportError, FileNotFoundError) as exc:
        print_error(console, exc, "diagnostics failed:")
        raise typer.Exit(2) from None
    print_block(block)


def register(app: typer.Typer) -> None:
    """Add ``ragen-bench diagnose`` to ``app``."""

    @app.command()
    def diagnose(
        run_dir: Annotated[Path, typer.Argument(help="A finished run directory.")],
        scorer: Annotated[str, typer.Option(help=SCORER_HELP)],
        num_samples: Annotated[
            int, typer.Option(help="Rows per sampler (RAGEN default 64).")
        ] = DEFAULT_NUM_SAMPLES,
        sampler: Annotated[
            str, typer.Option(help="first_turn | trajectory | both (comma-separated list allowed).")
        ] = "both",
        seed: Annotated[int, typer.Option(help="Seed of the samplers.")] = 0,
        device: Annotated[str, typer.Option(help="hf scorer: torch device.")] = "cpu",
        dtype: Annotated[
            str, typer.Option(help="hf scorer: float32 | bfloat16 | float16.")
        ] = "float32",
        tokenizer: Annotated[
            str | None,
            typer.Option(
                help="openai scorer: local tokenizer directory of the served model (default: the server's /tokenize)."
            ),
        ] = None,
        api_key_env: Annotated[
            str | None,
            typer.Option(help="openai scorer: NAME of the environment variable with the API key."),
        ] = None,
        print_json: Annotated[
            bool, typer.Option("--json", help="Print the diagnostics block as JSON.")
        ] = False,
    ) -> None:
        """Reasoning-collapse diagnostics (MI, conditional entropy, regimes) into summary.json."""
        from .harness import diagnose_run, make_scorer, parse_samplers
        from .scorer import ScoringNotSupported

        try:
            names = parse_samplers(sampler)
            sc = make_scorer(
                scorer, device=device, dtype=dtype, tokenizer=tokenizer, api_key_env=api_key_env
            )
            block = diagnose_run(run_dir, sc, num_samples=num_samples, samplers=names, seed=seed)
        except (ScoringNotSupported, ValueError, ImportError, FileNotFoundError) as exc:
            print_error(console, exc)
            raise typer.Exit(2) from None
        print_block(block)
        if print_json:
            out.print_json(data=block)
