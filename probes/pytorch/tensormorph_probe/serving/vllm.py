"""The vLLM plugin: a probe in every vLLM worker (doc/serving.md).

vLLM loads the entry points of group `vllm.general_plugins` in every
process it creates (API server, engine core, each worker), before the
worker is built (vllm.plugins.load_general_plugins, filtered by
VLLM_PLUGINS).  register() is that entry point.  It does nothing unless
TENSORMORPH_LISTEN or TENSORMORPH_RECORD is set; then it wraps
WorkerBase.__init__ so that, in a worker process, the worker's
load_model is followed by attach_worker(): a Probe on
worker.model_runner.model, with its own socket (PID.sock), so that each
tensor-parallel rank is debugged on its own.

WorkerExtension is the same thing through vLLM's documented extension
point, `worker_extension_cls`: vLLM adds it to the worker class's bases,
and its methods are called on every worker with collective_rpc
(`llm.collective_rpc("tensormorph_attach")`, or POST /collective_rpc of
`vllm serve` in VLLM_SERVER_DEV_MODE).

Read against vLLM 0.33.0 (see doc/serving.md for the files and commits).
"""

from __future__ import annotations

import functools
import os
from typing import Any

from . import common

def register() -> None:
    """The `vllm.general_plugins` entry point; idempotent (vLLM may load
    plugins more than once, and in many processes)."""
    common.register_plugin("vllm", "vllm.v1.worker.worker_base",
                           lambda worker_base: patch_worker_base(worker_base.WorkerBase))


def patch_worker_base(cls: type) -> None:
    """Makes every worker built from now on (vLLM's WorkerBase, or a
    stand-in of it) attach a probe after its load_model.  In a worker
    process vLLM loads the plugins inside WorkerWrapperBase.init_worker,
    just before it builds the worker, so the worker's constructor is the
    first place the plugin can reach it; every worker class (GPU, CPU,
    the platforms') runs WorkerBase.__init__ through super()."""
    orig = cls.__init__
    if getattr(orig, "_tensormorph", False):
        return

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        hook_load_model(self)

    __init__._tensormorph = True         # type: ignore[attr-defined]
    cls.__init__ = __init__              # type: ignore[misc]


def hook_load_model(worker: Any) -> None:
    """After worker.load_model() (run by the executor on every worker), a
    probe is attached to the loaded model.  The instance attribute shadows
    the class's method, so only this worker is affected."""
    orig = worker.load_model
    if getattr(orig, "_tensormorph", False):
        return

    @functools.wraps(orig)
    def load_model(*args: Any, **kwargs: Any) -> Any:
        result = orig(*args, **kwargs)
        attach_worker(worker)
        return result

    load_model._tensormorph = True       # type: ignore[attr-defined]
    worker.load_model = load_model


def _enum_name(v: Any) -> str:
    return getattr(v, "name", None) or str(v)


def not_eager(vllm_config: Any) -> list[str]:
    """What in a vLLM config the probe cannot see into (empty: nothing).
    torch.compile is fine: the probe records inside compiled graphs
    (_compiled.py).  CUDA graph replays are not: cudagraph_mode must be
    NONE (--enforce-eager, or -O.cudagraph_mode=NONE with compilation on)."""
    why = []
    comp = getattr(vllm_config, "compilation_config", None)
    mc = getattr(vllm_config, "model_config", None)
    eager_flag = bool(getattr(mc, "enforce_eager", False))
    if comp is not None:
        cg = getattr(comp, "cudagraph_mode", None)
        if cg is not None and _enum_name(cg) != "NONE":
            why.append(f"cudagraph_mode {_enum_name(cg)}")
        elif cg is None and not eager_flag:
            why.append("cudagraph_mode unset (vLLM then captures CUDA graphs)")
    elif not eager_flag:
        why.append("enforce_eager is off")
    return why


def _request_ids(worker: Any) -> Any:
    def ids(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
        # GPUModelRunner.input_batch.req_ids: the batch in the order its
        # rows are laid out for this forward
        batch = getattr(getattr(worker, "model_runner", None), "input_batch", None)
        rids = getattr(batch, "req_ids", None)
        return None if rids is None else [r for r in rids if r is not None]
    return ids


def _model_of(worker: Any) -> Any:
    """The worker's nn.Module: GPUModelRunner.get_model() unwraps the CUDA
    graph / micro-batch wrappers model_runner.model may be."""
    runner = getattr(worker, "model_runner", None)
    model = None
    if runner is not None and hasattr(runner, "get_model"):
        try:
            model = runner.get_model()
        except Exception:
            model = None
    if model is None:
        model = getattr(runner, "model", None)
    return model


def describe_worker(worker: Any) -> common.Worker:
    """A vLLM worker (vllm.v1.worker.gpu_worker.Worker or a stand-in of the
    same shape) as the serving probe sees it."""
    model = _model_of(worker)
    if model is None:
        raise common.ProbeError("vllm: the worker has no model_runner.model (load_model first)")
    cfg = getattr(worker, "vllm_config", None)
    pc = getattr(worker, "parallel_config", None) or getattr(cfg, "parallel_config", None)
    rank = int(getattr(worker, "rank", 0))
    world = int(getattr(pc, "world_size", 1) or 1)
    tp = int(getattr(pc, "tensor_parallel_size", 1) or 1)
    try:
        from vllm.distributed import get_tensor_model_parallel_rank
        tp_rank = int(get_tensor_model_parallel_rank())
    except Exception:
        tp_rank = rank % tp
    extra = {"local_rank": str(getattr(worker, "local_rank", rank))}
    mc = getattr(cfg, "model_config", None)
    if mc is not None:
        extra["model"] = str(getattr(mc, "model", ""))
        extra["enforce_eager"] = str(bool(getattr(mc, "enforce_eager", False))).lower()
    return common.Worker("vllm", model, rank, world, tp_rank, tp, not_eager(cfg),
                         _request_ids(worker), extra)


def attach_worker(worker: Any, **options: Any) -> common.Session | None:
    """Starts this worker's probe as the environment (or options: level,
    record, listen, pause) asks; None when nothing was asked."""
    return common.start(describe_worker(worker), **options)


class WorkerExtension:
    """Mixed into vLLM's worker class through worker_extension_cls
    (`--worker-extension-cls tensormorph_probe.serving.vllm.WorkerExtension`).
    Its names must not exist on the worker class (vLLM asserts so): the
    RPC methods start with tensormorph_; init_worker_extension and
    destroy_worker_extension are the hooks vLLM (0.33) calls on the worker
    after init_device and at shutdown."""

    def init_worker_extension(self) -> None:
        # as register() does through WorkerBase.__init__, for servers that
        # name the extension but restrict VLLM_PLUGINS
        if common.requested():
            model = _model_of(self)
            if model is not None:
                attach_worker(self)
            else:
                hook_load_model(self)

    def destroy_worker_extension(self) -> None:
        model = _model_of(self)
        if model is not None:
            common.stop(model)

    def tensormorph_attach(self, level: int | None = None, record: str | None = None,
                           listen: str | None = None,
                           pause: float | None = None) -> dict[str, Any]:
        """Starts this worker's probe (listen="1": the default socket;
        pause: seconds a stop may hold the server, required to listen)."""
        s = common.start(describe_worker(self), level=level, record=record, listen=listen,
                         pause=pause)
        return self.tensormorph_status() if s is not None else {"rank": getattr(
            self, "rank", 0), "pid": os.getpid(), "attached": False}

    def tensormorph_status(self) -> dict[str, Any]:
        model = _model_of(self)
        s = common.session_of(model) if model is not None else None
        out: dict[str, Any] = {"rank": getattr(self, "rank", 0), "pid": os.getpid(),
                               "attached": s is not None}
        if s is not None:
            out.update(address=s.address, trace=s.probe.path, forwards=s.forwards,
                       eager=not s.worker.not_eager, requests_log=s.requests_path,
                       pause=s.pause, released=s.released)
        return out

    def tensormorph_requests(self, step: int) -> list[str] | None:
        model = _model_of(self)
        s = common.session_of(model) if model is not None else None
        return s.requests_at(step) if s is not None else None

    def tensormorph_detach(self) -> bool:
        model = _model_of(self)
        return common.stop(model) if model is not None else False
