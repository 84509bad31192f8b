"""The ``ragen-train`` command line (typer).

    ragen-train quickstart                       # tiny model: SFT -> StarPO -> before/after -> plot
    ragen-train starpo --config sokoban model.path=Qwen/Qwen2.5-0.5B-Instruct optim.lr=1e-6
    ragen-train starpo --config quickstart --resume latest
    ragen-train sft --config quickstart sft.episodes=512
    ragen-train eval outputs/quickstart/final_model --env ragen/Bandit-Pairs-v0 --episodes 64
    ragen-train presets                          # list presets
    ragen-train show-config --config sokoban     # the resolved config as JSON

Under ``torchrun --nproc_per_node N ragen-train starpo ...`` the same command trains with
torch.distributed (gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Train LLM agents with multi-turn RL (StarPO: PPO / GRPO and variants) on ragen environments.")
console = Console(stderr=True)

ConfigOpt = Annotated[str, typer.Option("--config", "-c", help="A preset name (see `ragen-train presets`) or a JSON/YAML file.")]
Overrides = Annotated[Optional[list[str]], typer.Argument(help="Overrides like optim.lr=1e-5 algorithm.adv_estimator=gae.")]


def _load(config: str, overrides: list[str] | None):
    from .config import ConfigError, load_config

    try:
        return load_config(config, overrides or [])
    except ConfigError as exc:
        console.print(f"[red]config error:[/red] {exc}")
        raise typer.Exit(2) from None


@app.command()
def starpo(
    config: ConfigOpt = "quickstart",
    overrides: Overrides = None,
    resume: Annotated[Optional[str], typer.Option(help="Checkpoint directory, or 'latest' in trainer.out_dir.")] = None,
    backend: Annotated[str, typer.Option(help="Trainer back-end: native | trl | verl (docs/backends.md).")] = "native",
) -> None:
    """Train with StarPO (rollout -> filter -> advantages -> PPO/GRPO update), with validation and checkpoints."""
    from .trainer import StarPOTrainer

    cfg = _load(config, overrides)
    if backend != "native":
        _external_backend(backend, cfg, resume)
        return
    try:
        trainer = StarPOTrainer(cfg, resume=resume)
    except FileNotFoundError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None
    last = trainer.fit()
    if trainer.dist.is_main:
        from .plot import plot_metrics

        png = plot_metrics(Path(cfg.trainer.out_dir) / "metrics.jsonl", Path(cfg.trainer.out_dir) / "training_curves.png",
                           title=f"{cfg.name}: {cfg.env.id}")
        console.print(f"done: {cfg.trainer.out_dir} (curves: {png}); last validation: "
                      + ", ".join(f"{k}={v:.3f}" for k, v in last.items() if k in ("val/success", "val/return")))


def _external_backend(name: str, cfg, resume: str | None) -> None:
    """Train ``cfg`` with the ``trl`` or ``verl`` back-end (ragen_train.backends)."""
    from .backends import get_backend
    from .config import ConfigError

    if resume:
        console.print(f"[red]error:[/red] --resume is only supported by the native back-end, not {name!r}")
        raise typer.Exit(2)
    try:
        chosen = get_backend(name)
    except KeyError as exc:
        console.print(f"[red]error:[/red] {exc.args[0]}")
        raise typer.Exit(2) from None
    try:
        result = chosen.train(cfg)
    except (ImportError, ConfigError) as exc:
        console.print(f"[red]{name} back-end:[/red] {exc}")
        raise typer.Exit(2) from None
    console.print(f"done ({name}): metrics {result.metrics_path}; model {result.checkpoint_dir}; last validation: "
                  + ", ".join(f"{k}={v:.3f}" for k, v in result.last_val.items() if k in ("val/success", "val/return")))


@app.command()
def sft(config: ConfigOpt = "quickstart", overrides: Overrides = None,
        out: Annotated[Optional[Path], typer.Option(help="Where to save the model (default: <out_dir>/sft_model).")] = None) -> None:
    """Supervised warm start on oracle (or mixed, or JSONL) demonstrations, with StarPO's masks."""
    from .checkpoint import save_model
    from .logger import MetricLogger
    from .modeling import load_policy, load_tokenizer
    from .trainer import rollout_config_for
    from .sft import sft_samples, sft_train

    cfg = _load(config, overrides)
    tok = load_tokenizer(cfg.model.path)
    model = load_policy(cfg.model)
    samples = sft_samples(cfg, tok, rollout_config_for(cfg, 1.0))
    console.print(f"{len(samples)} demonstration samples")
    log = MetricLogger(Path(cfg.trainer.out_dir) / "sft", ["jsonl", "console"])
    hist = sft_train(model, tok, samples, cfg, device=cfg.model.device,
                     log=lambda s, row: log.log(s, row, phase="sft") if s % 10 == 0 else None)
    log.close()
    dest = out or Path(cfg.trainer.out_dir) / "sft_model"
    save_model(model, tok, dest)
    console.print(f"SFT: {len(hist)} steps, final loss {hist[-1]['sft/loss']:.4f}; model saved to {dest}")


@app.command("eval")
def evaluate(
    checkpoint: Annotated[Path, typer.Argument(help="A model directory (e.g. <out_dir>/final_model or checkpoints/step_N/model).")],
    env: Annotated[str, typer.Option(help="Environment id.")] = "ragen/Bandit-Pairs-v0",
    episodes: Annotated[int, typer.Option(help="Episodes.")] = 64,
    split: Annotated[str, typer.Option(help="Split to evaluate on.")] = "test",
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.5,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens per response.")] = 64,
    context_mode: Annotated[Optional[str], typer.Option(help="full | last_k | single_turn (default: the checkpoint's training config, else full).")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Parent folder of the run directory.")] = Path("runs"),
) -> None:
    """Evaluate a checkpoint with the benchmark harness (writes a normal ragen-bench run)."""
    from ragen_bench.cli import _print_summary
    from ragen_bench.runner import RunRequest, start_run

    if not (checkpoint / "config.json").is_file():
        console.print(f"[red]error:[/red] {checkpoint} is not a model directory (no config.json)")
        raise typer.Exit(2)
    mode = context_mode
    train_cfg = checkpoint.parent / "config.json"
    if mode is None and train_cfg.is_file():
        try:
            mode = json.loads(train_cfg.read_text())["rollout"]["context_mode"]
        except (KeyError, ValueError):
            mode = None
    rollout = {"context_mode": mode, "sampling": {"temperature": temperature, "max_new_tokens": max_new_tokens}}
    req = RunRequest(env_id=env, backend="hf", model=str(checkpoint), episodes=episodes, split=split,
                     rollout=rollout, out=str(out_dir))
    path = start_run(req)
    _print_summary(json.loads((path / "summary.json").read_text()), path)


@app.command()
def quickstart(overrides: Overrides = None, config: ConfigOpt = "quickstart") -> None:
    """Tiny model, SFT warm start, StarPO, evaluation before and after on held-out seeds, training curves."""
    from .pipeline import run_sft_then_starpo

    cfg = _load(config, overrides)
    res = run_sft_then_starpo(cfg, log=lambda m: console.print(m))
    b, a = res.before.get("val/success", 0.0), res.after.get("val/success", 0.0)
    console.print(f"\n[bold]held-out success ({cfg.env.id}, {cfg.env.test_split} split):[/bold] "
                  f"after SFT {b:.3f} -> after StarPO {a:.3f}")
    console.print(f"curves: {res.plot}; summary: {res.out_dir / 'summary.json'}; wall time {res.wall_s:.0f} s")


@app.command()
def presets() -> None:
    """List the named presets."""
    from .presets import PRESETS

    for name in sorted(PRESETS):
        cfg = PRESETS[name]()
        console.print(f"{name:22s} env={cfg.env.id}  model={cfg.model.path}  estimator={cfg.algorithm.adv_estimator}")


@app.command("show-config")
def show_config(config: ConfigOpt = "quickstart", overrides: Overrides = None) -> None:
    """Print the resolved config as JSON."""
    cfg = _load(config, overrides)
    typer.echo(json.dumps(cfg.to_dict(), indent=2))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
