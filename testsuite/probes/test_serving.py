"""The serving plugins (tensormorph_probe.serving, doc/serving.md) against
STAND-INS of vLLM and SGLang: neither framework runs on these CPU machines.

What is real here: the entry points as declared in probes/pytorch/
pyproject.toml, found through importlib.metadata in a dist-info generated
from that file (the same lookup vLLM's load_plugins_by_group and SGLang's
load_plugins do, with their VLLM_PLUGINS / SGLANG_PLUGINS filters); a real
transformers Llama (small config, random weights); the probe; tmdb attached
to the stand-in worker's socket.  What is a stand-in: the vLLM worker, its
wrapper (WorkerWrapperBase.init_worker, including the worker_extension_cls
mix-in), its model runner, its config; SGLang's ModelRunner, ForwardBatch
and HookRegistry.  They are shaped after the framework sources named in
doc/serving.md.  testsuite/serving/ has the checks against real servers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TMDB, needs_tmdb, read, run_tmdb

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parent.parent / "probes" / "pytorch" / "pyproject.toml"
pytest.importorskip("transformers")
tomllib = pytest.importorskip("tomllib")     # Python >= 3.11

GROUPS = {"vllm": "vllm.general_plugins", "sglang": "sglang.srt.plugins"}


def _dist(tmp_path: Path) -> Path:
    """A site directory holding tensormorph_probe's dist-info with the entry
    points of pyproject.toml, as `pip install -e probes/pytorch` writes it."""
    proj = tomllib.loads(PYPROJECT.read_text())["project"]
    site = tmp_path / "site"
    info = site / f"tensormorph_probe-{proj['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {proj['name']}\nVersion: {proj['version']}\n")
    lines = []
    for group, eps in proj.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return site


# The stand-in server.  argv: MODE STEPS SLEEP [FLAVOUR]
#   MODE vllm-auto: the plugin attaches on its own in the worker's load_model
#        vllm-rpc:  worker_extension_cls + collective_rpc("tensormorph_attach")
#        sglang:    HookRegistry AFTER hook on ModelRunner.load_model
#   FLAVOUR compiled: a config that is not eager; replay: the model's body
#        is skipped as a CUDA graph replay would (no module of it is called)
_SERVER = r'''
import json, os, pkgutil, sys, time, types, functools
import torch
from importlib.metadata import entry_points
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.modeling_outputs import BaseModelOutputWithPast

mode, steps, sleep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
flavour = sys.argv[4] if len(sys.argv) > 4 else ""
NS = types.SimpleNamespace
torch.manual_seed(0)


def tiny_llama():
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    m = LlamaForCausalLM(cfg).eval()
    if flavour == "replay":
        inner = m.model
        inner.forward = lambda input_ids=None, **kw: BaseModelOutputWithPast(
            last_hidden_state=torch.zeros(*input_ids.shape, 32))
    return m


def load_plugins(group, allowed_env):
    """What vllm.plugins.load_plugins_by_group and sglang.srt.plugins.
    load_plugins_by_group do: entry points of the group, filtered by name."""
    allowed = os.environ.get(allowed_env)
    allowed = None if not allowed else {x.strip() for x in allowed.split(",") if x.strip()}
    funcs = [ep.load() for ep in entry_points(group=group)
             if allowed is None or ep.name in allowed]
    for f in funcs:
        f()
    return len(funcs)


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


# ---------------------------------------------------------------- vLLM stand-ins

class StandInGPUModelRunner:
    """Stand-in of vllm.v1.worker.gpu_model_runner.GPUModelRunner."""
    def __init__(self):
        self.model = None
        self.input_batch = NS(req_ids=[])

    def load_model(self):
        self.model = tiny_llama()

    def get_model(self):
        return self.model

    def execute_model(self, scheduler_output):
        req_ids, input_ids = scheduler_output
        self.input_batch.req_ids = list(req_ids)
        with torch.no_grad():
            return self.model(input_ids).logits


class StandInWorkerBase:
    """Stand-in of vllm.v1.worker.worker_base.WorkerBase."""
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        self.vllm_config = vllm_config
        self.parallel_config = vllm_config.parallel_config
        self.rank, self.local_rank = rank, local_rank
        self.model_runner = None


class StandInWorker(StandInWorkerBase):
    """Stand-in of vllm.v1.worker.gpu_worker.Worker."""
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        super().__init__(vllm_config=vllm_config, local_rank=local_rank, rank=rank,
                         distributed_init_method=distributed_init_method,
                         is_driver_worker=is_driver_worker)
        self.model_runner = StandInGPUModelRunner()

    def load_model(self):
        self.model_runner.load_model()

    def execute_model(self, scheduler_output):
        return self.model_runner.execute_model(scheduler_output)


class StandInWorkerWrapperBase:
    """Stand-in of vllm.v1.worker.worker_base.WorkerWrapperBase: init_worker
    loads the general plugins, then mixes worker_extension_cls into the
    worker class (refusing names the class has), then builds the worker."""
    def __init__(self, rpc_rank=0):
        self.rpc_rank = rpc_rank

    def init_worker(self, all_kwargs):
        kwargs = all_kwargs[self.rpc_rank]
        load_plugins("vllm.general_plugins", "VLLM_PLUGINS")
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
        self._worker_extension_cls = ext if ext_name else None

    def init_device(self):
        # vLLM 0.33 calls the extension's init_worker_extension hook here
        hook = getattr(self._worker_extension_cls, "init_worker_extension", None)
        if callable(hook):
            hook(self.worker)

    def execute_method(self, method, *args, **kwargs):
        return getattr(self.worker, method)(*args, **kwargs)


def run_vllm():
    module("vllm")
    module("vllm.v1")
    module("vllm.v1.worker")
    module("vllm.v1.worker.worker_base", WorkerBase=StandInWorkerBase,
           WorkerWrapperBase=StandInWorkerWrapperBase)
    compiled = flavour == "compiled"
    cfg = NS(model_config=NS(model="stand-in-llama", enforce_eager=not compiled),
             compilation_config=NS(mode=3 if compiled else 0,
                                   cudagraph_mode=NS(name="FULL_AND_PIECEWISE" if compiled
                                                     else "NONE")),
             parallel_config=NS(world_size=1, tensor_parallel_size=1, rank=0,
                                worker_extension_cls=(
                                    "tensormorph_probe.serving.vllm.WorkerExtension"
                                    if mode == "vllm-rpc" else None)))
    w = StandInWorkerWrapperBase(0)
    w.init_worker([dict(vllm_config=cfg, local_rank=0, rank=0,
                        distributed_init_method="stand-in", is_driver_worker=True)])
    load_plugins("vllm.general_plugins", "VLLM_PLUGINS")    # a second load: idempotent
    w.init_device()
    w.execute_method("load_model")          # the executor's collective_rpc("load_model")
    if mode == "vllm-rpc":
        st = w.execute_method("tensormorph_attach", listen=os.environ["SERVE_LISTEN"],
                              pause=float(os.environ["SERVE_PAUSE"]))
        print("rpc", json.dumps(st), flush=True)
    print("ready", flush=True)
    for step in range(steps):
        ids = [f"req-{step}-{j}" for j in range(2)]
        w.execute_method("execute_model", (ids, torch.randint(0, 64, (2, 5))))
        time.sleep(sleep)
    return w.worker.model_runner.model


# ---------------------------------------------------------------- SGLang stand-ins

class StandInHookRegistry:
    """Stand-in of sglang.srt.plugins.hook_registry.HookRegistry (AFTER hooks)."""
    _hooks = {}

    @classmethod
    def register(cls, target, hook, hook_type="after"):
        assert hook_type == "after", hook_type
        cls._hooks.setdefault(target, []).append(hook)

    @classmethod
    def apply_hooks(cls):
        for target, hooks in cls._hooks.items():
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


class StandInModelRunner:
    """Stand-in of sglang.srt.model_executor.model_runner.ModelRunner."""
    def __init__(self, server_args, tp_rank, tp_size):
        self.server_args, self.tp_rank, self.tp_size = server_args, tp_rank, tp_size
        self.pp_rank, self.pp_size, self.gpu_id = 0, 1, 0
        self.model = None

    def load_model(self):
        self.model = tiny_llama()

    def forward(self, forward_batch):
        # as sglang's eager runner: model.forward(...), not model(...)
        with torch.no_grad():
            return self.model.forward(forward_batch.input_ids,
                                      forward_batch=forward_batch).logits


def run_sglang():
    module("sglang")
    module("sglang.srt")
    module("sglang.srt.plugins")
    module("sglang.srt.plugins.hook_registry", HookRegistry=StandInHookRegistry,
           HookType=NS(AFTER="after", BEFORE="before", AROUND="around", REPLACE="replace"))
    module("sglang.srt.model_executor")
    module("sglang.srt.model_executor.model_runner", ModelRunner=StandInModelRunner)
    load_plugins("sglang.srt.plugins", "SGLANG_PLUGINS")
    StandInHookRegistry.apply_hooks()           # sglang's load_plugins does this last
    ModelRunner = sys.modules["sglang.srt.model_executor.model_runner"].ModelRunner
    sa = NS(disable_cuda_graph=flavour != "compiled", enable_torch_compile=flavour == "compiled",
            model_path="stand-in-llama")
    mr = ModelRunner(sa, tp_rank=0, tp_size=1)
    mr.load_model()
    print("ready", flush=True)
    for step in range(steps):
        fb = NS(forward_mode="EXTEND", batch_size=2, input_ids=torch.randint(0, 64, (2, 5)),
                rids=[f"rid-{step}-{j}" for j in range(2)])
        mr.forward(fb)
        time.sleep(sleep)
    return mr.model


model = run_sglang() if mode == "sglang" else run_vllm()
from tensormorph_probe.serving import common
s = common.session_of(model)
if s is not None:
    print("status", json.dumps({"forwards": s.forwards, "requests_log": s.requests_path,
                                "released": s.released, "address": s.address,
                                "step2": s.requests_at(2)}), flush=True)
    common.stop(model)
print("done", flush=True)
'''


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORMORPH_")
           or k in ("TENSORMORPH_LIB", "TENSORMORPH_PROBE_PATH")}
    env.update(extra)
    return env


def _server(tmp_path, mode, steps=6, sleep=0.0, flavour="", **env):
    site = _dist(tmp_path)
    script = tmp_path / "standin_server.py"
    script.write_text(_SERVER)
    e = _clean_env(**env)
    e["PYTHONPATH"] = f"{site}{os.pathsep}{e.get('PYTHONPATH', '')}"
    return subprocess.Popen([sys.executable, str(script), mode, str(steps), str(sleep), flavour],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


def _wait_for(stream, pattern, timeout=120):
    """Lines of stream up to the first matching pattern (the match last)."""
    lines = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(pattern, line)
        if m:
            return lines, m
    raise AssertionError(f"{pattern!r} not seen in:\n{''.join(lines)}")


def _tmdb(cmds, trace=None):
    args = [a for c in cmds for a in ("-ex", c)]
    return run_tmdb(args + ([trace] if trace else []), timeout=120)


def _finish(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err
    status = re.search(r"^status (.*)$", out, re.M)
    return out, err, json.loads(status.group(1)) if status else None


# ---------------------------------------------------------------- entry points

def test_entry_points_declared_and_inert(tmp_path, monkeypatch):
    """pyproject.toml declares both plugins under the groups the frameworks
    read; loaded without TENSORMORPH_LISTEN/RECORD they do nothing (import
    neither framework), however often they are called."""
    from importlib.metadata import entry_points

    site = _dist(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    for name in [k for k in os.environ if k.startswith("TENSORMORPH_") and k not in (
            "TENSORMORPH_LIB", "TENSORMORPH_PROBE_PATH")]:
        monkeypatch.delenv(name)
    import importlib
    importlib.invalidate_caches()
    for fw, group in GROUPS.items():
        eps = [ep for ep in entry_points(group=group) if ep.name == "tensormorph"]
        assert len(eps) == 1, f"no tensormorph entry point in {group}"
        assert eps[0].value == f"tensormorph_probe.serving.{fw}:register"
        register = eps[0].load()
        before = set(sys.modules)
        register()
        register()
        assert fw not in sys.modules and not any(m.startswith(fw + ".") for m in
                                                 set(sys.modules) - before)


def test_pause_timeout_is_checked(monkeypatch):
    from tensormorph_probe.serving import common
    assert common.pause_timeout({}) is None
    assert common.pause_timeout({common.ENV_PAUSE: "0"}) is None
    assert common.pause_timeout({common.ENV_PAUSE: "2.5"}) == 2.5
    for bad in ("-1", "nan", "inf", "soon"):
        with pytest.raises(ValueError, match=common.ENV_PAUSE):
            common.pause_timeout({common.ENV_PAUSE: bad})


# ---------------------------------------------------------------- live

@needs_tmdb
def test_vllm_plugin_attaches_in_worker_and_stops(tmp_path):
    """vLLM stand-in, plugin on its own: TENSORMORPH_LISTEN=1 gives the
    worker process a PID.sock; tmdb attaches by pid, `info probe` names the
    framework and rank, a breakpoint conditioned on a request id stops at
    the step (= model forward) that ran it, with the right value; the step's
    ids are in the trace (TQL `request`) and in the request log, and the
    recording replays to the same stop."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "vllm-auto", steps=6, TENSORMORPH_LISTEN="1",
                   TENSORMORPH_WAIT="60", TENSORMORPH_SERVING_PAUSE="60",
                   TENSORMORPH_RECORD=str(trace))
    _wait_for(proc.stderr, r"listening on (\S+)")
    cmds = ['break model.model.layers.1.mlp if request == "req-2-1"', "continue",
            "print tensor.numel", "print step", "print request", "print request.count"]
    tm = _tmdb([f"attach {proc.pid}", "info probe"] + cmds + ["detach"])
    assert "Recorded by: vllm probe" in tm.stdout, tm.stdout + tm.stderr
    assert "rank 0 of 1" in tm.stdout, tm.stdout
    stop = "Breakpoint 1, model.model.layers.1.mlp (out) at step 2"
    assert stop in tm.stdout, tm.stdout
    values = ["$1 = 320", "$2 = 2", '$3 = ["req-2-0", "req-2-1"]', "$4 = 2"]
    assert all(v in tm.stdout for v in values), tm.stdout
    out, err, st = _finish(proc)
    assert st["forwards"] == 6 and st["step2"] == ["req-2-0", "req-2-1"], out
    log = [json.loads(x) for x in Path(st["requests_log"]).read_text().splitlines()]
    assert [e["step"] for e in log] == list(range(6))
    assert log[4]["requests"] == ["req-4-0", "req-4-1"]
    nodes, events, gaps = read(str(trace))
    assert not gaps and "model.model.layers.1.mlp" in nodes
    assert {e.step for e in events} == set(range(6))
    import tensormorph_probe as tp
    with tp.Trace(str(trace)) as t:
        assert t.meta["probe_kind"] == "vllm"
        assert t.meta["serving.rank"] == "0" and t.meta["serving.eager"] == "yes"
        # each forward's batch, read back through the C reader
        for step in range(6):
            assert t.annotation(step) == ([f"req-{step}-0", f"req-{step}-1"], 2)
        assert t.annotation(6) is None and t.annotation(2, "other") is None
    # the same command file on the recording: the same stop and values
    rp = _tmdb(cmds[:1] + ["run"] + cmds[2:], trace=str(trace))
    assert stop in rp.stdout and all(v in rp.stdout for v in values), rp.stdout + rp.stderr


@needs_tmdb
def test_vllm_worker_extension_rpc(tmp_path):
    """vLLM stand-in, worker_extension_cls path: the extension is mixed into
    the worker class as vLLM does it and tensormorph_attach is called as
    collective_rpc would; the socket is FRAMEWORK-rankR-PID.sock in the
    directory given; nothing happens at load time without the environment."""
    sockdir = tmp_path / "socks"
    sockdir.mkdir(mode=0o700)
    proc = _server(tmp_path, "vllm-rpc", steps=5, SERVE_LISTEN=str(sockdir), SERVE_PAUSE="60",
                   TENSORMORPH_WAIT="60")
    lines, m = _wait_for(proc.stderr, r"listening on (\S+)")
    sock = m.group(1)
    assert Path(sock).name == f"vllm-rank0-{proc.pid}.sock"
    tm = _tmdb([f"attach {sock}", "break model.model.layers.0.self_attn.o_proj if step >= 3",
                "continue", "print step", "print tensor.shape", "detach"])
    assert "Breakpoint 1, model.model.layers.0.self_attn.o_proj (out) at step 3" in tm.stdout, \
        tm.stdout + tm.stderr
    assert "$1 = 3" in tm.stdout and "[2, 5, 32]" in tm.stdout, tm.stdout
    out, err, st = _finish(proc)
    rpc = json.loads(re.search(r"^rpc (.*)$", out, re.M).group(1))
    assert rpc["attached"] and rpc["address"] == sock and rpc["eager"], rpc
    assert st["forwards"] == 5


@needs_tmdb
def test_sglang_plugin_after_load_model(tmp_path):
    """SGLang stand-in: the AFTER hook on ModelRunner.load_model attaches;
    request ids come from the ForwardBatch the model is called with."""
    proc = _server(tmp_path, "sglang", steps=4, TENSORMORPH_LISTEN="1", TENSORMORPH_WAIT="60",
                   TENSORMORPH_SERVING_PAUSE="60")
    _wait_for(proc.stderr, r"listening on (\S+)")
    tm = _tmdb([f"attach {proc.pid}", "info probe", 'break model.lm_head if request =~ "rid-1-*"',
                "continue", "print tensor.numel", "print request", "detach"])
    assert "Recorded by: sglang probe" in tm.stdout, tm.stdout + tm.stderr
    assert "Breakpoint 1, model.lm_head (out) at step 1" in tm.stdout, tm.stdout
    assert "$1 = 640" in tm.stdout, tm.stdout
    assert '$2 = ["rid-1-0", "rid-1-1"]' in tm.stdout, tm.stdout
    out, err, st = _finish(proc)
    assert st["forwards"] == 4 and st["step2"] == ["rid-2-0", "rid-2-1"], out


def _stop_and_hold(tmp_path, steps, **env):
    """A stand-in server with tmdb attached interactively and stopped at a
    breakpoint; returns (server, tmdb, seconds from the stop to the server's
    end, trace, what the server said at start) once the server has ended
    while tmdb still sat at that stop."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "vllm-auto", steps=steps, sleep=0.05, TENSORMORPH_LISTEN="1",
                   TENSORMORPH_WAIT="60", TENSORMORPH_RECORD=str(trace), **env)
    said, _ = _wait_for(proc.stderr, r"listening on (\S+)")
    tm = subprocess.Popen([TMDB, "-nx", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    tm.stdin.write(f"attach {proc.pid}\nbreak model.model.layers.0.mlp if step == 1\n"
                   "continue\n")
    tm.stdin.flush()
    _wait_for(tm.stdout, r"^Breakpoint 1, model\.model\.layers\.0\.mlp \(out\) at step 1",
              timeout=60)
    t0 = time.monotonic()
    proc.wait(timeout=120)
    return proc, tm, time.monotonic() - t0, trace, "".join(said)


@needs_tmdb
def test_stops_record_and_notify_by_default(tmp_path):
    """TENSORMORPH_LISTEN alone: tmdb shows the stop, the server keeps
    answering (all its requests are served while tmdb sits at the stop), and
    tmdb then reads what it sent meanwhile."""
    proc, tm, held, trace, said = _stop_and_hold(tmp_path, steps=30)
    rest, _ = tm.communicate("print step\ndelete\ncontinue\nquit\n", timeout=60)
    out, err, st = _finish(proc)
    assert "breakpoints record and notify" in said, said
    assert st["forwards"] == 30 and st["released"] == 0, out
    assert "$1 = 1" in rest, rest
    assert re.search(r"went away|closed|exited", rest, re.I), rest
    _, events, gaps = read(str(trace))
    assert not gaps and {e.step for e in events} == set(range(30))


@needs_tmdb
def test_pause_ends_after_its_timeout(tmp_path):
    """TENSORMORPH_SERVING_PAUSE=2: a stop holds the server that long, then
    libtensormorph's server resumes it by itself; the debugger stays
    attached and reads on, and every request is recorded."""
    proc, tm, held, trace, said = _stop_and_hold(tmp_path, steps=30,
                                                 TENSORMORPH_SERVING_PAUSE="2")
    rest, _ = tm.communicate("print step\ncontinue\nquit\n", timeout=60)
    out, err, st = _finish(proc)
    assert "breakpoints will pause the server for at most 2 s" in said, said
    assert st["released"] == 1 and st["forwards"] == 30, out
    assert held >= 1.0, held      # the rest of the 2 s, then 28 steps of 50 ms
    assert "$1 = 1" in rest, rest
    _, events, gaps = read(str(trace))
    assert not gaps and {e.step for e in events} == set(range(30))


@pytest.mark.parametrize("mode", ["vllm-auto", "sglang"])
def test_not_eager_is_loud(tmp_path, mode):
    """A config that replays CUDA graphs is named at attach (compiling alone
    is not: the probe records inside compiled graphs);
    TENSORMORPH_SERVING_STRICT=1 makes it fatal."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, mode, steps=1, flavour="compiled", TENSORMORPH_RECORD=str(trace))
    out, err, _ = _finish(proc)
    assert "WARNING" in err and "does not run eagerly" in err, err
    assert ("cudagraph_mode FULL_AND_PIECEWISE" if mode != "sglang"
            else "CUDA graphs on") in err, err
    assert "--enable-torch-compile" not in err and "compilation mode" not in err, err
    proc = _server(tmp_path, mode, steps=1, flavour="compiled", TENSORMORPH_RECORD=str(trace),
                   TENSORMORPH_SERVING_STRICT="1")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "TENSORMORPH_SERVING_STRICT" in err, out + err


def test_model_body_skipped_is_loud(tmp_path):
    """Config says eager but the model's modules are never called (as under
    a CUDA graph replay): said after the first forward."""
    proc = _server(tmp_path, "vllm-auto", steps=2, flavour="replay",
                   TENSORMORPH_RECORD=str(tmp_path / "serve.tmrun"))
    out, err, st = _finish(proc)
    assert "none of its modules was called" in err, err
    assert err.count("none of its modules was called") == 1
