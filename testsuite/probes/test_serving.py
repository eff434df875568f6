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
import types
from pathlib import Path

import pytest
import torch
from conftest import TMDB, needs_tmdb, read, run_tmdb

# slow (stand-in servers in several processes): the normal build's run
# checks them; the sanitizer run and distcheck (TM_QUICK) leave them out
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parent.parent / "probes" / "pytorch" / "pyproject.toml"
pytest.importorskip("transformers")
tomllib = pytest.importorskip("tomllib")     # Python >= 3.11

GROUPS = {"vllm": "vllm.general_plugins", "sglang": "sglang.srt.plugins"}


# the framework versions the stand-ins play (their dist-info's Version)
VERSIONS = {"vllm": "0.34.0", "sglang": "0.5.23"}


def _dist(tmp_path: Path, versions=None) -> Path:
    """A site directory holding tensormorph_probe's dist-info with the entry
    points of pyproject.toml, as `pip install -e probes/pytorch` writes it,
    and the stand-in frameworks' metadata (no code: the plugins read the
    version from the metadata)."""
    proj = tomllib.loads(PYPROJECT.read_text())["project"]
    site = tmp_path / "site"
    for fw, v in (versions or VERSIONS).items():
        fi = site / f"{fw}-{v}.dist-info"
        fi.mkdir(parents=True, exist_ok=True)
        (fi / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {fw}\nVersion: {v}\n")
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


STANDIN = HERE / "serving_standin.py"     # the stand-in servers (see its docstring)


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORMORPH_")
           or k in ("TENSORMORPH_LIB", "TENSORMORPH_PROBE_PATH")}
    env.update(extra)
    return env


def _server(tmp_path, framework, steps=6, sleep=0.0, flavour="", versions=None, **env):
    """The stand-in server of framework (vllm|sglang), its plugins found
    through the dist-info of pyproject.toml."""
    site = _dist(tmp_path, versions)
    e = _clean_env(**env)
    e["PYTHONPATH"] = f"{site}{os.pathsep}{e.get('PYTHONPATH', '')}"
    return subprocess.Popen([sys.executable, str(STANDIN), framework, str(steps), str(sleep),
                             flavour],
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


def _finish(proc, timeout=180):
    """(stdout, stderr, the statuses of the processes that had a probe,
    keyed by rank) of a stand-in server that ended well."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err
    assert re.search(r"^done$", out, re.M), out + err
    st = [json.loads(m) for m in re.findall(r"^status (.*)$", out, re.M)]
    return out, err, {x["rank"]: x for x in st if x.get("forwards") is not None}


def _procs(out):
    """{pid: (role, rank)} of the stand-in's processes."""
    return {int(p): (role, int(r)) for role, r, p in
            re.findall(r"^proc (\w+) (\d+) (\d+)$", out, re.M)}


# vLLM's workers run one profiling and two warm-up forwards (dummy runs, no
# requests) before any traffic: request step k is the probe's step k + 3
DUMMY = 3


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
@pytest.mark.parametrize("version,runner", [("0.34.0", "V2"), ("0.33.0", "V2"), ("0.33.0", "V1")])
def test_vllm_plugin_attaches_in_worker_and_stops(tmp_path, version, runner):
    """vLLM stand-in, plugin on its own, with the V2 model runner (the batch
    is a local of execute_model, built by prepare_inputs): vLLM 0.34's only
    runner, its worker without use_v2_model_runner, and 0.33's default; and
    0.33's V1 one (VLLM_USE_V2_MODEL_RUNNER=0: input_batch), which 0.34
    removed: TENSORMORPH_LISTEN=1 gives the worker process a
    PID.sock; tmdb attaches by pid, `info probe` names the framework and
    rank, a breakpoint conditioned on a request id stops at the step (=
    model forward) that ran it, with the right value; the profiling and
    warm-up forwards before any traffic are steps with no request; the
    step's ids are in the trace (TQL `request`) and in the request log, and
    the recording replays to the same stop."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "vllm", steps=6, versions={"vllm": version},
                   TENSORMORPH_LISTEN="1", TENSORMORPH_WAIT="60",
                   TENSORMORPH_SERVING_PAUSE="60", TENSORMORPH_RECORD=str(trace),
                   **({"VLLM_USE_V2_MODEL_RUNNER": "0"} if runner == "V1" else {}))
    said, _ = _wait_for(proc.stderr, r"listening on (\S+)")
    # a supported version: no warning about it at load
    assert "vllm plugin: vllm" not in "".join(said), "".join(said)
    cmds = ['break model.model.layers.1.mlp if request == "req-2-1"', "continue",
            "print tensor.numel", "print step", "print request", "print request.count"]
    tm = _tmdb([f"attach {proc.pid}", "info probe"] + cmds + ["detach"])
    assert "Recorded by: vllm probe" in tm.stdout, tm.stdout + tm.stderr
    assert "rank 0 of 1" in tm.stdout, tm.stdout
    stop = f"Breakpoint 1, model.model.layers.1.mlp (out) at step {DUMMY + 2}"
    assert stop in tm.stdout, tm.stdout
    values = ["$1 = 320", f"$2 = {DUMMY + 2}", '$3 = ["req-2-0", "req-2-1"]', "$4 = 2"]
    assert all(v in tm.stdout for v in values), tm.stdout
    out, err, st = _finish(proc)
    assert st[0]["forwards"] == DUMMY + 6 and st[0]["step4"] == ["req-1-0", "req-1-1"], out
    # the first forward of requests ran the model's modules: the hooks that
    # tell a compiled forward are off again (torch's fast call path)
    assert not st[0]["checking_compiled"], out
    log = [json.loads(x) for x in Path(st[0]["requests_log"]).read_text().splitlines()]
    assert [e["step"] for e in log] == list(range(DUMMY + 6))
    assert log[0] == {"step": 0, "requests": [], "count": 0}     # the profiling run
    assert log[DUMMY + 4]["requests"] == ["req-4-0", "req-4-1"]
    nodes, events, gaps = read(str(trace))
    assert not gaps and "model.model.layers.1.mlp" in nodes
    assert {e.step for e in events} == set(range(DUMMY + 6))
    import tensormorph_probe as tp
    with tp.Trace(str(trace)) as t:
        assert t.meta["probe_kind"] == "vllm"
        assert t.meta["serving.rank"] == "0" and t.meta["serving.eager"] == "yes"
        assert t.meta["serving.model_runner"] == runner
        assert t.meta["serving.observed"] == "yes"
        for step in range(DUMMY):
            assert t.annotation(step) == ([], 0)
        # each forward's batch, read back through the C reader
        for k in range(6):
            assert t.annotation(DUMMY + k) == ([f"req-{k}-0", f"req-{k}-1"], 2)
        assert t.annotation(DUMMY + 6) is None and t.annotation(2, "other") is None
    assert ("vllm rank 0 of 1: runs eager (read from vllm_config.compilation_config): the probe "
            "sees every module call") in "".join(said)
    # the same command file on the recording: the same stop and values
    rp = _tmdb(cmds[:1] + ["run"] + cmds[2:], trace=str(trace))
    assert stop in rp.stdout and all(v in rp.stdout for v in values), rp.stdout + rp.stderr


@needs_tmdb
def test_vllm_worker_extension_rpc(tmp_path):
    """vLLM stand-in, worker_extension_cls path: the extension is mixed into
    the worker class as vLLM does it and tensormorph_attach is called as
    POST /collective_rpc calls it, every argument a string; a bad argument
    is an answer, not an error in the worker; the socket is
    FRAMEWORK-rankR-PID.sock in the directory given; nothing happens at
    load time without the environment."""
    sockdir = tmp_path / "socks"
    sockdir.mkdir(mode=0o700)
    proc = _server(tmp_path, "vllm", steps=5, SERVE_RPC="1", SERVE_LISTEN=str(sockdir),
                   SERVE_PAUSE="60", TENSORMORPH_WAIT="60",
                   SERVE_RERECORD=str(tmp_path / "again.tmrun"))
    lines, m = _wait_for(proc.stderr, r"listening on (\S+)")
    sock = m.group(1)
    assert Path(sock).name == f"vllm-rank0-{proc.pid}.sock"
    tm = _tmdb([f"attach {sock}", "break model.model.layers.0.self_attn.o_proj if step >= 5",
                "continue", "print step", "print tensor.shape", "detach"])
    assert "Breakpoint 1, model.model.layers.0.self_attn.o_proj (out) at step 5" in tm.stdout, \
        tm.stdout + tm.stderr
    assert "$1 = 5" in tm.stdout and "[2, 5, 32]" in tm.stdout, tm.stdout
    out, err, st = _finish(proc)
    rpc = json.loads(re.search(r"^rpc (.*)$", out, re.M).group(1))
    assert rpc["attached"] and rpc["address"] == sock and rpc["eager"], rpc
    assert rpc["pause"] == 60.0 and rpc["observed"], rpc
    bad = json.loads(re.search(r"^rpc-bad (.*)$", out, re.M).group(1))
    assert not bad["attached"] and "pause must be float" in bad["error"], bad
    # a detach and a second attach: the new probe's first step is the
    # server's next batch, its ids read through the same runner wrappers
    assert re.search(r"^rpc-detach true$", out, re.M), out
    again = json.loads(re.search(r"^rpc-again (.*)$", out, re.M).group(1))
    assert again == {"attached": True, "step0": ["req-5-0", "req-5-1"]}, again
    assert st[0]["forwards"] == 1, out


def test_vllm_tensor_parallel_processes(tmp_path):
    """TP=2: the engine process loads the plugin and probes nothing; each
    worker process (one per rank) records its own trace, with its rank,
    the same request ids per step, and says what it observes."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "vllm", steps=3, SERVE_TP="2", TENSORMORPH_RECORD=str(trace))
    out, err, st = _finish(proc)
    procs = _procs(out)
    assert sorted(procs.values()) == [("engine", 0), ("worker", 0), ("worker", 1)], out
    assert sorted(st) == [0, 1] and {st[r]["pid"] for r in st} == {
        p for p, (role, _) in procs.items() if role == "worker"}, out
    import tensormorph_probe as tp
    for r in (0, 1):
        assert f"vllm rank {r} of 2: runs eager" in err, err
        path = tmp_path / f"serve.rank{r}.tmrun"
        assert st[r]["trace"] == str(path)
        with tp.Trace(str(path)) as t:
            assert t.meta["serving.rank"] == str(r) and t.meta["serving.tp_rank"] == str(r)
            assert t.meta["serving.world_size"] == "2"
            assert t.annotation(DUMMY + 1) == (["req-1-0", "req-1-1"], 2)
    assert (tmp_path / "serve.manifest").exists()
    assert not (tmp_path / "serve.tmrun").exists()


def test_vllm_pipeline_rank_placeholder_is_not_compiled(tmp_path):
    """PP=2: on the second rank the embedding is a placeholder
    (PPMissingLayer) that never runs; that is not a compiled forward."""
    proc = _server(tmp_path, "vllm", steps=2, SERVE_PP="2",
                   TENSORMORPH_RECORD=str(tmp_path / "serve.tmrun"))
    out, err, st = _finish(proc)
    assert sorted(st) == [0, 1] and st[1]["forwards"] == DUMMY + 2, out
    assert "none of its modules was called" not in err, err
    import tensormorph_probe as tp
    with tp.Trace(str(tmp_path / "serve.rank1.tmrun")) as t:
        assert t.meta["serving.pp_rank"] == "1" and t.meta["serving.tp_rank"] == "0"


@needs_tmdb
def test_sglang_plugin_after_load_model(tmp_path):
    """SGLang stand-in: the AFTER hook on ModelRunner.load_model attaches in
    the scheduler process, ranks read from runtime_context.get_parallel()
    (the ModelRunner has no rank attributes); request ids come from the
    ForwardBatch the model is called with."""
    sockdir = tmp_path / "socks"
    sockdir.mkdir(mode=0o700)
    proc = _server(tmp_path, "sglang", steps=4, TENSORMORPH_LISTEN=str(sockdir),
                   TENSORMORPH_WAIT="60", TENSORMORPH_SERVING_PAUSE="60")
    said, m = _wait_for(proc.stderr, r"listening on (\S+)")
    sock = m.group(1)
    assert re.fullmatch(r"sglang-rank0-\d+\.sock", Path(sock).name), sock
    tm = _tmdb([f"attach {sock}", "info probe", 'break model.lm_head if request =~ "req-1-*"',
                "continue", "print tensor.numel", "print request", "detach"])
    assert "Recorded by: sglang probe" in tm.stdout, tm.stdout + tm.stderr
    assert "Breakpoint 1, model.lm_head (out) at step 1" in tm.stdout, tm.stdout
    assert "$1 = 640" in tm.stdout, tm.stdout
    assert '$2 = ["req-1-0", "req-1-1"]' in tm.stdout, tm.stdout
    out, err, st = _finish(proc)
    assert st[0]["forwards"] == 4 and st[0]["step4"] is None, out
    assert "sglang rank 0 of 1: runs eager (read from get_exec().graph)" in "".join(said), said


def test_sglang_loads_in_every_process_probes_only_schedulers(tmp_path):
    """TP=2 with a speculative draft model: the engine, both schedulers and
    the detokenizer load the plugin; only the schedulers probe (their
    sockets, their traces), each with its rank; the draft model gets
    none."""
    sockdir = tmp_path / "socks"
    sockdir.mkdir(mode=0o700)
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "sglang", steps=3, SERVE_TP="2", SERVE_DRAFT="1",
                   TENSORMORPH_LISTEN=str(sockdir), TENSORMORPH_RECORD=str(trace))
    out, err, st = _finish(proc)
    procs = _procs(out)
    roles = sorted(procs.values())
    assert roles == [("detokenizer", 0), ("engine", 0), ("scheduler", 0), ("scheduler", 1)], out
    sched = {rank: pid for pid, (role, rank) in procs.items() if role == "scheduler"}
    assert sorted(st) == [0, 1] and all(st[r]["pid"] == sched[r] for r in (0, 1)), out
    for r in (0, 1):
        assert st[r]["address"] == str(sockdir / f"sglang-rank{r}-{sched[r]}.sock"), st
    # one socket banner per scheduler, none from the other processes
    assert len(re.findall(r"listening on ", err)) == 2, err
    assert err.count("the speculative draft model gets no probe") == 2, err
    import tensormorph_probe as tp
    for r in (0, 1):
        with tp.Trace(str(tmp_path / f"serve.rank{r}.tmrun")) as t:
            assert t.meta["serving.tp_rank"] == str(r) and t.meta["serving.tp_size"] == "2"
            assert t.annotation(2) == (["req-2-0", "req-2-1"], 2)


@pytest.mark.parametrize("framework", ["vllm", "sglang"])
@pytest.mark.parametrize("where", ["register", "attach", "requests"])
def test_plugin_failure_never_stops_the_server(tmp_path, framework, where):
    """Whatever part of the plugin fails (its registration, the attach after
    load_model, reading a step's requests), it says so once per process
    and the server serves every request."""
    proc = _server(tmp_path, framework, steps=3, SERVE_BREAK=where,
                   TENSORMORPH_RECORD=str(tmp_path / "serve.tmrun"))
    out, err, st = _finish(proc)
    # said once per process where it failed (SGLang registers in its
    # engine, scheduler and detokenizer)
    n = 3 if (framework, where) == ("sglang", "register") else 1
    assert err.count(f"failed (RuntimeError: injected failure ({where})); the server runs "
                     "on.") == n, err
    if where == "requests":
        # the probe records on; the steps' requests are unknown
        assert st[0]["forwards"] == (DUMMY + 3 if framework == "vllm" else 3), out
    else:
        assert st == {}, out


def _stop_and_hold(tmp_path, steps, **env):
    """A stand-in server with tmdb attached interactively and stopped at a
    breakpoint; returns (server, tmdb, seconds from the stop to the server's
    end, trace, what the server said at start) once the server has ended
    while tmdb still sat at that stop."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, "vllm", steps=steps, sleep=0.05, TENSORMORPH_LISTEN="1",
                   TENSORMORPH_WAIT="60", TENSORMORPH_RECORD=str(trace), **env)
    said, _ = _wait_for(proc.stderr, r"listening on (\S+)")
    tm = subprocess.Popen([TMDB, "-nx", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    tm.stdin.write(f"attach {proc.pid}\nbreak model.model.layers.0.mlp if step == {DUMMY + 1}\n"
                   "continue\n")
    tm.stdin.flush()
    _wait_for(tm.stdout, r"^Breakpoint 1, model\.model\.layers\.0\.mlp \(out\) at step "
              f"{DUMMY + 1}", timeout=60)
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
    assert st[0]["forwards"] == DUMMY + 30 and st[0]["released"] == 0, out
    assert f"$1 = {DUMMY + 1}" in rest, rest
    assert re.search(r"went away|closed|exited", rest, re.I), rest
    _, events, gaps = read(str(trace))
    assert not gaps and {e.step for e in events} == set(range(DUMMY + 30))


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
    assert st[0]["released"] == 1 and st[0]["forwards"] == DUMMY + 30, out
    assert held >= 1.0, held      # the rest of the 2 s, then 28 steps of 50 ms
    assert f"$1 = {DUMMY + 1}" in rest, rest
    _, events, gaps = read(str(trace))
    assert not gaps and {e.step for e in events} == set(range(DUMMY + 30))


@pytest.mark.parametrize("framework", ["vllm", "sglang"])
def test_not_eager_is_loud(tmp_path, framework):
    """A resolved configuration that compiles or replays CUDA graphs is
    named at attach, per rank; TENSORMORPH_SERVING_STRICT=1 makes it
    fatal (the one failure the plugins let through, on request)."""
    trace = tmp_path / "serve.tmrun"
    proc = _server(tmp_path, framework, steps=1, flavour="compiled",
                   TENSORMORPH_RECORD=str(trace))
    out, err, _ = _finish(proc)
    assert "WARNING" in err and "the probe's hooks do not see" in err, err
    if framework == "vllm":
        assert ("runs torch.compile (compilation mode VLLM_COMPILE); CUDA graphs (cudagraph_mode "
                "FULL_AND_PIECEWISE) (read from vllm_config.compilation_config)") in err, err
    else:
        assert ("runs torch.compile (enable_torch_compile); decode CUDA graphs (full); prefill "
                "CUDA graphs (breakable) (read from get_exec().graph)") in err, err
    proc = _server(tmp_path, framework, steps=1, flavour="compiled", TENSORMORPH_RECORD=str(trace),
                   TENSORMORPH_SERVING_STRICT="1")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "TENSORMORPH_SERVING_STRICT" in err, out + err


def test_model_body_skipped_is_loud(tmp_path):
    """Config says eager but the model's modules are never called (as under
    a CUDA graph replay): said once, after that forward."""
    proc = _server(tmp_path, "vllm", steps=2, flavour="replay",
                   TENSORMORPH_RECORD=str(tmp_path / "serve.tmrun"))
    out, err, st = _finish(proc)
    assert "forward 1 of the model ran but none of its modules was called" in err, err
    assert err.count("none of its modules was called") == 1


@pytest.mark.parametrize("framework,version,said", [
    ("sglang", "0.5.10", "sglang 0.5.10 is older than 0.5.11, the oldest version this plugin "
                         "supports"),
    ("vllm", "0.35.0", "vllm 0.35.0 is newer than 0.34.0, the newest version this plugin was "
                       "checked against")])
def test_version_outside_range_is_named(tmp_path, framework, version, said):
    """A framework version outside the supported range is named at load, and
    the plugin still tries."""
    proc = _server(tmp_path, framework, steps=1, versions={framework: version},
                   TENSORMORPH_RECORD=str(tmp_path / "serve.tmrun"))
    out, err, st = _finish(proc)
    assert f"WARNING: {framework} plugin: {said}" in err, err
    assert st[0]["forwards"] >= 1, out


def test_version_range():
    from tensormorph_probe.serving import touchpoints as tpt
    assert tpt.version_tuple("0.5.12.post1") == (0, 5, 12)
    assert tpt.version_tuple("0.34.0rc1") == (0, 34, 0)
    assert tpt.version_note("sglang", "0.5.11") is None
    assert tpt.version_note("sglang", "0.5.23.post2") is None
    assert tpt.version_note("vllm", "0.33.0") is None
    assert tpt.version_note("vllm", "0.34.0") is None
    assert "newer" in tpt.version_note("vllm", "0.35.0")
    assert "older" in tpt.version_note("vllm", "0.28.0")
    assert "not installed" in tpt.version_note("vllm", None)


def test_execution_decisions():
    """The eager/compiled decision, read from what each framework resolved."""
    import types

    from tensormorph_probe.serving import common, sglang, vllm
    NS = types.SimpleNamespace
    ex = vllm.execution_of(NS(compilation_config=NS(mode=0, cudagraph_mode=NS(name="NONE"))))
    assert ex.eager and common.unobserved(ex) == []
    ex = vllm.execution_of(NS(compilation_config=NS(mode=0,
                                                    cudagraph_mode=NS(name="PIECEWISE"))))
    assert not ex.eager and ex.graphs == ("CUDA graphs (cudagraph_mode PIECEWISE)",)
    ex = vllm.execution_of(NS(compilation_config=NS(mode=None, cudagraph_mode=None)))
    assert len(common.unobserved(ex)) == 2
    # torch.compile without CUDA graphs: the probe follows it into the graphs
    ex = vllm.execution_of(NS(compilation_config=NS(mode=3, cudagraph_mode=NS(name="NONE"))))
    assert not ex.eager and ex.compiled and common.unobserved(ex) == []
    ex = vllm.execution_of(NS(compilation_config=NS(mode=3,
                                                    cudagraph_mode=NS(name="PIECEWISE"))))
    assert common.unobserved(ex) == ["CUDA graphs (cudagraph_mode PIECEWISE)"]
    # SGLang 0.5.11: server_args resolved in place; --disable-cuda-graph
    # alone leaves the prefill's piecewise graphs on
    mr = NS(server_args=NS(disable_cuda_graph=True, disable_piecewise_cuda_graph=False,
                           enable_torch_compile=False))
    ex = sglang.execution_of(mr)
    assert ex.source == "server_args" and ex.graphs == (
        "prefill piecewise CUDA graphs (disable_piecewise_cuda_graph off)",)
    mr.server_args.disable_piecewise_cuda_graph = True
    assert sglang.execution_of(mr).eager
    # SGLang 0.5.2x: the resolved exec namespace; not published: unresolved,
    # which the probe cannot vouch for
    cfg = NS(decode=NS(backend="disabled"), prefill=NS(backend="breakable"))
    rc = NS(get_exec=lambda: NS(graph=NS(cuda_graph_config=cfg, enable_torch_compile=False)))
    orig = sglang._runtime_context
    try:
        sglang._runtime_context = lambda: rc
        ex = sglang.execution_of(mr)
        assert ex.source == "get_exec().graph" and ex.graphs == (
            "prefill CUDA graphs (breakable)",)

        def unpublished():
            raise ValueError("config namespace 'exec' not published")
        rc.get_exec = unpublished
        ex = sglang.execution_of(mr)
        assert not ex.eager and "unresolved" in common.unobserved(ex)[0]
    finally:
        sglang._runtime_context = orig


# ---------------------------------------------------------------- compare

def test_request_rows_of_the_frameworks_batches():
    """Each request's rows, as the plugins read them: vLLM V2's
    InputBatch.query_start_loc_np (num_tokens and its padded size the
    leading sizes); SGLang's decode (a row a request) and extend
    (extend_seq_lens_cpu) forwards, none for a speculative verify or a
    batch of one."""
    from tensormorph_probe.serving import sglang, vllm

    class Mode:
        def __init__(self, name):
            self.name = name

        def is_decode(self):
            return self.name == "DECODE"

        def is_extend(self):
            return self.name in ("EXTEND", "MIXED", "TARGET_VERIFY")

        def is_target_verify(self):
            return self.name == "TARGET_VERIFY"

    def fb(mode, n, lens=None, tokens=None):
        return types.SimpleNamespace(forward_mode=Mode(mode), batch_size=n,
                                     extend_seq_lens_cpu=lens,
                                     input_ids=torch.zeros(tokens or 0, dtype=torch.long))

    rows = sglang._request_rows
    assert rows((), {"forward_batch": fb("DECODE", 3, tokens=4)}) == (
        [(0, 1), (1, 2), (2, 3)], [3, 4])
    assert rows((fb("EXTEND", 2, [5, 3], 8),), {}) == ([(0, 5), (5, 8)], [8])
    assert rows((fb("MIXED", 2, [4, 1], 5),), {}) == ([(0, 4), (4, 5)], [5])
    assert rows((fb("TARGET_VERIFY", 2, [4, 4], 8),), {}) is None
    assert rows((fb("EXTEND", 1, [5], 5),), {}) is None
    assert rows((fb("EXTEND", 2, None, 8),), {}) is None

    class Runner:
        def prepare_inputs(self, *a):
            return types.SimpleNamespace(req_ids=["x", "y"], query_start_loc_np=[0, 5, 8],
                                         num_tokens=8, num_tokens_after_padding=16)

        def execute_model(self, scheduler_output, intermediate_tensors=None, dummy_run=False):
            if not dummy_run:
                self.prepare_inputs()

    r = vllm._Requests(Runner())
    r.runner.execute_model(None)
    assert r.ids((), {}) == ["x", "y"]
    assert r.rows((), {}) == ([(0, 5), (5, 8)], [8, 16])
    r.runner.execute_model(None, None, True)            # a dummy run
    assert r.rows((), {}) is None


def test_serving_rows_off(tmp_path):
    """TENSORMORPH_SERVING_ROWS=0: a forward of several requests records its
    batch tensors only, with the same stats as a run with the rows; by
    default each batch tensor whose leading size is the tokens is followed
    by one slot a request, out.0[r0] and out.0[r1], as tmdb names them."""
    import tensormorph_probe as tp

    rows, flat = tmp_path / "rows.tmrun", tmp_path / "flat.tmrun"
    procs = [_server(tmp_path, "vllm", steps=1, TENSORMORPH_RECORD=str(rows), SERVE_PACKED="1"),
             _server(tmp_path, "vllm", steps=1, TENSORMORPH_RECORD=str(flat), SERVE_PACKED="1",
                     TENSORMORPH_SERVING_ROWS="0")]
    for p in procs:
        _finish(p)

    def act(path):
        with tp.Trace(str(path)) as t:
            return [e for e in t.events() if e.step == DUMMY and e.kind == "exit"
                    and e.node == "model.model.layers.1.mlp.act_fn"]

    with_rows, without = act(rows), act(flat)
    assert len(with_rows) == len(without) == 1
    assert [x.slot for x in with_rows[0].tensors] == ["out.0", "out.0[r0]", "out.0[r1]"]
    assert [x.slot for x in without[0].tensors] == ["out.0"]
    assert with_rows[0].tensors[0].stats == without[0].tensors[0].stats
    # each request's rows: its own count of elements, summing to the batch's
    n = [x.stats["numel"] for x in with_rows[0].tensors]
    assert n[1] > 0 and n[2] > 0 and n[1] + n[2] == n[0]


@needs_tmdb
def test_compare_aligns_serving_runs_by_request(tmp_path):
    """Two recordings of the vLLM stand-in that batch differently: the run
    has one warm-up forward more and serves the second step's two requests
    one at a time.  compare aligns them by request ids (both are a serving
    plugin's): a request's k-th forward with its k-th in the reference, so
    the requests served alike match exactly (same weights, same tokens) and
    the forwards batched otherwise are named, not compared; by step numbers
    every forward after the extra warm-up is compared with another."""
    ref, run = tmp_path / "ref.tmrun", tmp_path / "run.tmrun"
    _finish(_server(tmp_path, "vllm", steps=4, TENSORMORPH_RECORD=str(ref)))
    _finish(_server(tmp_path, "vllm", steps=4, TENSORMORPH_RECORD=str(run),
                    SERVE_EXTRA_WARMUP="1", SERVE_SPLIT="1"))
    tm = _tmdb([f"compare {ref}", "info compare",
                "break model.** if tensor.mean != ref.tensor.mean", "run",
                "goto step 5", "print ref.tensor.mean",
                f"compare {ref} -by step", "info compare"], str(run))
    out = tm.stdout
    assert tm.returncode == 0, out + tm.stderr
    by_request, by_step = out.split(f"Reference: {ref}", 2)[1:]
    assert "steps aligned by request ids" in by_request, out
    # steps 0-2 warm-up (by number), 3 the extra warm-up, 4 req-0-*,
    # 5 and 6 req-1-0 and req-1-1 alone, 7 and 8 req-2-* and req-3-*
    m = re.search(r"Run events: (\d+), aligned (\d+), not aligned (\d+)", by_request)
    assert m, out
    total, aligned, missed = map(int, m.groups())
    assert total % 9 == 0 and missed == 3 * total // 9, out
    # of the reference's 7 steps only req-1-*'s pair is left
    per = total // 9
    assert f"Reference events not aligned: {per} of {7 * per}." in by_request, out
    assert re.search(r"^  model\S*\s+.*batched differently$", by_request, re.M), out
    assert re.search(r"^  mean\s+none", by_request, re.M), out
    assert "Breakpoint 1," not in by_request, out
    assert "<unknown: batched differently>" in by_request, out
    assert "steps aligned by request ids" not in by_step, out
    assert not re.search(r"^  mean\s+none", by_step, re.M), out



@needs_tmdb
def test_compare_requests_batched_together_with_hf_reference(tmp_path):
    """vLLM flattens a forward's requests into one [num_tokens, ...] batch
    (the stand-in's SERVE_PACKED); the HF reference runs one request per
    forward with its own KV cache.  The serving probe adds each request's
    rows' stats to the batch's tensors (out[r0], out[r1]), and compare
    aligns a request's k-th forward in the run with its k-th in the
    reference through them: the same model matches everywhere; with layer
    1's activation swapped, the first divergence is that activation at the
    first forward with requests (step 3, after vLLM's three warm-up
    forwards), on the first request's rows, live and on its recording."""
    steps = 3
    ref, same, gelu = (tmp_path / f"{n}.tmrun" for n in ("ref", "same", "gelu"))
    # the two servers side by side (each is mostly torch's import); the
    # second waits for tmdb, which needs the first one's reference
    p_same = _server(tmp_path, "vllm", steps=steps, TENSORMORPH_RECORD=str(same),
                     SERVE_PACKED="1", SERVE_HF_REFERENCE=str(ref))
    p_gelu = _server(tmp_path, "vllm", steps=steps, TENSORMORPH_RECORD=str(gelu),
                     TENSORMORPH_LISTEN="1", TENSORMORPH_WAIT="120",
                     TENSORMORPH_SERVING_PAUSE="60", SERVE_PACKED="1", SERVE_ACT="gelu")
    out, _, _ = _finish(p_same)
    # the same greedy tokens: the packed forward computes what HF does
    tokens = re.search(r"^tokens (.*)$", out, re.M).group(1)
    assert json.loads(tokens) == json.loads(re.search(r"^hf-tokens (.*)$", out, re.M).group(1))
    cond = "break model.** if abs(tensor.mean - ref.tensor.mean) > 1e-3"
    look = [f"compare {ref}", cond]
    stop = ["print tensor.mean", "print ref.tensor.mean"]
    # live: the server stops at the first divergence of a request's rows
    _wait_for(p_gelu.stderr, r"listening on (\S+)")
    live = _tmdb([f"attach {p_gelu.pid}"] + look + ["continue"] + stop + ["delete", "continue"])
    _finish(p_gelu)
    assert live.returncode == 0, live.stdout + live.stderr
    hit = "Breakpoint 1, model.model.layers.1.mlp.act_fn (out[r0]) at step 3, fwd"
    assert hit in live.stdout, live.stdout
    values = re.findall(r"^\$\d+ = .*$", live.stdout, re.M)
    assert len(values) == 2, live.stdout

    heat = "heatmap -nocolor reldiff(model.model.layers.*.mlp.act_fn:out.mean) over steps"
    tm = _tmdb([f"compare {ref}", "info compare -tol 1e-4", cond, "run", heat], str(same))
    out = tm.stdout
    assert tm.returncode == 0, out + tm.stderr
    assert "steps aligned by request ids" in out, out
    # every event of a forward with requests aligns through its rows; the
    # three warm-up forwards (no ids) and lm_head (run by the runner
    # outside the model's forward, no rows) are named
    m = re.search(r"Run events: (\d+), aligned (\d+), not aligned (\d+)", out)
    assert m, out
    total, aligned, missed = map(int, m.groups())
    assert aligned == total // 2 - 6 and missed == total // 2 + 6, out
    assert re.search(r"^  model\.model\.layers\.\*\.mlp\s+2 nodes, 12 events: batched "
                     r"differently$", out, re.M), out
    assert re.search(r"^Reference events not aligned: 12 of \d+\.\n  model.lm_head ", out,
                     re.M), out
    assert re.search(r"^  mean\s+none", out, re.M), out
    assert "Breakpoint 1," not in out, out
    # the heatmap has cells at the forwards with requests (steps 3-5)
    assert re.search(r"model\.model\.layers\.1\.mlp\.act_fn\s+\S", out), out

    # the live run's recording replayed: the same stop, with the same values
    tm = _tmdb([f"compare {ref}", "info compare -tol 1e-4", cond, "run"] + stop +
               ["info stats", "continue"], str(gelu))
    out = tm.stdout
    assert tm.returncode == 0, out + tm.stderr
    assert re.findall(r"^\$\d+ = .*$", out, re.M) == values, live.stdout + out
    first = re.search(r"^  mean\s+(\S+) at (\S+) step (\d+)", out, re.M)
    assert first and first.group(2, 3) == ("model.model.layers.1.mlp.act_fn:out[r0]", "3"), out
    assert hit in out, out
    assert re.search(r"^  request\s+cmpl-a \(its rows of out\)$", out, re.M), out
    assert re.search(r"^  mean\s+\S+\s+\S+\s+\S+e-0[12]\s+1$", out, re.M), out
    # one stop an event: the next is the same layer at the next forward
    assert ("Breakpoint 1, model.model.layers.1.mlp.act_fn (out[r0]) at step 4, fwd"
            in out), out
