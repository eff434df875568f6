"""The SGLang plugin: a probe in every SGLang TP worker (doc/serving.md).

SGLang loads the entry points of group `sglang.srt.plugins` in each of its
processes (sglang.srt.plugins.load_plugins, filtered by SGLANG_PLUGINS:
the engine or launcher, each scheduler, the detokenizer, the data-parallel
controller) and then applies the hooks they registered with HookRegistry.
register() is that entry point.  It does nothing unless TENSORMORPH_LISTEN
or TENSORMORPH_RECORD is set; then it registers an AFTER hook on
ModelRunner.load_model, which runs only in the scheduler processes (one per
tensor- and pipeline-parallel rank) with the loaded model as self.model:
attach_model_runner() puts a Probe there, with its own socket (PID.sock).
The other processes load the plugin and never probe.  Request ids come
from ForwardBatch.rids (the model's forward gets the ForwardBatch).

SGLang 0.5.11 is the first with the `sglang.srt.plugins` group.  Where the
ranks and the execution decisions live moved since: 0.5.11 keeps them on
the ModelRunner and in server_args (resolved in place); 0.5.2x in
sglang.srt.runtime_context (get_parallel(), get_exec()).  Both are read,
the newer first.  Every SGLang name used here is a row of
touchpoints.TOUCH_POINTS, checked against the released source by
testsuite/probes/test_serving_contract.py.  The hook never raises into
SGLang (common.guarded): a debugging aid must not stop a scheduler.
"""

from __future__ import annotations

from typing import Any

import torch

from . import common

FRAMEWORK = "sglang"
TARGET = "sglang.srt.model_executor.model_runner.ModelRunner.load_model"


def register() -> None:
    """The `sglang.srt.plugins` entry point; idempotent; never raises."""
    common.register_plugin(FRAMEWORK, "sglang.srt.plugins.hook_registry",
                           lambda hr: hr.HookRegistry.register(TARGET, _after_load_model,
                                                               hr.HookType.AFTER))


def _after_load_model(result: Any, model_runner: Any, *args: Any, **kwargs: Any) -> None:
    # HookType.AFTER: fn(result, *args, **kwargs); None keeps the result
    common.guarded("sglang plugin: attaching the probe", attach_model_runner, model_runner)
    return None


def _runtime_context() -> Any:
    """sglang.srt.runtime_context (0.5.2x), or None (0.5.11)."""
    try:
        from sglang.srt import runtime_context
    except ImportError:
        return None
    return runtime_context


def _backend_off(backend: Any) -> bool:
    return str(getattr(backend, "value", backend)).lower() == "disabled"


def execution_of(mr: Any) -> common.Execution:
    """How SGLang resolved this rank's execution.

    0.5.2x: get_exec().graph, the exec namespace the argument resolution
    published: cuda_graph_config holds each phase's backend (full,
    breakable or disabled) after --cuda-graph-config JSON (which wins),
    --cuda-graph-backend-PHASE, --disable-PHASE-cuda-graph, the deprecated
    --disable-cuda-graph and the model's and platform's overrides were
    folded in; enable_torch_compile likewise.
    0.5.11: server_args itself, resolved in place by its __post_init__:
    disable_cuda_graph (decode graphs), disable_piecewise_cuda_graph (the
    prefill's piecewise graphs, on by default) and enable_torch_compile."""
    rc = _runtime_context()
    if rc is not None and hasattr(rc, "get_exec"):
        try:
            graph = rc.get_exec().graph
        except Exception as exc:        # not published in this process
            return common.Execution(graphs=(f"execution unresolved ({exc})",),
                                    source="get_exec()")
        cfg = getattr(graph, "cuda_graph_config")
        graphs = tuple(f"{phase} CUDA graphs ({getattr(getattr(cfg, phase), 'backend')})"
                       for phase in ("decode", "prefill")
                       if not _backend_off(getattr(getattr(cfg, phase), "backend")))
        compiled = ("torch.compile (enable_torch_compile)",) if bool(
            getattr(graph, "enable_torch_compile")) else ()
        return common.Execution(compiled, graphs, "get_exec().graph")
    sa = getattr(mr, "server_args", None)
    if sa is None:
        return common.Execution(graphs=("no server_args to read",), source="ModelRunner")
    graphs = ()
    if not getattr(sa, "disable_cuda_graph", False):
        graphs += ("decode CUDA graphs (disable_cuda_graph off)",)
    if not getattr(sa, "disable_piecewise_cuda_graph", True):
        graphs += ("prefill piecewise CUDA graphs (disable_piecewise_cuda_graph off)",)
    compiled = ("torch.compile (enable_torch_compile)",) if getattr(
        sa, "enable_torch_compile", False) else ()
    return common.Execution(compiled, graphs, "server_args")


def _ranks(mr: Any) -> tuple[int, int, int, int]:
    """(tp_rank, tp_size, pp_rank, pp_size): get_parallel() in 0.5.2x (the
    ModelRunner has no such attributes there), the ModelRunner's
    attributes in 0.5.11."""
    rc = _runtime_context()
    if rc is not None and hasattr(rc, "get_parallel"):
        par = rc.get_parallel()
        return (int(getattr(par, "tp_rank")), int(getattr(par, "tp_size")),
                int(getattr(par, "pp_rank")), int(getattr(par, "pp_size")))
    return (int(getattr(mr, "tp_rank")), int(getattr(mr, "tp_size")),
            int(getattr(mr, "pp_rank", 0)), int(getattr(mr, "pp_size", 1)))


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


def _request_rows(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Each request's rows of the batch's [num_tokens, ...] tensors: one
    token a request in a decode forward, ForwardBatch.extend_seq_lens_cpu[j]
    of request j's in an extend (prefill, or chunked prefill mixed with
    decodes); None for the rest (speculative verify, idle)."""
    fb = _forward_batch(args, kwargs)
    mode = getattr(fb, "forward_mode", None) if fb is not None else None
    n = getattr(fb, "batch_size", None) if fb is not None else None
    if mode is None or not isinstance(n, int) or n < 2:
        return None
    is_decode = getattr(mode, "is_decode", None)
    is_extend = getattr(mode, "is_extend", None)
    is_verify = getattr(mode, "is_target_verify", None)
    if callable(is_decode) and is_decode():
        lens: Any = [1] * n
    elif callable(is_extend) and is_extend() and not (callable(is_verify) and is_verify()):
        lens = getattr(fb, "extend_seq_lens_cpu", None)
    else:
        return None
    if lens is None or len(lens) != n:
        return None
    spans, at = [], 0
    for k in lens:
        spans.append((at, at + int(k)))
        at += int(k)
    sizes = {at}
    ids = getattr(fb, "input_ids", None)
    if isinstance(ids, torch.Tensor) and ids.dim() >= 1:
        sizes.add(int(ids.shape[0]))        # padded for a CUDA graph
    return spans, sorted(sizes)


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
    return common.Worker(FRAMEWORK, model, pp_rank * tp_size + tp_rank, tp_size * pp_size,
                         tp_rank, tp_size, execution_of(mr), _request_ids, extra,
                         _request_rows)


def attach_model_runner(mr: Any, **options: Any) -> common.Session | None:
    """Starts this rank's probe as the environment (or options) asks.
    A speculative-decoding draft model (is_draft_worker) gets none: its
    ModelRunner loads in the same process as the target's and would take
    the same socket.  SGLang's runners call model.forward(...) directly,
    which skips the root module's hooks: the model's forward is routed
    through its hooks first (common.route_forward_through_hooks)."""
    if getattr(mr, "is_draft_worker", False):
        common.say_once("sglang-draft", "sglang: the speculative draft model gets no probe; "
                        "the target model's has one")
        return None
    w = describe_model_runner(mr)
    s = common.start(w, **options)
    if s is not None:
        common.route_forward_through_hooks(w.model)
    return s
