"""Every vLLM and SGLang name the serving plugins touch, in one table.

The plugins reach into code they do not own: module paths, classes,
methods, attributes, config fields and environment variables of vLLM and
SGLang.  Each one is a row of TOUCH_POINTS, with where the framework
defines it.  testsuite/probes/test_serving_contract.py reads the released
packages' source (their wheels, downloaded without dependencies, read with
zipfile and ast, never imported) and checks every row; the same test checks
that the plugin modules read no framework attribute the table lacks.

A row's kind says what is checked in MODULE's source:
  module    the module exists (MODULE.py or MODULE/__init__.py)
  function  `def NAME` at module level
  class     `class NAME` at module level
  method    `def NAME` in the class (NAME is Class.method)
  attr      Class.attr is a class-level field, a property or method, or
            assigned as `self.attr` in one of the class's methods
  param     Class.method(param): the method takes that parameter
  literal   the string NAME is a constant somewhere in the module, or a
            name it assigns (entry point groups, environment variables,
            names built at run time)

A row's alt groups it with others ("" : a required row).  The rows of
"optional/NAME" may be missing, all of them: the plugin works without them
(an older vLLM lacks the worker extension's init/destroy hooks; the
extension's RPC methods and register() still work; vLLM 0.34 removed the
V1 model runner and VLLM_USE_V2_MODEL_RUNNER, and its one runner is V2).
A release that keeps some of NAME's rows and not the others is a fault:
the plugin would take that path and fail half way.  The rows of
"GROUP/PATH" are alternatives: frameworks moved things between versions
(SGLang 0.5.11 keeps ranks on the ModelRunner, 0.5.23 in
sglang.srt.runtime_context); GROUP holds when every row of one of its
paths does, and the plugins try them in the order listed.
"""

from __future__ import annotations

from typing import NamedTuple


class TouchPoint(NamedTuple):
    framework: str          # "vllm" | "sglang" (the PyPI distribution)
    kind: str               # see the module docstring
    module: str             # where it is defined
    name: str               # what, in that module
    use: str                # what the plugin does with it
    alt: str = ""           # alternatives group ("" : required)


# Supported versions: (distribution, oldest supported, newest checked).  The
# oldest is where the plugin's entry point group and every required touch
# point exist; the newest is the newest release the contract test ran on.  A
# version outside gets a warning naming it at load (the plugin still tries).
SUPPORTED = {
    "vllm": ("0.29.0", "0.34.0"),
    "sglang": ("0.5.11", "0.5.23"),
}

_V = "vllm"
_S = "sglang"
_XH = "optional/extension-hooks"     # the worker extension's hooks (0.33 on)
_V1 = "optional/v1-runner"           # vLLM's V1 model runner (up to 0.33)
_WB = "vllm.v1.worker.worker_base"
_GW = "vllm.v1.worker.gpu_worker"
_R1 = "vllm.v1.worker.gpu_model_runner"
_R2 = "vllm.v1.worker.gpu.model_runner"
_MR = "sglang.srt.model_executor.model_runner"
_RC = "sglang.srt.runtime_context"
_CG = "sglang.srt.model_executor.cuda_graph_config"
_SA = "sglang.srt.server_args"

TOUCH_POINTS: tuple[TouchPoint, ...] = (
    # ------------------------------------------------------------ vLLM: loading
    TouchPoint(_V, "literal", "vllm.plugins", "vllm.general_plugins",
               "entry point group of register() (pyproject.toml)"),
    TouchPoint(_V, "function", "vllm.plugins", "load_general_plugins",
               "calls register() in every process, unguarded"),
    TouchPoint(_V, "literal", "vllm.envs", "VLLM_PLUGINS", "the user's plugin filter"),
    TouchPoint(_V, "method", _WB, "WorkerWrapperBase.init_worker",
               "loads the plugins, then builds the worker"),
    TouchPoint(_V, "class", _WB, "WorkerBase", "its __init__ is wrapped by register()"),
    TouchPoint(_V, "method", _WB, "WorkerBase.__init__", "wrapped: hooks the worker's load_model"),
    TouchPoint(_V, "attr", _WB, "WorkerBase.vllm_config", "the worker's resolved config"),
    TouchPoint(_V, "attr", _WB, "WorkerBase.parallel_config", "world and TP sizes"),
    TouchPoint(_V, "attr", _WB, "WorkerBase.rank", "the worker's global rank"),
    TouchPoint(_V, "attr", _WB, "WorkerBase.local_rank", "metadata serving.local_rank"),
    TouchPoint(_V, "attr", _WB, "WorkerBase.model_runner", "the runner holding the model"),
    TouchPoint(_V, "method", _GW, "Worker.load_model",
               "wrapped per worker: the probe attaches after it"),
    TouchPoint(_V, "method", _GW, "Worker.init_device", "builds model_runner (before load_model)"),
    TouchPoint(_V, "literal", _WB, "init_worker_extension",
               "WorkerExtension hook, called unguarded after init_device", _XH),
    TouchPoint(_V, "literal", _WB, "destroy_worker_extension", "WorkerExtension hook at shutdown",
               _XH),
    TouchPoint(_V, "attr", "vllm.config.parallel", "ParallelConfig.worker_extension_cls",
               "--worker-extension-cls names WorkerExtension"),
    TouchPoint(_V, "function", "vllm.entrypoints.serve.dev.rpc.api_router", "collective_rpc",
               "POST /collective_rpc: passes args and kwargs as strings"),
    TouchPoint(_V, "literal", "vllm.envs", "VLLM_SERVER_DEV_MODE",
               "enables POST /collective_rpc"),
    # ------------------------------------------------------------ vLLM: model and requests
    # V2 is the only runner from 0.34 on (vllm/v1/worker/gpu_worker.py
    # _make_model_runner); before, the default.  The plugin tells the two
    # apart by the runner's own methods (V2's prepare_inputs), not by the
    # worker's use_v2_model_runner, which 0.34 dropped with the V1 runner.
    TouchPoint(_V, "literal", "vllm.envs", "VLLM_USE_V2_MODEL_RUNNER",
               "the user's choice of runner up to 0.33 (0: V1); 0.34 refuses 0", _V1),
    TouchPoint(_V, "method", _R2, "GPUModelRunner.get_model", "V2: the model"),
    TouchPoint(_V, "attr", _R2, "GPUModelRunner.model", "V2: the model, when get_model fails"),
    TouchPoint(_V, "method", _R2, "GPUModelRunner.execute_model",
               "V2: wrapped per runner: a dummy run has no requests"),
    TouchPoint(_V, "param", _R2, "GPUModelRunner.execute_model(dummy_run)",
               "V2: profiling, warm-up, capture and DP padding runs"),
    TouchPoint(_V, "method", _R2, "GPUModelRunner.prepare_inputs",
               "V2: wrapped per runner: the batch it returns is the step's; a runner "
               "that has it is a V2 one"),
    TouchPoint(_V, "attr", "vllm.v1.worker.gpu.input_batch", "InputBatch.req_ids",
               "V2: the step's request ids, in row order"),
    TouchPoint(_V, "attr", "vllm.v1.worker.gpu.input_batch", "InputBatch.query_start_loc_np",
               "V2: each request's rows of the flattened tokens (per-request stats)"),
    TouchPoint(_V, "attr", "vllm.v1.worker.gpu.input_batch", "InputBatch.num_tokens",
               "V2: the tokens of the batch (its tensors' leading size)"),
    TouchPoint(_V, "attr", "vllm.v1.worker.gpu.input_batch",
               "InputBatch.num_tokens_after_padding",
               "V2: the leading size when padded (CUDA graphs, DP)"),
    # the V1 runner, up to 0.33 with VLLM_USE_V2_MODEL_RUNNER=0; 0.34 removed it
    TouchPoint(_V, "method", _R1, "GPUModelRunner.get_model",
               "V1: the model, unwrapped from CUDA graph wrappers", _V1),
    TouchPoint(_V, "attr", _R1, "GPUModelRunner.input_batch", "V1: the persistent batch", _V1),
    TouchPoint(_V, "attr", "vllm.v1.worker.gpu_input_batch", "InputBatch.req_ids",
               "V1: the step's request ids, in row order", _V1),
    TouchPoint(_V, "method", _R1, "GPUModelRunner._dummy_run",
               "V1: wrapped per runner: a dummy run has no requests", _V1),
    TouchPoint(_V, "attr", _R1, "GPUModelRunner.model", "V1: the model, when get_model fails", _V1),
    # ------------------------------------------------------------ vLLM: parallelism
    TouchPoint(_V, "attr", "vllm.config.parallel", "ParallelConfig.world_size", "workers"),
    TouchPoint(_V, "attr", "vllm.config.parallel", "ParallelConfig.tensor_parallel_size",
               "TP size"),
    TouchPoint(_V, "attr", "vllm.config.parallel", "ParallelConfig.pipeline_parallel_size",
               "PP size"),
    TouchPoint(_V, "function", "vllm.distributed.parallel_state",
               "get_tensor_model_parallel_rank", "TP rank"),
    TouchPoint(_V, "function", "vllm.distributed.parallel_state", "get_pp_group", "PP group"),
    TouchPoint(_V, "attr", "vllm.distributed.parallel_state", "GroupCoordinator.rank_in_group",
               "PP rank"),
    # ------------------------------------------------------------ vLLM: execution
    TouchPoint(_V, "attr", "vllm.config.vllm", "VllmConfig.compilation_config",
               "the resolved compilation config"),
    TouchPoint(_V, "attr", "vllm.config.vllm", "VllmConfig.model_config", "the model's config"),
    TouchPoint(_V, "attr", "vllm.config.compilation", "CompilationConfig.mode",
               "torch.compile mode, resolved (--enforce-eager sets NONE)"),
    TouchPoint(_V, "attr", "vllm.config.compilation", "CompilationConfig.cudagraph_mode",
               "CUDA graph mode, resolved (--enforce-eager sets NONE)"),
    TouchPoint(_V, "attr", "vllm.config.compilation", "CompilationMode.NONE", "no torch.compile"),
    TouchPoint(_V, "attr", "vllm.config.compilation", "CUDAGraphMode.NONE", "no CUDA graphs"),
    TouchPoint(_V, "attr", "vllm.config.model", "ModelConfig.model", "metadata serving.model"),
    TouchPoint(_V, "attr", "vllm.config.model", "ModelConfig.enforce_eager",
               "metadata serving.enforce_eager (the flag; the decision is the two modes)"),

    # ------------------------------------------------------------ SGLang: loading
    TouchPoint(_S, "literal", "sglang.srt.plugins", "sglang.srt.plugins",
               "entry point group of register() (pyproject.toml)"),
    TouchPoint(_S, "function", "sglang.srt.plugins", "load_plugins",
               "calls register() in every process (guarded), then apply_hooks"),
    TouchPoint(_S, "literal", "sglang.srt.environ", "SGLANG_PLUGINS", "the user's plugin filter"),
    TouchPoint(_S, "method", "sglang.srt.plugins.hook_registry", "HookRegistry.register",
               "registers the AFTER hook on ModelRunner.load_model"),
    TouchPoint(_S, "attr", "sglang.srt.plugins.hook_registry", "HookType.AFTER",
               "hook(result, *args, **kwargs) after the original"),
    TouchPoint(_S, "method", _MR, "ModelRunner.load_model", "hooked: the probe attaches after it"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.model", "the model"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.server_args", "metadata serving.model"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.gpu_id", "metadata serving.gpu_id"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.is_draft_worker",
               "a speculative draft model gets no probe of its own"),
    TouchPoint(_S, "attr", "sglang.srt.server_args", "ServerArgs.model_path",
               "metadata serving.model (0.5.11)", "model_path/0.5.11"),
    TouchPoint(_S, "attr", "sglang.srt.arg_groups.fields.model", "Model.model_path",
               "metadata serving.model (0.5.2x)", "model_path/0.5.2x"),
    TouchPoint(_S, "attr", "sglang.srt.model_executor.forward_batch_info", "ForwardBatch.rids",
               "the step's request ids (the model's forward gets the ForwardBatch)"),
    TouchPoint(_S, "attr", "sglang.srt.model_executor.forward_batch_info",
               "ForwardBatch.forward_mode", "recognises a ForwardBatch argument"),
    TouchPoint(_S, "attr", "sglang.srt.model_executor.forward_batch_info",
               "ForwardBatch.batch_size", "recognises a ForwardBatch argument"),
    TouchPoint(_S, "attr", "sglang.srt.model_executor.forward_batch_info",
               "ForwardBatch.extend_seq_lens_cpu", "an extend's tokens by request (their rows)"),
    TouchPoint(_S, "attr", "sglang.srt.model_executor.forward_batch_info",
               "ForwardBatch.input_ids", "the batch's leading size (padded or not)"),
    TouchPoint(_S, "method", "sglang.srt.model_executor.forward_batch_info",
               "ForwardMode.is_decode", "a decode forward: one row a request"),
    TouchPoint(_S, "method", "sglang.srt.model_executor.forward_batch_info",
               "ForwardMode.is_extend", "an extend: extend_seq_lens_cpu rows a request"),
    TouchPoint(_S, "method", "sglang.srt.model_executor.forward_batch_info",
               "ForwardMode.is_target_verify", "speculative verify: rows not known"),
    # ------------------------------------------------------------ SGLang: ranks
    TouchPoint(_S, "function", _RC, "get_parallel", "ranks and sizes (0.5.2x)", "ranks/0.5.2x"),
    TouchPoint(_S, "literal", _RC, "tp_rank", "get_parallel().tp_rank", "ranks/0.5.2x"),
    TouchPoint(_S, "literal", _RC, "pp_rank", "get_parallel().pp_rank", "ranks/0.5.2x"),
    TouchPoint(_S, "attr", "sglang.srt.arg_groups.fields.parallel", "Parallel.tp_size",
               "get_parallel().tp_size", "ranks/0.5.2x"),
    TouchPoint(_S, "attr", "sglang.srt.arg_groups.fields.parallel", "Parallel.pp_size",
               "get_parallel().pp_size", "ranks/0.5.2x"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.tp_rank", "ranks (0.5.11)", "ranks/0.5.11"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.tp_size", "ranks (0.5.11)", "ranks/0.5.11"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.pp_rank", "ranks (0.5.11)", "ranks/0.5.11"),
    TouchPoint(_S, "attr", _MR, "ModelRunner.pp_size", "ranks (0.5.11)", "ranks/0.5.11"),
    # ------------------------------------------------------------ SGLang: execution
    TouchPoint(_S, "function", _RC, "get_exec", "the resolved exec config (0.5.2x)",
               "exec/0.5.2x"),
    TouchPoint(_S, "attr", "sglang.srt.arg_groups.fields.exec_", "ExecGraph.cuda_graph_config",
               "get_exec().graph.cuda_graph_config: resolved per-phase CUDA graphs "
               "(--cuda-graph-config JSON, --cuda-graph-backend-*, --disable-*)", "exec/0.5.2x"),
    TouchPoint(_S, "literal", "sglang.srt.arg_groups.fields.exec_", "exec.graph",
               "the namespace get_exec().graph", "exec/0.5.2x"),
    TouchPoint(_S, "attr", "sglang.srt.arg_groups.fields.exec_", "ExecGraph.enable_torch_compile",
               "get_exec().graph.enable_torch_compile", "exec/0.5.2x"),
    TouchPoint(_S, "attr", _CG, "CudaGraphConfig.decode", "decode phase", "exec/0.5.2x"),
    TouchPoint(_S, "attr", _CG, "CudaGraphConfig.prefill", "prefill phase", "exec/0.5.2x"),
    TouchPoint(_S, "attr", _CG, "PhaseConfig.backend", "full | breakable | disabled", "exec/0.5.2x"),
    TouchPoint(_S, "literal", _CG, "disabled", "Backend.DISABLED: the phase runs eagerly",
               "exec/0.5.2x"),
    TouchPoint(_S, "attr", _SA, "ServerArgs.disable_cuda_graph",
               "decode CUDA graphs off, resolved in place (0.5.11)", "exec/0.5.11"),
    TouchPoint(_S, "attr", _SA, "ServerArgs.disable_piecewise_cuda_graph",
               "prefill piecewise CUDA graphs off, resolved in place (0.5.11)", "exec/0.5.11"),
    TouchPoint(_S, "attr", _SA, "ServerArgs.enable_torch_compile",
               "torch.compile, resolved in place (0.5.11)", "exec/0.5.11"),
)


def rows(framework: str) -> tuple[TouchPoint, ...]:
    return tuple(t for t in TOUCH_POINTS if t.framework == framework)


def version_tuple(v: str) -> tuple[int, ...]:
    """The leading numeric release of a version string ("0.5.12.post1" ->
    (0, 5, 12); "0.34.0rc1" -> (0, 34, 0)): enough to compare releases."""
    out: list[int] = []
    for part in v.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def version_note(framework: str, installed: str | None) -> str | None:
    """None when installed is in the supported range; else what to say."""
    lo, hi = SUPPORTED[framework]
    if installed is None:
        return f"{framework} is not installed as a distribution; cannot check its version"
    v = version_tuple(installed)
    if v < version_tuple(lo):
        return (f"{framework} {installed} is older than {lo}, the oldest version this plugin "
                f"supports (checked: {lo} to {hi}); it may not attach")
    if v[:len(version_tuple(hi))] > version_tuple(hi):
        return (f"{framework} {installed} is newer than {hi}, the newest version this plugin "
                f"was checked against ({lo} to {hi}); if it misbehaves, see doc/serving.md")
    return None
