"""A stand-in vLLM or SGLang server for testsuite/probes/test_serving.py.

Neither framework runs on the CPU machines the testsuite runs on, so this
program plays their part around a real transformers Llama (2 layers, random
weights), shaped after their sources (the rows of
tensormorph_probe/serving/touchpoints.py, checked against the released
wheels by test_serving_contract.py):

  python3 serving_standin.py FRAMEWORK STEPS SLEEP [FLAVOUR]

FRAMEWORK vllm: the engine process loads the general plugins (vLLM's
  process 0 and engine core do); with SERVE_TP * SERVE_PP == 1 the worker
  runs in that process (UniProcExecutor), else one process per rank
  (MultiprocExecutor).  Each worker: WorkerWrapperBase.init_worker (loads
  the plugins, mixes in worker_extension_cls with vLLM's name check, builds
  the worker), init_device (builds the model runner: the vLLM version of
  the stand-in's dist-info decides its shape: from 0.34 the V2 runner
  always and a worker without use_v2_model_runner; before, V2 unless
  VLLM_USE_V2_MODEL_RUNNER=0; then the extension's init_worker_extension),
  load_model, the profiling run and the warm-up runs (dummy runs, before
  any traffic), then STEPS steps of two requests each.  SERVE_RPC=1 calls
  tensormorph_attach as POST /collective_rpc does (arguments as strings).
FRAMEWORK sglang: the engine loads the plugins and starts one scheduler
  process per (pp, tp) rank and a detokenizer process; each loads the
  plugins and applies the hooks (sglang.srt.plugins.load_plugins); only the
  schedulers build a ModelRunner, whose ranks come from
  runtime_context.get_parallel() and whose execution decisions from
  runtime_context.get_exec(), published before the runner is built.

FLAVOUR compiled: the framework resolved a compiled / CUDA graph
  execution; replay: the config says eager but the model's body is
  skipped, as in a CUDA graph replay.
SERVE_BREAK=register|attach|requests makes that part of the plugin raise,
  to show the server serving on.
SERVE_EXTRA_WARMUP=N (vLLM) runs N more warm-up forwards; SERVE_SPLIT=K
  serves step K's two requests in two forwards: two servers that batch
  differently, for compare's alignment by request ids.
SERVE_PACKED=1 (vLLM, V2 runner) serves as vLLM does: the requests of a
  forward flattened into one row of tokens ([1, num_tokens]) with a
  block-diagonal mask and one packed KV cache, the batch carrying
  query_start_loc_np; two prompts (5 and 3 tokens) prefilled together, then
  STEPS - 1 greedy decode forwards of both.  SERVE_ACT=gelu swaps layer 1's
  activation (a changed implementation).
SERVE_HF_REFERENCE=PATH (with SERVE_PACKED) then records the reference in
  the same process, after the server's probe is gone: the same model run as
  Hugging Face runs it, one request per forward (its prompt, then STEPS - 1
  decode forwards with its own KV cache), under a plain
  tensormorph_probe.Probe recording to PATH, each step annotated with its
  request id.

Each process prints "proc ROLE RANK PID" first; a worker prints "status
JSON" at its end.  Exit status: 0 when every process ended well.
"""

import enum
import functools
import json
import os
import pkgutil
import subprocess
import sys
import time
import types
from importlib.metadata import entry_points, version

import torch

NS = types.SimpleNamespace
FRAMEWORK, STEPS, SLEEP = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
FLAVOUR = sys.argv[4] if len(sys.argv) > 4 else ""
ROLE = os.environ.get("SERVE_ROLE", "engine")
RANK = int(os.environ.get("SERVE_RANK_OF_PROC", "0"))
TP = int(os.environ.get("SERVE_TP", "1"))
PP = int(os.environ.get("SERVE_PP", "1"))
BREAK = os.environ.get("SERVE_BREAK", "")
COMPILED = FLAVOUR == "compiled"


def say(*a):
    # one write a line: the stand-in's processes share the test's pipe,
    # and print's pieces (with Python unbuffered) interleave with theirs
    sys.stdout.write(" ".join(map(str, a)) + "\n")
    sys.stdout.flush()


def module(name, **attrs):
    m = sys.modules.get(name) or types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class PPMissingLayer(torch.nn.Identity):
    """vLLM's and SGLang's placeholder for a layer another pipeline rank owns."""

    def forward(self, *args, **kwargs):
        return args[0] if args else next(iter(kwargs.values()))


@functools.cache
def llama_classes():
    """(LlamaForCausalLM, VllmStyleLlama, PackedLlama): transformers is
    imported by the processes that build a model, not by SGLang's engine
    and detokenizer or vLLM's multiprocess engine (seconds of CPU each)."""
    from transformers import LlamaForCausalLM

    class VllmStyleLlama(LlamaForCausalLM):
        """A Llama as vLLM's model classes are: forward returns the hidden
        states, compute_logits (called by the runner, outside forward)
        applies lm_head."""

        def forward(self, input_ids=None, inputs_embeds=None, **kwargs):
            return self.model(input_ids=input_ids, inputs_embeds=inputs_embeds).last_hidden_state

        def compute_logits(self, hidden_states):
            return self.lm_head(hidden_states)

    class PackedLlama(VllmStyleLlama):
        """VllmStyleLlama taking what a packed forward needs: positions, the
        mask and the KV cache (HF takes a prepared 4D mask as it is)."""

        def forward(self, input_ids=None, inputs_embeds=None, positions=None,
                    attention_mask=None, kv_cache=None, **kwargs):
            return self.model(input_ids=input_ids, inputs_embeds=inputs_embeds,
                              position_ids=positions, attention_mask=attention_mask,
                              **{CACHE_ARG: kv_cache}, use_cache=kv_cache is not None
                              ).last_hidden_state

    return LlamaForCausalLM, VllmStyleLlama, PackedLlama


PACKED = os.environ.get("SERVE_PACKED") == "1"
PROMPTS = {"cmpl-a": [3, 5, 7, 9, 11], "cmpl-b": [2, 4, 6]}


def _cache_arg():
    import inspect

    from transformers import LlamaModel
    return "cache" if "cache" in inspect.signature(LlamaModel.forward).parameters \
        else "past_key_values"


CACHE_ARG = _cache_arg() if PACKED else "past_key_values"


def tiny_llama(pp_rank=0):
    from transformers import LlamaConfig
    from transformers.modeling_outputs import BaseModelOutputWithPast

    LlamaForCausalLM, VllmStyleLlama, PackedLlama = llama_classes()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cls = PackedLlama if PACKED else VllmStyleLlama if FRAMEWORK == "vllm" else LlamaForCausalLM
    m = cls(cfg).eval()
    if os.environ.get("SERVE_ACT") == "gelu":
        m.model.layers[1].mlp.act_fn = torch.nn.GELU(approximate="tanh")
    if pp_rank > 0:
        # a later pipeline rank gets hidden states, not tokens: its
        # embedding is a placeholder that never runs
        m.model.embed_tokens = PPMissingLayer()
    if FLAVOUR == "replay":
        m.model.forward = lambda input_ids=None, inputs_embeds=None, **kw: (
            BaseModelOutputWithPast(last_hidden_state=torch.zeros(
                *(input_ids if input_ids is not None else inputs_embeds[..., 0]).shape, 32)))
    return m


def model_inputs(model, input_ids, pp_rank):
    if pp_rank > 0:
        return {"inputs_embeds": torch.randn(*input_ids.shape, 32)}
    return {"input_ids": input_ids}


def load_plugins(group, allowed_env, guarded):
    """vllm.plugins.load_plugins_by_group / sglang.srt.plugins.load_plugins:
    the entry points of group, filtered by name; vLLM calls them
    unguarded, SGLang catches what they raise."""
    allowed = os.environ.get(allowed_env)
    if group == "vllm.general_plugins":        # vllm.envs: unset -> None, else split
        allowed = None if allowed is None else set(allowed.split(","))
    else:                                       # sglang: empty -> None
        allowed = None if not allowed else {x.strip() for x in allowed.split(",") if x.strip()}
    funcs = [ep.load() for ep in entry_points(group=group)
             if allowed is None or ep.name in allowed]
    for f in funcs:
        if guarded:
            try:
                f()
            except Exception as exc:
                say(f"sglang: Failed to execute general plugin: {exc}")
        else:
            f()
    return len(funcs)


def break_plugin():
    """SERVE_BREAK: makes one part of the plugin raise."""
    if not BREAK:
        return
    from tensormorph_probe.serving import common, sglang, vllm

    def boom(*a, **k):
        raise RuntimeError(f"injected failure ({BREAK})")
    if BREAK == "register":
        common.installed_version = boom
    elif BREAK == "attach":
        common.start = boom
    elif BREAK == "requests":
        vllm._Requests.ids = lambda self, a, k: boom()
        sglang._request_ids = boom


def steps_of(step):
    return [f"req-{step}-{j}" for j in range(2)], torch.randint(0, 64, (2, 5))


def status(model):
    from tensormorph_probe.serving import common
    s = common.session_of(model) if model is not None else None
    if s is not None:
        say("status", json.dumps({"role": ROLE, "rank": RANK, "pid": os.getpid(),
                                  "forwards": s.forwards, "requests_log": s.requests_path,
                                  "released": s.released, "address": s.address,
                                  "step4": s.requests_at(4), "trace": s.probe.path,
                                  "checking_compiled": s.checking_compiled}))
        common.stop(model)
    else:
        say("status", json.dumps({"role": ROLE, "rank": RANK, "pid": os.getpid(),
                                  "attached": False}))


def spawn(role, rank, env_extra=None):
    env = dict(os.environ, SERVE_ROLE=role, SERVE_RANK_OF_PROC=str(rank), **(env_extra or {}))
    return subprocess.Popen([sys.executable, __file__] + sys.argv[1:], env=env)


def wait_all(procs):
    bad = [p.args for p in procs if p.wait(timeout=300) != 0]
    if bad:
        say(f"FAILED children: {len(bad)}")
        sys.exit(1)


# ================================================================ vLLM

class CompilationMode(enum.IntEnum):
    """vllm.config.compilation.CompilationMode"""
    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


class CUDAGraphMode(enum.Enum):
    """vllm.config.compilation.CUDAGraphMode"""
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)


class StandInV1Runner:
    """vllm.v1.worker.gpu_model_runner.GPUModelRunner: a persistent
    input_batch whose req_ids are the step's rows; _dummy_run calls the
    model directly with the persistent batch untouched."""

    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.model = None
        self.input_batch = NS(req_ids=["stale-0"])      # left from an earlier step
        pc = vllm_config.parallel_config
        self.pp_rank = pc.rank // pc.tensor_parallel_size

    def load_model(self):
        self.model = tiny_llama(self.pp_rank)

    def get_model(self):
        return self.model

    def _dummy_run(self, num_tokens, is_profile=False):
        with torch.no_grad():
            self.model(**model_inputs(self.model, torch.zeros(1, num_tokens, dtype=torch.long),
                                      self.pp_rank))

    def profile_run(self):
        self._dummy_run(5, is_profile=True)

    def execute_model(self, scheduler_output, intermediate_tensors=None):
        req_ids, input_ids = scheduler_output
        self.input_batch.req_ids = list(req_ids)
        with torch.no_grad():
            hidden = self.model(**model_inputs(self.model, input_ids, self.pp_rank))
            return self.model.compute_logits(hidden)


class Packed:
    """The packed KV cache of a V2 runner (SERVE_PACKED): every request's
    keys in one sequence, a request's queries masked to its own keys, as
    vLLM's paged attention reads each request's blocks."""

    def __init__(self):
        from transformers.cache_utils import DynamicCache
        self.cache = DynamicCache()
        self.owner, self.pos, self.next_pos = [], [], {}

    def prepare(self, req_ids, tokens):
        """The InputBatch of requests req_ids whose new tokens are tokens[j]."""
        ids, qsl, own, pos = [], [0], [], []
        for rid, tk in zip(req_ids, tokens):
            p0 = self.next_pos.get(rid, 0)
            ids += tk
            own += [rid] * len(tk)
            pos += list(range(p0, p0 + len(tk)))
            self.next_pos[rid] = p0 + len(tk)
            qsl.append(len(ids))
        n, past = len(ids), len(self.owner)
        allown, allpos = self.owner + own, self.pos + pos
        mask = torch.full((1, 1, n, past + n), torch.finfo(torch.float32).min)
        for i in range(n):
            for j in range(past + n):
                if allown[j] == own[i] and allpos[j] <= pos[i]:
                    mask[0, 0, i, j] = 0.0
        self.owner, self.pos = allown, allpos
        return NS(req_ids=list(req_ids), input_ids=torch.tensor([ids]),
                  positions=torch.tensor([pos]), mask=mask, num_tokens=n,
                  num_tokens_after_padding=n, query_start_loc_np=qsl)

    def sample(self, logits, batch):
        """Greedy: each request's next token, from its last row."""
        q = batch.query_start_loc_np
        return {rid: [int(logits[0, q[j + 1] - 1].argmax())]
                for j, rid in enumerate(batch.req_ids)}


class StandInV2Runner:
    """vllm.v1.worker.gpu.model_runner.GPUModelRunner: no input_batch; the
    batch is a local of execute_model, built by prepare_inputs for a real
    step and by InputBatch.make_dummy for a dummy run (profiling,
    warm-up, capture), whose req_ids are made up."""

    def __init__(self, vllm_config, device):
        self.vllm_config = vllm_config
        self.model = None
        self.packed = Packed() if PACKED else None
        pc = vllm_config.parallel_config
        self.pp_rank = pc.rank // pc.tensor_parallel_size

    def load_model(self):
        self.model = tiny_llama(self.pp_rank)

    def get_model(self):
        return self.model

    def prepare_inputs(self, scheduler_output, batch_req_state, batch_desc, num_active_loras):
        req_ids, input_ids = scheduler_output
        if PACKED:
            return self.packed.prepare(req_ids, input_ids)
        return NS(req_ids=list(req_ids), input_ids=input_ids)

    def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False,
                      skip_attn_for_dummy_run=False, is_profile=False):
        if not dummy_run:
            input_batch = self.prepare_inputs(scheduler_output, None, None, 0)
        else:
            n = scheduler_output
            input_batch = NS(req_ids=[f"req_{i}_dummy" for i in range(1)],
                             input_ids=torch.zeros(1, n, dtype=torch.long))
        with torch.no_grad():
            if PACKED and not dummy_run:
                hidden = self.model(input_ids=input_batch.input_ids,
                                    positions=input_batch.positions,
                                    attention_mask=input_batch.mask,
                                    kv_cache=self.packed.cache)
                return self.packed.sample(self.model.compute_logits(hidden), input_batch)
            hidden = self.model(**model_inputs(self.model, input_batch.input_ids, self.pp_rank))
            return self.model.compute_logits(hidden)

    def _dummy_run(self, num_tokens, is_profile=False):
        self.execute_model(num_tokens, dummy_run=True, is_profile=is_profile)

    def profile_run(self):
        self._dummy_run(5, is_profile=True)


class StandInWorkerBase:
    """vllm.v1.worker.worker_base.WorkerBase."""

    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        self.vllm_config = vllm_config
        self.parallel_config = vllm_config.parallel_config
        self.compilation_config = vllm_config.compilation_config
        self.parallel_config.rank = rank
        self.rank, self.local_rank = rank, local_rank
        self.model_runner = None


def vllm_has_v1_runner():
    """vLLM 0.34 removed the V1 runner, VLLM_USE_V2_MODEL_RUNNER and the
    worker's use_v2_model_runner (vllm/v1/worker/gpu_worker.py)."""
    from tensormorph_probe.serving.touchpoints import version_tuple
    return version_tuple(version("vllm")) < (0, 34)


class StandInWorker(StandInWorkerBase):
    """vllm.v1.worker.gpu_worker.Worker: init_device builds the runner."""

    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        if vllm_has_v1_runner():
            self.use_v2_model_runner = os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "1") != "0"
        super().__init__(vllm_config=vllm_config, local_rank=local_rank, rank=rank,
                         distributed_init_method=distributed_init_method,
                         is_driver_worker=is_driver_worker)

    def init_device(self):
        v1 = vllm_has_v1_runner() and not self.use_v2_model_runner
        self.model_runner = (StandInV1Runner if v1 else StandInV2Runner)(self.vllm_config, "cpu")

    def load_model(self, *, load_dummy_weights=False):
        self.model_runner.load_model()

    def determine_available_memory(self):
        self.model_runner.profile_run()
        return 1 << 30

    def compile_or_warm_up_model(self):
        # warm-up / capture sizes; SERVE_EXTRA_WARMUP=N: N more, as another
        # configuration would run
        for n in (1, 2) + (1,) * int(os.environ.get("SERVE_EXTRA_WARMUP", "0")):
            self.model_runner._dummy_run(n)

    def execute_model(self, scheduler_output):
        return self.model_runner.execute_model(scheduler_output)


class StandInWorkerWrapperBase:
    """vllm.v1.worker.worker_base.WorkerWrapperBase."""

    def __init__(self, rpc_rank=0):
        self.rpc_rank = rpc_rank
        self._worker_extension_cls = None

    def init_worker(self, all_kwargs):
        kwargs = all_kwargs[self.rpc_rank]
        sys.modules["vllm.plugins"].load_general_plugins()
        worker_class = StandInWorker
        ext_name = kwargs["vllm_config"].parallel_config.worker_extension_cls
        ext = None
        if ext_name:
            ext = pkgutil.resolve_name(ext_name)
            if ext not in worker_class.__bases__:
                for attr in dir(ext):
                    if not attr.startswith("__"):
                        assert not hasattr(worker_class, attr), attr
                worker_class.__bases__ = worker_class.__bases__ + (ext,)
        self.worker = worker_class(**kwargs)
        self._worker_extension_cls = ext

    def init_device(self):
        self.worker.init_device()
        hook = getattr(self._worker_extension_cls, "init_worker_extension", None)
        if callable(hook):
            hook(self.worker)                   # unguarded, as vLLM

    def execute_method(self, method, *args, **kwargs):
        return getattr(self.worker, method)(*args, **kwargs)

    def shutdown(self):
        hook = getattr(self._worker_extension_cls, "destroy_worker_extension", None)
        if callable(hook):
            try:
                hook(self.worker)
            except Exception:
                pass


def vllm_modules():
    state = {"loaded": False}

    def load_general_plugins():
        if state["loaded"]:
            return
        state["loaded"] = True
        load_plugins("vllm.general_plugins", "VLLM_PLUGINS", guarded=False)

    module("vllm")
    module("vllm.plugins", load_general_plugins=load_general_plugins)
    module("vllm.v1")
    module("vllm.v1.worker")
    module("vllm.v1.worker.worker_base", WorkerBase=StandInWorkerBase,
           WorkerWrapperBase=StandInWorkerWrapperBase)


def vllm_config(rank):
    return NS(model_config=NS(model="stand-in-llama", enforce_eager=not COMPILED),
              compilation_config=NS(
                  mode=CompilationMode.VLLM_COMPILE if COMPILED else CompilationMode.NONE,
                  cudagraph_mode=(CUDAGraphMode.FULL_AND_PIECEWISE if COMPILED
                                  else CUDAGraphMode.NONE)),
              parallel_config=NS(world_size=TP * PP, tensor_parallel_size=TP,
                                 pipeline_parallel_size=PP, rank=rank,
                                 worker_extension_cls=(
                                     "tensormorph_probe.serving.vllm.WorkerExtension"
                                     if os.environ.get("SERVE_RPC") else None)))


def vllm_worker(rank):
    """One worker process's life, in vLLM's order."""
    w = StandInWorkerWrapperBase(0)
    w.init_worker([dict(vllm_config=vllm_config(rank), local_rank=rank, rank=rank,
                        distributed_init_method="stand-in", is_driver_worker=rank == 0)])
    w.init_device()
    w.execute_method("load_model")          # the executor's collective_rpc("load_model")
    w.execute_method("determine_available_memory")
    if os.environ.get("SERVE_RPC"):
        # POST /collective_rpc {"method": "tensormorph_attach", "kwargs": {...}}:
        # every argument arrives as a string
        st = w.execute_method("tensormorph_attach", listen=os.environ["SERVE_LISTEN"],
                              pause=os.environ["SERVE_PAUSE"], level="1")
        say("rpc", json.dumps(st))
        bad = w.execute_method("tensormorph_attach", pause="soon")
        say("rpc-bad", json.dumps(bad))
    w.execute_method("compile_or_warm_up_model")
    say("ready")
    torch.manual_seed(1)
    split = int(os.environ.get("SERVE_SPLIT", "-1"))
    if PACKED:
        # both prompts prefilled in one forward, then decoded together
        tokens = dict(PROMPTS)
        for step in range(STEPS):
            tokens = w.execute_method("execute_model", (list(tokens), list(tokens.values())))
        say("tokens", json.dumps(tokens))
    for step in range(0 if PACKED else STEPS):
        ids, input_ids = steps_of(step)
        if step == split:
            # SERVE_SPLIT=K: step K's requests in a forward each, as
            # another scheduler would batch them
            for j, rid in enumerate(ids):
                w.execute_method("execute_model", ([rid], input_ids[j:j + 1]))
        else:
            w.execute_method("execute_model", (ids, input_ids))
        time.sleep(SLEEP)
    model = w.worker.model_runner.get_model()
    if os.environ.get("SERVE_RPC"):
        # detach, attach again (the runner's methods stay wrapped), one more step
        say("rpc-detach", json.dumps(w.execute_method("tensormorph_detach")))
        st = w.execute_method("tensormorph_attach", record=os.environ["SERVE_RERECORD"])
        w.execute_method("execute_model", steps_of(STEPS))
        say("rpc-again", json.dumps({"attached": st["attached"],
                                     "step0": w.execute_method("tensormorph_requests", "0")}))
    status(model)
    w.shutdown()
    if PACKED and os.environ.get("SERVE_HF_REFERENCE"):
        run_hf(os.environ["SERVE_HF_REFERENCE"])


def run_vllm():
    vllm_modules()
    break_plugin()
    say("proc", ROLE, RANK, os.getpid())
    if ROLE == "worker":
        vllm_worker(RANK)
        return
    # process 0 / engine core: they load the general plugins too
    sys.modules["vllm.plugins"].load_general_plugins()
    if TP * PP == 1:
        vllm_worker(0)
    else:
        wait_all([spawn("worker", r) for r in range(TP * PP)])


# ================================================================ SGLang

class StandInHookRegistry:
    """sglang.srt.plugins.hook_registry.HookRegistry (AFTER hooks)."""
    _hooks = {}
    _patched = set()

    @classmethod
    def register(cls, target, hook, hook_type="after", *, source=None):
        assert hook_type == "after", hook_type
        cls._hooks.setdefault(target, []).append(hook)

    @classmethod
    def apply_hooks(cls):
        for target, hooks in cls._hooks.items():
            if target in cls._patched:
                continue
            cls._patched.add(target)
            owner, attr = target.rsplit(".", 1)
            obj = pkgutil.resolve_name(owner)
            fn = getattr(obj, attr)
            for hook in hooks:
                def wrapper(*args, _fn=fn, _hook=hook, **kwargs):
                    result = _fn(*args, **kwargs)
                    new = _hook(result, *args, **kwargs)
                    return new if new is not None else result
                fn = wrapper
            setattr(obj, attr, fn)


class ParallelContext:
    """runtime_context.ParallelContext: values published by the launcher;
    an unpublished one raises on read."""

    def __init__(self):
        self._values = {}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._values:
            raise RuntimeError(f"parallel name {name!r} has not been written in this process")
        return self._values[name]


_PARALLEL = ParallelContext()
_EXEC = {}


def get_parallel():
    return _PARALLEL


def get_exec():
    if "graph" not in _EXEC:
        raise ValueError("config namespace 'exec' not published")
    return NS(graph=_EXEC["graph"])


def publish(tp_rank, pp_rank):
    """What the scheduler's start does before it builds the ModelRunner:
    the resolved configuration and this process's ranks."""
    _PARALLEL._values.update(tp_rank=tp_rank, tp_size=TP, pp_rank=pp_rank, pp_size=PP)
    # --cuda-graph-config '{"decode":{"backend":"disabled"},"prefill":{"backend":"disabled"}}'
    # resolved into the exec namespace; compiled: SGLang's CUDA defaults
    _EXEC["graph"] = NS(
        cuda_graph_config=NS(decode=NS(backend="full" if COMPILED else "disabled"),
                             prefill=NS(backend="breakable" if COMPILED else "disabled")),
        enable_torch_compile=COMPILED)


class StandInModelRunner:
    """sglang.srt.model_executor.model_runner.ModelRunner (0.5.2x): no rank
    attributes, the ranks are get_parallel()'s."""

    def __init__(self, server_args, gpu_id, is_draft_worker=False):
        self.server_args, self.gpu_id, self.is_draft_worker = server_args, gpu_id, is_draft_worker
        self.model = None

    def load_model(self):
        self.model = tiny_llama(get_parallel().pp_rank)

    def forward(self, forward_batch):
        # as sglang's eager runner: model.forward(...), not model(...)
        with torch.no_grad():
            return self.model.forward(**model_inputs(self.model, forward_batch.input_ids,
                                                     get_parallel().pp_rank),
                                      forward_batch=forward_batch).logits


def sglang_modules():
    state = {"loaded": False}

    def load_plugins_():
        if state["loaded"]:
            return
        state["loaded"] = True
        load_plugins("sglang.srt.plugins", "SGLANG_PLUGINS", guarded=True)
        StandInHookRegistry.apply_hooks()

    module("sglang")
    module("sglang.srt")
    module("sglang.srt.plugins", load_plugins=load_plugins_)
    module("sglang.srt.plugins.hook_registry", HookRegistry=StandInHookRegistry,
           HookType=NS(AFTER="after", BEFORE="before", AROUND="around", REPLACE="replace"))
    module("sglang.srt.runtime_context", get_parallel=get_parallel, get_exec=get_exec)
    module("sglang.srt.model_executor")
    module("sglang.srt.model_executor.model_runner", ModelRunner=StandInModelRunner)


def sglang_scheduler(rank):
    tp_rank, pp_rank = rank % TP, rank // TP
    publish(tp_rank, pp_rank)
    mr_cls = sys.modules["sglang.srt.model_executor.model_runner"].ModelRunner
    mr = mr_cls(NS(model_path="stand-in-llama"), gpu_id=tp_rank)
    mr.load_model()
    if os.environ.get("SERVE_DRAFT"):
        # speculative decoding: a draft ModelRunner in the same process
        mr_cls(NS(model_path="stand-in-draft"), gpu_id=tp_rank, is_draft_worker=True).load_model()
    say("ready")
    torch.manual_seed(1)
    for step in range(STEPS):
        ids, input_ids = steps_of(step)
        fb = NS(forward_mode="EXTEND", batch_size=2, input_ids=input_ids, rids=ids)
        mr.forward(fb)
        time.sleep(SLEEP)
    status(mr.model)


def run_sglang():
    sglang_modules()
    break_plugin()
    say("proc", ROLE, RANK, os.getpid())
    sys.modules["sglang.srt.plugins"].load_plugins()    # every process does
    if ROLE == "scheduler":
        sglang_scheduler(RANK)
    elif ROLE == "detokenizer":
        say("status", json.dumps({"role": ROLE, "rank": 0, "pid": os.getpid(),
                                  "attached": False}))
    else:
        wait_all([spawn("scheduler", r) for r in range(TP * PP)] + [spawn("detokenizer", 0)])


# ================================================================ HF reference

def run_hf(path):
    """The reference: each request alone, its prompt then STEPS - 1 greedy
    decode forwards with its own KV cache, as transformers runs a model;
    each forward a step annotated with its request id."""
    from transformers.cache_utils import DynamicCache

    from tensormorph_probe import Probe

    model = tiny_llama()
    probe = Probe(model, level=1, record=path)
    out = {}
    with torch.no_grad():
        for rid, prompt in PROMPTS.items():
            cache, tk, n = DynamicCache(), list(prompt), 0
            for _ in range(STEPS):
                probe.annotate("request", [rid])
                hidden = model(input_ids=torch.tensor([tk]),
                               positions=torch.arange(n, n + len(tk))[None], kv_cache=cache)
                n += len(tk)
                tk = [int(model.compute_logits(hidden)[0, -1].argmax())]
            out[rid] = tk
    probe.close()
    say("hf-tokens", json.dumps(out))


if __name__ == "__main__":
    if FRAMEWORK == "sglang":
        run_sglang()
    else:
        run_vllm()
    say("done")
