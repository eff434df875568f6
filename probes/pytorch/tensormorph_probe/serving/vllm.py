"""The vLLM plugin: a probe in every vLLM worker (doc/serving.md).

vLLM loads the entry points of group `vllm.general_plugins` in every
process it creates (API server, engine core, each worker), before the
worker is built (vllm.plugins.load_general_plugins, filtered by
VLLM_PLUGINS).  register() is that entry point.  It does nothing unless
TENSORMORPH_LISTEN or TENSORMORPH_RECORD is set; then it wraps
WorkerBase.__init__ so that, in a worker process, the worker's
load_model is followed by attach_worker(): a Probe on
worker.model_runner.get_model(), with its own socket (PID.sock), so that
each tensor- and pipeline-parallel rank is debugged on its own.

vLLM calls register() unguarded (vllm/plugins/__init__.py): anything it
raised would stop the server.  So register() and every hook installed here
catch everything, say it once, and leave the server serving
(common.guarded); only TENSORMORPH_SERVING_STRICT refuses a worker, on
purpose.

The request ids of a step come from the model runner vLLM built: the V2
runner (vllm/v1/worker/gpu/model_runner.py: the only one from vLLM 0.34 on,
the default before) builds each step's batch in prepare_inputs, a local of
execute_model, so that method is wrapped on the runner; the V1 runner (up
to 0.33, VLLM_USE_V2_MODEL_RUNNER=0) keeps the batch in input_batch.  Which
one it is, the runner itself says (V2's prepare_inputs): the worker's
use_v2_model_runner and the variable went with the V1 runner in 0.34.
Profiling, warm-up and capture runs (execute_model(dummy_run=True) in V2,
_dummy_run in V1) are steps with no requests.

WorkerExtension is the same thing through vLLM's documented extension
point, `worker_extension_cls`: vLLM adds it to the worker class's bases,
and its methods are called on every worker with collective_rpc
(`llm.collective_rpc("tensormorph_attach")`, or POST /collective_rpc of
`vllm serve` in VLLM_SERVER_DEV_MODE).

Every vLLM name used here is a row of touchpoints.TOUCH_POINTS, checked
against the released source by testsuite/probes/test_serving_contract.py.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from . import common

FRAMEWORK = "vllm"
WORKER_BASE = "vllm.v1.worker.worker_base"


def register() -> None:
    """The `vllm.general_plugins` entry point; idempotent (vLLM may load
    plugins more than once, and in many processes); never raises."""
    common.register_plugin(FRAMEWORK, WORKER_BASE,
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
        common.guarded("vllm plugin: hooking the worker's load_model", hook_load_model, self)

    __init__._tensormorph = True         # type: ignore[attr-defined]
    cls.__init__ = __init__              # type: ignore[misc]


def hook_load_model(worker: Any) -> None:
    """After worker.load_model() (run by the executor on every worker, after
    init_device built the model runner), a probe is attached to the loaded
    model.  The instance attribute shadows the class's method, so only this
    worker is affected."""
    orig = getattr(worker, "load_model")
    if getattr(orig, "_tensormorph", False):
        return

    @functools.wraps(orig)
    def load_model(*args: Any, **kwargs: Any) -> Any:
        result = orig(*args, **kwargs)
        common.guarded(f"vllm plugin: attaching the probe of rank {_rank(worker)}",
                       attach_worker, worker)
        return result

    load_model._tensormorph = True       # type: ignore[attr-defined]
    worker.load_model = load_model


def _rank(worker: Any) -> int:
    try:
        return int(getattr(worker, "rank", 0))
    except Exception:
        return 0


def _enum_name(v: Any) -> str:
    return str(getattr(v, "name", None) or v)


def execution_of(vllm_config: Any) -> common.Execution:
    """How vLLM resolved this worker's execution: the worker's vllm_config
    is the one VllmConfig.__post_init__ finished, where --enforce-eager,
    -cc.mode, -cc.cudagraph_mode, TORCH_COMPILE_DISABLE and the platform's
    choices have all become compilation_config.mode (CompilationMode) and
    compilation_config.cudagraph_mode (CUDAGraphMode)."""
    comp = getattr(vllm_config, "compilation_config", None)
    if comp is None:
        return common.Execution(compiled=("no compilation_config to read",),
                                source="vllm_config")
    compiled: tuple[str, ...] = ()
    graphs: tuple[str, ...] = ()
    mode = getattr(comp, "mode", None)
    if mode is None:
        compiled = ("compilation mode unresolved (vLLM's default compiles)",)
    elif int(mode) != 0:                    # CompilationMode.NONE
        compiled = (f"torch.compile (compilation mode {_enum_name(mode)})",)
    cg = getattr(comp, "cudagraph_mode", None)
    if cg is None:
        graphs = ("cudagraph_mode unresolved",)
    elif _enum_name(cg) != "NONE":
        graphs = (f"CUDA graphs (cudagraph_mode {_enum_name(cg)})",)
    return common.Execution(compiled, graphs, "vllm_config.compilation_config")


class _Requests:
    """The request ids of the step about to run on one worker, whichever
    runner vLLM built.  ids is None where they are not known (the step
    then is `unknown` to `request`, not "no request")."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        # the runner's shape, not the worker's use_v2_model_runner (gone in
        # 0.34): V2 has prepare_inputs, V1 only _prepare_inputs; in 0.34
        # every runner (GPU, multimodal encoder, XPU, CPU) is a V2 one
        self.v2 = callable(getattr(runner, "prepare_inputs", None))
        self.dummy = 0                      # dummy runs in progress
        self.batch_ids: list[str] | None = None
        self.batch_rows: tuple[list[tuple[int, int]], list[int]] | None = None
        if self.v2:
            _wrap(runner, "execute_model", self._v2_execute_model)
            _wrap(runner, "prepare_inputs", self._v2_prepare_inputs)
        else:
            _wrap(runner, "_dummy_run", self._v1_dummy_run)

    @property
    def kind(self) -> str:
        return "V2" if self.v2 else "V1"

    # V2: execute_model(scheduler_output, ..., dummy_run=False, ...) calls
    # prepare_inputs for a real step, InputBatch.make_dummy for a dummy one
    def _v2_execute_model(self, orig: Any, *args: Any, **kwargs: Any) -> Any:
        dummy = kwargs.get("dummy_run", args[2] if len(args) > 2 else False)
        self.batch_ids = [] if dummy else None
        self.batch_rows = None
        return orig(*args, **kwargs)

    def _v2_prepare_inputs(self, orig: Any, *args: Any, **kwargs: Any) -> Any:
        batch = orig(*args, **kwargs)
        common.guarded("vllm plugin: reading InputBatch.req_ids", self._keep, batch)
        return batch

    def _keep(self, batch: Any) -> None:
        rids = getattr(batch, "req_ids", None)
        self.batch_ids = None if rids is None else [str(r) for r in rids if r is not None]
        # each request's tokens: rows query_start_loc[j] .. [j + 1] of the
        # flattened [num_tokens, ...] tensors (padded to
        # num_tokens_after_padding for a CUDA graph or data parallelism)
        qsl = getattr(batch, "query_start_loc_np", None)
        self.batch_rows = None
        if qsl is not None and self.batch_ids is not None and len(qsl) > len(self.batch_ids):
            q = [int(v) for v in qsl[:len(self.batch_ids) + 1]]
            sizes = {q[-1]}
            for name in ("num_tokens", "num_tokens_after_padding"):
                v = getattr(batch, name, None)
                if isinstance(v, int) and v > 0:
                    sizes.add(v)
            self.batch_rows = ([(q[j], q[j + 1]) for j in range(len(q) - 1)], sorted(sizes))

    def rows(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.batch_rows if self.v2 else None

    # V1: the persistent batch, except in _dummy_run (its rows are stale there)
    def _v1_dummy_run(self, orig: Any, *args: Any, **kwargs: Any) -> Any:
        self.dummy += 1
        try:
            return orig(*args, **kwargs)
        finally:
            self.dummy -= 1

    def ids(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
        if self.v2:
            return self.batch_ids
        if self.dummy:
            return []
        rids = getattr(getattr(self.runner, "input_batch", None), "req_ids", None)
        return None if rids is None else [str(r) for r in rids if r is not None]


def _wrap(obj: Any, name: str, hook: Any) -> None:
    """obj.name(*a, **kw) becomes hook(original, *a, **kw), on this object
    only (an instance attribute shadowing the class's method)."""
    orig = getattr(obj, name, None)
    if orig is None or getattr(orig, "_tensormorph", False):
        return

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return hook(orig, *args, **kwargs)

    wrapper._tensormorph = True             # type: ignore[attr-defined]
    setattr(obj, name, wrapper)


def _model_of(worker: Any) -> Any:
    """The worker's nn.Module: GPUModelRunner.get_model() (V1 unwraps the
    CUDA graph / micro-batch wrappers model_runner.model may be), else
    model_runner.model."""
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


def _parallel_ranks(rank: int, tp: int) -> tuple[int, int]:
    """(tp_rank, pp_rank) of this worker: vLLM's process groups when they
    exist, else the layout vLLM builds them in (TP fastest)."""
    try:
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank
        return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)
    except Exception:
        return rank % tp, rank // tp


def describe_worker(worker: Any) -> common.Worker:
    """A vLLM worker (vllm.v1.worker.gpu_worker.Worker or a stand-in of the
    same shape) as the serving probe sees it."""
    model = _model_of(worker)
    if model is None:
        raise common.ProbeError("vllm: the worker has no model_runner.model (load_model first)")
    cfg = getattr(worker, "vllm_config", None)
    pc = getattr(worker, "parallel_config", None) or getattr(cfg, "parallel_config", None)
    rank = _rank(worker)
    world = int(getattr(pc, "world_size", 1) or 1)
    tp = int(getattr(pc, "tensor_parallel_size", 1) or 1)
    pp = int(getattr(pc, "pipeline_parallel_size", 1) or 1)
    tp_rank, pp_rank = _parallel_ranks(rank, tp)
    runner = getattr(worker, "model_runner", None)
    reqs = None
    if runner is not None:
        # one per runner: its methods stay wrapped after a detach, and a
        # later attach must read what those wrappers keep
        reqs = getattr(runner, "_tensormorph_requests", None)
        if reqs is None:
            reqs = _Requests(runner)
            runner._tensormorph_requests = reqs
    extra = {"local_rank": str(getattr(worker, "local_rank", rank)),
             "pp_rank": str(pp_rank), "pp_size": str(pp)}
    if reqs is not None:
        extra["model_runner"] = reqs.kind
    mc = getattr(cfg, "model_config", None)
    if mc is not None:
        extra["model"] = str(getattr(mc, "model", ""))
        extra["enforce_eager"] = str(bool(getattr(mc, "enforce_eager", False))).lower()
    return common.Worker(FRAMEWORK, model, rank, world, tp_rank, tp, execution_of(cfg),
                         reqs.ids if reqs is not None else None, extra,
                         reqs.rows if reqs is not None else None)


def attach_worker(worker: Any, **options: Any) -> common.Session | None:
    """Starts this worker's probe as the environment (or options: level,
    record, listen, pause) asks; None when nothing was asked."""
    return common.start(describe_worker(worker), **options)


def _opt(name: str, value: Any, conv: Any) -> Any:
    """An RPC argument: POST /collective_rpc passes every argument as a
    string (vllm/entrypoints/serve/dev/rpc/api_router.py), llm.collective_rpc
    as given; "" and None are "not given"."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    try:
        return conv(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError(f"tensormorph_attach: {name} must be {conv.__name__}, "
                         f"got {value!r}") from None


class WorkerExtension:
    """Mixed into vLLM's worker class through worker_extension_cls
    (`--worker-extension-cls tensormorph_probe.serving.vllm.WorkerExtension`).
    Its names must not exist on the worker class (vLLM asserts so): the
    RPC methods start with tensormorph_; init_worker_extension and
    destroy_worker_extension are the hooks vLLM calls on the worker after
    init_device (unguarded) and at shutdown.  None of them raises: an RPC
    that fails answers {"error": ...}."""

    def init_worker_extension(self) -> None:
        # as register() does through WorkerBase.__init__, for servers that
        # name the extension but restrict VLLM_PLUGINS
        common.guarded("vllm WorkerExtension.init_worker_extension", self._tm_init)

    def _tm_init(self) -> None:
        if common.requested():
            if _model_of(self) is not None:
                attach_worker(self)
            else:
                hook_load_model(self)

    def destroy_worker_extension(self) -> None:
        model = _model_of(self)
        if model is not None:
            common.guarded("vllm WorkerExtension.destroy_worker_extension", common.stop, model)

    def tensormorph_attach(self, level: Any = None, record: Any = None, listen: Any = None,
                           pause: Any = None) -> dict[str, Any]:
        """Starts this worker's probe (listen="1": the default socket;
        pause: seconds a stop may hold the server)."""
        try:
            s = common.start(describe_worker(self), level=_opt("level", level, int),
                             record=_opt("record", record, str),
                             listen=_opt("listen", listen, str),
                             pause=_opt("pause", pause, float))
        except Exception as exc:
            return {"rank": _rank(self), "pid": os.getpid(), "attached": False,
                    "error": f"{type(exc).__name__}: {exc}"}
        return self.tensormorph_status() if s is not None else {
            "rank": _rank(self), "pid": os.getpid(), "attached": False}

    def tensormorph_status(self) -> dict[str, Any]:
        model = _model_of(self)
        s = common.session_of(model) if model is not None else None
        out: dict[str, Any] = {"rank": _rank(self), "pid": os.getpid(),
                               "attached": s is not None}
        if s is not None:
            out.update(address=s.address, trace=s.probe.path, forwards=s.forwards,
                       eager=s.worker.execution.eager,
                       execution=s.worker.execution.describe(),
                       observed=not s.worker.not_eager, requests_log=s.requests_path,
                       pause=s.pause, released=s.released)
        return out

    def tensormorph_requests(self, step: Any) -> list[str] | dict[str, Any] | None:
        try:
            n = _opt("step", step, int)
        except ValueError as exc:
            return {"error": str(exc)}
        model = _model_of(self)
        s = common.session_of(model) if model is not None else None
        return s.requests_at(n) if s is not None and n is not None else None

    def tensormorph_detach(self) -> bool:
        model = _model_of(self)
        return bool(common.guarded("vllm WorkerExtension.tensormorph_detach", common.stop,
                                   model)) if model is not None else False
