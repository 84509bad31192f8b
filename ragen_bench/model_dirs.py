"""Local model references: model folders, LoRA adapter folders and the folders around them.

``--model`` of ``ragen-bench run`` and the folder of ``ragen-train eval`` take:

* ``"tiny"`` (the tiny preset, built offline) or a Hugging Face hub id (``owner/name``);
* a model folder (``config.json`` with the weights);
* a peft LoRA adapter folder (``adapter_config.json``: what ``ragen-train`` saves by
  default, ``model.lora.save=adapter``).  Its base model is, in order: ``--base``; the
  ``base_model_name_or_path`` of ``adapter_config.json`` when that exists here (or is
  ``tiny``); the ``model.path`` of the training run's ``config.json`` (``<out_dir>/config.json``,
  or the checkpoint's ``state.json``); the adapter's base as a hub id.

A training output folder (``<out_dir>``) or a checkpoint folder (``checkpoints/step_N``)
is not a model: :func:`folder_hint` names the sub-folder to pass.  A reference that looks
like a local path (``./x``, ``/x``, ``~/x``, ``a/b/c``, or ``a/b`` whose ``a`` is a folder
here) and does not exist is refused at once (:func:`check_model_ref`), never sent to the
hub (which retries for a minute before failing).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"

#: A Hugging Face hub id: ``name`` or ``owner/name`` (the hub's own rule: word
#: characters, ``-`` and ``.``, at most 96 characters a part).
_HUB_ID = re.compile(r"(?:[\w.-]{1,96}/)?[\w.-]{1,96}")

#: Folder names a training run writes: ``--model outputs/x`` is a local path, never a hub id.
_LOCAL_ROOTS = ("outputs", "runs", "checkpoints", "final_model", "sft_model")


def resolve_model_path(model: str) -> str:
    """Resolve ``"tiny"`` to the tiny model preset (built on first use); else return as is."""
    if model == "tiny":
        from .tiny import tiny_model_path

        return str(tiny_model_path())
    return model


def looks_local(model: str) -> bool:
    """Whether ``model`` reads as a local path rather than a hub id.

    True for absolute paths, ``./`` ``../`` ``~`` prefixes, more than one ``/``, a
    backslash, a first component that is a folder here (``outputs/run``) or a name a
    training run writes (``outputs``, ``runs``, ``checkpoints``, ``final_model``...).
    """
    if model.startswith(("/", "./", "../", "~", ".\\")) or "\\" in model or model in (".", ".."):
        return True
    parts = model.split("/")
    if len(parts) > 2:
        return True
    return parts[0] in _LOCAL_ROOTS or (len(parts) == 2 and Path(parts[0]).is_dir())


def is_adapter_dir(path: Path) -> bool:
    """A peft adapter folder (holds ``adapter_config.json``)."""
    return (path / ADAPTER_CONFIG).is_file()


def is_model_folder(path: Path) -> bool:
    """A folder a back-end loads: ``adapter_config.json``, or a model's ``config.json``
    inside (not a training run's ``config.json``, which has ``env`` / ``rollout`` / ``trainer``)."""
    if not path.is_dir():
        return False
    if is_adapter_dir(path):
        return True
    data = _read_json(path / "config.json")
    if data is None:
        return (path / "config.json").is_file()  # unreadable: let the loader say why
    return isinstance(data, dict) and not {"env", "rollout", "trainer"} <= set(data)


def model_subfolders(path: Path) -> list[Path]:
    """The model folders inside a training output folder (``final_model``, ``sft_model``,
    ``checkpoints/step_N/model`` newest first), a ``checkpoints`` folder or a
    checkpoint folder (``step_N/model``); empty when there are none."""
    found = [path / n for n in ("final_model", "sft_model", "model") if is_model_folder(path / n)]
    for root in (path / "checkpoints", path):
        steps = sorted(root.glob("step_*/model"), reverse=True)
        found += [p for p in steps if is_model_folder(p)]
    return list(dict.fromkeys(found))


def folder_hint(path: Path) -> str | None:
    """One line naming the model folder(s) to pass when ``path`` is a training output
    folder or a checkpoint folder; ``None`` when it holds none."""
    inside = model_subfolders(path)
    if not inside:
        return None
    what = (
        "a checkpoint folder"
        if path.name.startswith("step_") or (path / "state.json").is_file()
        else "a training output folder"
    )
    shown = ", ".join(str(p) for p in inside[:4]) + (", ..." if len(inside) > 4 else "")
    return f"{path} is {what}, not a model folder; pass one of: {shown}"


def check_model_ref(model: str, *, need_config: bool = True) -> None:
    """Refuse a model that can be neither a local model nor a hub id, before loading it.

    Args:
        model: ``"tiny"``, a local path or a hub id.
        need_config: a local path must be a model or adapter folder (``hf``); ``False``
            also accepts any existing file (vLLM loads single GGUF files).

    Raises:
        ValueError: one line: a local-looking path that does not exist, a name that is
            not a hub id, a training output / checkpoint folder (naming the model folder
            inside), or a folder that is not a model.
    """
    if model == "tiny":
        return
    path = Path(model).expanduser()
    if path.exists():
        if path.is_dir() and not is_model_folder(path):
            hint = folder_hint(path)
            if hint:
                raise ValueError(hint)
            raise ValueError(
                f"model {model!r} is not a model directory (no config.json or adapter_config.json in it)"
            )
        if need_config and not path.is_dir():
            raise ValueError(f"model {model!r} is a file, not a model directory")
        return
    if looks_local(model):
        near = _near_name(path)
        raise ValueError(
            f"model path {model!r} does not exist" + (f" (did you mean {near}?)" if near else "")
        )
    if not _HUB_ID.fullmatch(model) or ".." in model or model.startswith((".", "-")):
        raise ValueError(
            f"model path {model!r} does not exist (and it is not a hub id like owner/name)"
        )


def _near_name(path: Path) -> str | None:
    """A sibling whose name is close to ``path``'s (a typo like ``final_modle``)."""
    import difflib

    parent = path.parent
    if not parent.is_dir():
        return None
    names = [p.name for p in parent.iterdir()]
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.7)
    return str(parent / close[0]) if close else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_model_path(model_dir: Path) -> str | None:
    """``model.path`` of the training run that wrote ``model_dir``: ``<out_dir>/config.json``
    for ``<out_dir>/final_model`` (any folder in the run folder) and for
    ``<out_dir>/checkpoints/step_N/model``, then that checkpoint's ``state.json``."""
    p = Path(os.path.abspath(model_dir))
    places = [p.parent / "config.json"]
    if p.parent.name.startswith("step_"):
        places = [p.parents[2] / "config.json", p.parent / "state.json"]
    for place in places:
        data = _read_json(place)
        if place.name == "state.json" and isinstance(data, dict):
            data = data.get("config")
        path = data.get("model", {}).get("path") if isinstance(data, dict) else None
        if isinstance(path, str) and path:
            return path
    return None


def _usable(model: str) -> bool:
    return model == "tiny" or Path(model).expanduser().is_dir()


def adapter_base(adapter_dir: str | Path, base: str | None = None) -> str:
    """The base model of a LoRA adapter folder (see the module docstring for the order).

    Raises:
        ValueError: ``base`` is given and not a usable model reference, or no base is
            found (the message says to pass ``--base``).
    """
    if base:
        check_model_ref(base)
        return base
    d = Path(adapter_dir)
    cfg = _read_json(d / ADAPTER_CONFIG)
    own = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    run = run_model_path(d)
    for candidate in (own, run):
        if isinstance(candidate, str) and candidate and _usable(candidate):
            return candidate
    for candidate in (run, own):
        if (
            isinstance(candidate, str)
            and candidate
            and not looks_local(candidate)
            and _HUB_ID.fullmatch(candidate)
        ):
            return candidate
    raise ValueError(
        f"the LoRA adapter {adapter_dir} needs its base model, and neither adapter_config.json "
        f"({own!r}) nor the training run's model.path ({run!r}) is available here; pass --base"
    )


@dataclass(frozen=True)
class ModelSource:
    """What to load for a ``--model``: ``path`` (a model folder, hub id or adapter folder)
    and, for an adapter, ``base`` (the base model to apply it to)."""

    path: str
    base: str | None = None

    @property
    def is_adapter(self) -> bool:
        return self.base is not None

    def describe(self) -> dict[str, str]:
        """What a result records about an adapter (empty for a plain model): ``base`` and,
        when ragen-train saved it with a manifest, ``fingerprint`` (the first 16 hex digits
        of :func:`model_fingerprint`), so that a leaderboard row names the exact trained
        weights it was scored with, not only a folder name."""
        if self.base is None:
            return {}
        digest = model_fingerprint(self.path)
        return {"base": self.base, **({"fingerprint": digest[:16]} if digest else {})}


def model_source(model: str, base: str | None = None) -> ModelSource:
    """Resolve ``model`` (``"tiny"``, folder, hub id) into a :class:`ModelSource`.

    Raises:
        ValueError: as :func:`check_model_ref` and :func:`adapter_base`.
    """
    check_model_ref(model, need_config=False)  # the back-ends' own checks are stricter
    path = resolve_model_path(model)
    if is_adapter_dir(Path(path).expanduser()):
        source = ModelSource(
            str(Path(path).expanduser()), resolve_model_path(adapter_base(path, base))
        )
    else:
        source = ModelSource(path)
    for ref in (source.base, source.path):
        if ref is not None and not Path(ref).expanduser().exists():
            check_hub_model(ref)  # a hub id: cached, or the hub answers (one line, at once)
    return source


#: Seconds the one connection probe to the hub may take (:func:`check_hub_model`).
HUB_PROBE_TIMEOUT_S = 3.0


def hub_unreachable(timeout_s: float = HUB_PROBE_TIMEOUT_S) -> str | None:
    """Why the Hugging Face hub cannot be reached now, or ``None`` when it can.

    Offline mode (``HF_HUB_OFFLINE=1``, as huggingface_hub reads it) says so at once;
    otherwise one TCP connection to the hub's host (``HF_ENDPOINT``, default
    huggingface.co; the ``HTTPS_PROXY`` host when one is set) with a ``timeout_s`` limit.
    """
    import os
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    url = urlsplit(constants.ENDPOINT)
    proxy = next(
        (
            os.environ[k]
            for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
            if os.environ.get(k)
        ),
        None,
    )
    if proxy:
        url = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"{host}:{port} cannot be reached ({exc.strerror or type(exc).__name__})"


def check_hub_model(model_id: str) -> None:
    """Refuse a hub id that is neither in the local cache nor downloadable now, at once.

    Without this, transformers retries the hub for about a minute and prints a dozen
    lines before its own error.  A model whose ``config.json`` is in the huggingface_hub
    cache passes without any network access.

    Raises:
        ValueError: one line: the model is not cached and :func:`hub_unreachable` says why
            it cannot be downloaded.
    """
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model_id, "config.json")
    except ValueError:  # not a valid repo id: the loader says so
        return
    if isinstance(cached, str):
        return
    why = hub_unreachable()
    if why is not None:
        raise ValueError(
            f"cannot load model {model_id!r}: it is not a local directory, not in the Hugging Face "
            f"cache, and the hub cannot be reached ({why}); download it where there is a "
            "network (`hf download ID`) or pass a local model folder"
        )


@contextlib.contextmanager
def peft_quietly() -> Iterator[None]:
    """Hide the ``is_gradient_checkpointing`` FutureWarning that peft's ``PeftModel``
    triggers in transformers >= 5 (peft reads the deprecated property; nothing the user
    can act on).  Other warnings pass."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning
        )
        yield


def load_hf_model(source: ModelSource, torch_dtype: Any, *, trust_remote_code: bool = False) -> Any:
    """A transformers causal LM for ``source``; an adapter is applied with peft and merged
    into the base weights (``merge_and_unload``: generation then costs what the base costs).

    Raises:
        OSError: transformers cannot load the folder / hub id.
        ImportError: an adapter without peft installed (``pip install peft``).
    """
    from transformers import AutoModelForCausalLM

    if not source.is_adapter:
        return AutoModelForCausalLM.from_pretrained(
            source.path, dtype=torch_dtype, trust_remote_code=trust_remote_code
        )
    try:
        from peft import PeftModel
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(f"{source.path} is a LoRA adapter: loading it needs peft") from exc
    base = AutoModelForCausalLM.from_pretrained(
        source.base, dtype=torch_dtype, trust_remote_code=trust_remote_code
    )
    with peft_quietly():
        return PeftModel.from_pretrained(base, source.path).merge_and_unload()


def tokenizer_path(source: ModelSource) -> str:
    """Where the tokenizer is: the adapter folder when ragen-train saved one there, else the base."""
    if source.is_adapter and not (Path(source.path) / "tokenizer_config.json").is_file():
        return str(source.base)
    return source.path


def merged_model_dir(source: ModelSource, cache: Path | None = None) -> str:
    """A plain model folder for back-ends that load only those (vLLM): for an adapter, the
    base with the adapter merged, saved once under ``cache`` (default
    ``~/.cache/ragen/merged/<hash of the adapter files and the base>``); else ``source.path``.

    Raises:
        OSError, ImportError: as :func:`load_hf_model`.
    """
    if not source.is_adapter:
        return source.path
    from transformers import AutoTokenizer

    digest = hashlib.sha256(str(source.base).encode())
    for f in sorted(Path(source.path).iterdir()):
        if f.is_file():
            digest.update(f.name.encode() + f.read_bytes())
    root = cache or Path(os.environ.get("RAGEN_CACHE", "~/.cache/ragen")).expanduser() / "merged"
    dest = root / digest.hexdigest()[:16]
    if (dest / "config.json").is_file():
        return str(dest)
    model = load_hf_model(source, "auto")  # the base's own dtype
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(tokenizer_path(source)).save_pretrained(tmp)
    try:
        tmp.rename(dest)
    except OSError:  # another process merged it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return str(dest)


def model_fingerprint(model: str | Path | None) -> str | None:
    """A hash of a saved model's files, from the manifest ragen-train wrote with it
    (``final_model/manifest.json``, or the checkpoint's ``step_N/manifest.json`` entries
    under ``model/``): sha256 of the sorted ``name:sha256`` lines.  ``None`` for a model
    without a manifest (a hub id, ``tiny``, a folder saved elsewhere).

    Two evaluations of the same path score the same model only when their fingerprints
    agree: a later training run into the same folder replaces the files.
    """
    if not model or str(model) == "tiny":
        return None
    d = Path(model).expanduser()
    entries: dict[str, str] = {}
    own = _read_json(d / "manifest.json")
    if isinstance(own, dict) and isinstance(own.get("files"), dict):
        entries = {k: v.get("sha256", "") for k, v in own["files"].items() if isinstance(v, dict)}
    else:
        ckpt = _read_json(d.parent / "manifest.json")
        files = ckpt.get("files") if isinstance(ckpt, dict) else None
        if isinstance(files, dict):
            prefix = d.name + "/"
            entries = {
                k[len(prefix) :]: v.get("sha256", "")
                for k, v in files.items()
                if k.startswith(prefix) and isinstance(v, dict)
            }
    if not entries:
        return None
    lines = "\n".join(f"{k}:{v}" for k, v in sorted(entries.items()))
    return hashlib.sha256(lines.encode()).hexdigest()
