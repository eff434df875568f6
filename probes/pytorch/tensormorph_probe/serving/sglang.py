"""The SGLang plugin: a probe in every SGLang TP worker (doc/serving.md).

SGLang loads the entry points of group `sglang.srt.plugins` in every
process (sglang.srt.plugins.load_plugins, filtered by SGLANG_PLUGINS) and
then applies the hooks they registered with HookRegistry.  register() is
that entry point.  It does nothing unless TENSORMORPH_LISTEN or
TENSORMORPH_RECORD is set; then it registers an AFTER hook on
ModelRunner.load_model, which runs in each tensor-parallel rank's process
with the loaded model as self.model: attach_model_runner() puts a Probe
there, with its own socket (PID.sock).  Request ids come from
ForwardBatch.rids (the model's forward gets the ForwardBatch).

Read against SGLang 0.5.23 (see doc/serving.md for the files and commits).
"""

from __future__ import annotations

from typing import Any

from . import common

TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.load_model"

def register() -> None:
    """The `sglang.srt.plugins` entry point; idempotent."""
    common.register_plugin("sglang", "sglang.srt.plugins.hook_registry",
                           lambda hr: hr.HookRegistry.register(TARGET, _after_load_model,
                                                               hr.HookType.AFTER))


def _after_load_model(result: Any, model_runner: Any, *args: Any, **kwargs: Any) -> None:
    # HookType.AFTER: fn(result, *args, **kwargs); None keeps the result
    attach_model_runner(model_runner)
    return None


def _graph_off(sa: Any, phase: str) -> bool:
    """Whether SGLang's CUDA graphs of phase (decode|prefill) are off:
    --disable-cuda-graph (deprecated, both phases), --disable-PHASE-cuda-graph
    or --cuda-graph-backend-PHASE=disabled (0.5.23's arg_groups)."""
    if getattr(sa, "disable_cuda_graph", False) or getattr(sa, f"disable_{phase}_cuda_graph",
                                                           False):
        return True
    backend = getattr(sa, f"cuda_graph_backend_{phase}", None)
    return backend is not None and str(getattr(backend, "value", backend)).lower() == "disabled"


def not_eager(server_args: Any) -> list[str]:
    """What in SGLang's server arguments the probe cannot see into: CUDA
    graph replays (--enable-torch-compile alone is fine: the probe records
    inside compiled graphs)."""
    if server_args is None:
        return ["no server_args to check"]
    why = [f"{phase} CUDA graphs on (--disable-cuda-graph not given)"
           for phase in ("decode", "prefill") if not _graph_off(server_args, phase)]
    if len(why) == 2:
        why = ["CUDA graphs on (--disable-cuda-graph not given)"]
    if getattr(server_args, "enable_piecewise_cuda_graph", False):
        why.append("--enable-piecewise-cuda-graph")
    return why


def _ranks(mr: Any) -> tuple[int, int, int, int]:
    """(tp_rank, tp_size, pp_rank, pp_size): SGLang 0.5.23 keeps them in
    sglang.srt.runtime_context.get_parallel(); older ModelRunners had them
    as attributes."""
    par: Any = None
    try:
        from sglang.srt.runtime_context import get_parallel
        par = get_parallel()
    except Exception:
        par = None

    def pick(name: str, default: int) -> int:
        for src in (par, mr):
            try:
                v = getattr(src, name, None)
            except Exception:           # a ParallelContext not published yet
                v = None
            if isinstance(v, int):
                return v
        return default

    return pick("tp_rank", 0), pick("tp_size", 1) or 1, pick("pp_rank", 0), pick("pp_size", 1) or 1


def _forward_batch(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    fb = kwargs.get("forward_batch")
    if fb is not None:
        return fb
    for a in args:
        if hasattr(a, "forward_mode") and hasattr(a, "batch_size"):
            return a
    return None


def _request_ids(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
    # ForwardBatch.rids (from ScheduleBatch.reqs); the model's forward gets
    # the ForwardBatch as an argument
    fb = _forward_batch(args, kwargs)
    rids = getattr(fb, "rids", None) if fb is not None else None
    return None if rids is None else [str(r) for r in rids]


def describe_model_runner(mr: Any) -> common.Worker:
    model = getattr(mr, "model", None)
    if model is None:
        raise common.ProbeError("sglang: the ModelRunner has no model (load_model first)")
    tp_rank, tp_size, pp_rank, pp_size = _ranks(mr)
    sa = getattr(mr, "server_args", None)
    extra = {"pp_rank": str(pp_rank), "pp_size": str(pp_size),
             "gpu_id": str(getattr(mr, "gpu_id", ""))}
    if sa is not None:
        extra["model"] = str(getattr(sa, "model_path", ""))
    return common.Worker("sglang", model, pp_rank * tp_size + tp_rank, tp_size * pp_size,
                         tp_rank, tp_size, not_eager(sa), _request_ids, extra)


def attach_model_runner(mr: Any, **options: Any) -> common.Session | None:
    """Starts this rank's probe as the environment (or options) asks.
    SGLang's runners call model.forward(...) directly, which skips the
    root module's hooks: the model's forward is routed through its hooks
    first (common.route_forward_through_hooks)."""
    w = describe_model_runner(mr)
    s = common.start(w, **options)
    if s is not None:
        common.route_forward_through_hooks(w.model)
    return s
