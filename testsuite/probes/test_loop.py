"""The training loop as the frameworks run it (issue 27; doc/manual.md,
"Steps"): real scripts (loop_models.py) under tmdb, live, and over the
recording of the same run with the same command file.

Done when, in each framework, the first NaN's step is the step the script
itself prints, the micro-batch is named (#N), gradients sit in the step
and micro-batch of their forward, and a condition can pass over the
overflows a GradScaler skips.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from conftest import TMDB, comparable, needs_tmdb, read
from conftest import run_tmdb as _tmdb

import tensormorph_probe as tp

# slow (HF Trainer, Lightning, accelerate): the normal build's run checks
# them; the sanitizer run and distcheck (TM_QUICK) leave them out
pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
MODELS = HERE / "loop_models.py"

# the program's own lines, which a replay does not print
# (and live find's note that it searched what has arrived)
_PROGRAM = re.compile(r"^((nan|skipped|generate|raise): |\{'|Searched what the running)")


def _needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed (./setup installs it)")


def _session(tmp_path, name, cmds, level):
    """(live output, replay output, trace) of loop_models.py NAME."""
    trace = tmp_path / f"{name}.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL=str(level),
               PYTHONWARNINGS="ignore")
    live = _tmdb(["-x", str(HERE / "loop" / cmds), "--args", sys.executable, str(MODELS), name],
                 env=env, timeout=600)
    assert trace.exists(), live.stdout + live.stderr
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", live.stdout, re.M), \
        live.stdout + live.stderr
    replay = _tmdb(["-x", str(HERE / "loop" / cmds), str(trace)])
    a = [x for x in comparable(live.stdout) if not _PROGRAM.match(x)]
    b = comparable(replay.stdout)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    assert "Error" not in live.stderr + replay.stderr, live.stderr + replay.stderr
    return live.stdout, replay.stdout, trace


def _check_grads(trace, roots=("model",)):
    """Every parameter gradient sits in phase bwd of the step and micro-batch
    (the root's call number) of a forward; returns {step: {calls}} of them."""
    _, events, _ = read(trace)
    calls = {(e.step, e.call) for e in events if e.node in roots and e.kind == "enter"}
    grads: dict[int, set[int]] = {}
    for e in events:
        if e.kind == "param" and e.tensors[0].slot == "grad":
            assert e.phase == "bwd"
            assert (e.step, e.call) in calls, (e.node, e.step, e.call)
            grads.setdefault(e.step, set()).add(e.call)
    return events, grads


# name: (micro-batches a step, steps, the root whose calls they are)
NAN_CASES = {
    "accum": (4, 8, "model"),
    "hf": (4, 9, "model"),
    "lightning": (2, 8, "model"),
    "accelerate": (2, 6, "model"),
}


@needs_tmdb
@pytest.mark.parametrize("name", [
    "accum",
    pytest.param("hf", marks=[_needs("transformers"), _needs("accelerate")]),
    pytest.param("lightning", marks=_needs("lightning")),
    pytest.param("accelerate", marks=_needs("accelerate")),
])
def test_first_nan_at_the_step_the_script_prints(tmp_path, name):
    live, replay, trace = _session(tmp_path, name, "nan.cmds", 2)
    said = re.search(r"^nan: step (\d+) micro (\d+)$", live, re.M)
    assert said, live
    step, micro = int(said[1]), int(said[2])
    call = f"#{micro}" if micro > 1 else ""
    stop = re.search(r"^Breakpoint 1, (\S+?)(#\d+)? \(out\) at step (\d+), fwd$", live, re.M)
    assert stop, live
    assert (stop[2] or "", int(stop[3])) == (call, step), live
    assert f"$1 = {step}\n$2 = {micro}\n" in live
    assert f"call {micro}\n" in live            # info frame
    # the stop's micro-batch, found again in the history
    assert re.search(rf"^model{call} \(out\) at step {step}, fwd$", live, re.M), live
    assert re.search(r"^Step +First seq", live, re.M)          # info steps, live too
    k, steps, root = NAN_CASES[name]
    events, grads = _check_grads(trace, (root,))
    # gradients in every step, for each micro-batch of it (an evaluation
    # that joined the step took call numbers before them)
    assert sorted(grads) == list(range(steps)), grads
    assert all(len(grads[s]) == k for s in grads), grads
    assert grads[0] == set(range(1, k + 1)), grads
    # the optimizer's new values: once a step, after its gradients
    data = [e for e in events if e.kind == "param" and e.tensors[0].slot == "data"
            and e.phase == "bwd"]
    assert sorted({e.step for e in data}) == list(range(steps))


@needs_tmdb
def test_lightning_root_is_the_module_given(tmp_path):
    pytest.importorskip("lightning")
    trace = tmp_path / "l.tmrun"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-m", "tensormorph_probe", "record", "-o", str(trace),
                        "--", sys.executable, str(MODELS), "lightning"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    nodes, events, _ = read(trace)
    # the LightningModule is `model`: training_step's self.net and self.loss
    assert {"model", "model.net", "model.net.2", "model.loss"} <= set(nodes)
    first = next(e for e in events for t in e.tensors if t.stats.get("nan_count", 0) > 0)
    assert (first.node, first.step, first.call) == ("model.net.2", 5, 2)
    # validation (every 6 batches: after optimizer step 3, and the sanity
    # check) joins the step it runs in, as Lightning's global_step does
    root = [(e.step, e.call) for e in events if e.node == "model" and e.kind == "enter"]
    assert root[:4] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert (3, 4) in root and max(s for s, _ in root) == 7


@needs_tmdb
def test_scaler_overflows_are_passed_over(tmp_path):
    live, _, trace = _session(tmp_path, "scaler", "scaler.cmds", 2)
    assert re.search(r"^nan: step 7 micro 1$", live, re.M)
    assert "Breakpoint 1, model.0 (out) at step 7, fwd\n" in live
    assert "$1 = 7\n$2 = \"fwd\"\n$3 = false\n$4 = 256\n" in live
    # what it passed over: the overflow of iteration 2, in a skipped step
    assert "model.2 (grad_out) at step 2, bwd\n$5 = true\n$6 = 1024\n" in live
    assert "40 matching events.\n10 matching events.\n4 matching events.\n" in live
    events, grads = _check_grads(trace)
    # gradients of the skipped steps are there too
    assert sorted(grads) == list(range(9))
    data = {e.step for e in events if e.kind == "param" and e.tensors[0].slot == "data"
            and e.phase == "bwd"}
    assert data == set(range(9)) - {2, 5, 7, 8}        # the scaler skipped those


@needs_tmdb
@_needs("transformers")
def test_generate_calls_are_steps(tmp_path):
    live, _, _ = _session(tmp_path, "generate", "generate.cmds", 1)
    assert re.search(r"^generate: call 3 step 5$", live, re.M)
    said = re.findall(r"^generate: call (\d+) step (\d+)$", live, re.M)
    assert said == [("1", "3"), ("2", "4"), ("3", "5"), ("4", "6")]
    # it stops in the call that printed step 6, not before it
    assert live.index("generate: call 3 step 5") < live.index("Breakpoint 1, model.lm_head")
    assert live.index("Breakpoint 1, model.lm_head") < live.index("generate: call 4 step 6")
    assert "$1 = 6\n$2 = 1\n" in live
    assert "\n8 matching events.\n" in live        # the root's in and out, steps 3-6


def test_annotations_of_any_key(trace_path):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tp.attach(model, level=1, record=trace_path) as probe:
        for step in range(4):
            if step == 2:
                assert probe.annotate("phase_name", "warmup") == ["warmup"]
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
    if not TMDB:
        pytest.skip("TMDB is not set")
    out = _tmdb(["-ex", 'find count annot.phase_name == "warmup"',
                 "-ex", 'find count annot.phase_name != "warmup"',
                 "-ex", 'find first annot.phase_name =~ "warm*"', "-ex", "print step",
                 str(trace_path)])
    # step 2's four events (model and model.0, in and out) and the rest
    assert "4 matching events.\n12 matching events.\n" in out.stdout, out.stdout + out.stderr
    assert "$1 = 2\n" in out.stdout


def test_no_probe_frame_in_the_users_traceback(tmp_path):
    """model=None: every module call passes the probe's discovery (C), and
    the forward wrapper is C: an error in the user's forward shows the
    user's frames and torch's, none of the probe's."""
    import torch

    class Bad(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    outer = torch.nn.Sequential(torch.nn.Linear(2, 2), Bad())
    with tp.attach(None, level=1, record=tmp_path / "t.tmrun"):
        try:
            outer(torch.randn(1, 2))
        except ValueError as exc:
            frames = traceback.extract_tb(exc.__traceback__)
        else:
            raise AssertionError("no error")
    if os.environ.get("TENSORMORPH_EXPECT_HOOK"):
        assert not [f for f in frames if "tensormorph_probe" in f.filename], frames
    assert frames[-1].name == "forward"


def test_hand_written_evaluation(trace_path):
    """Evaluation between training steps of a hand-written loop: inside
    tensormorph_probe.evaluation() it joins the step (as the loop counts
    them); outside it each evaluation call is an inference step."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 4)
    with tp.attach(model, level=0, record=trace_path):
        for _ in range(3):
            model.train()
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            model.eval()
            with torch.no_grad(), tp.evaluation():
                model(x)
                model(x)
        with torch.no_grad():
            model(x)                # after training: a step of its own
            model(x)
    _, events, _ = read(trace_path)
    root = [(e.step, e.call) for e in events if e.node == "model" and e.kind == "enter"]
    # the evaluation after optimizer step k is in step k + 1, before its
    # training call, as HF's global_step counts it
    assert root == [(0, 1), (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), (3, 1), (3, 2),
                    (4, 1), (5, 1)]


@needs_tmdb
def test_live_find_and_info_steps_keep_the_program_paused(tmp_path):
    """find on a live run searches what has arrived and says so; neither it
    nor info steps lets the paused program run on (in batch mode there is
    no one to ask whether to)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    r = _tmdb(["-ex", "break model.** if tensor.nan_count > 0", "-ex", "run",
               "-ex", "find count tensor.nan_count > 0", "-ex", "find first step == 7",
               "-ex", "print step", "-ex", "info steps", "-ex", "kill",
               "--args", sys.executable, str(MODELS), "accum"], env=env)
    out = r.stdout
    assert "Breakpoint 1, model.2#3 (out) at step 5, fwd\n" in out, out + r.stderr
    said = "Searched what the running program has recorded so far (it is paused).\n"
    assert said + "1 matching event.\n" + said in out, out
    assert "Not found." in r.stderr
    assert "$1 = 5\n" in out
    steps = re.findall(r"^(\d+) +\d+ +\d+$", out, re.M)
    assert steps == [str(i) for i in range(6)], out        # nothing past step 5 ran
    assert "(the steps recorded so far: the program is paused)" in out


@needs_tmdb
def test_raise_and_catch(tmp_path):
    """An exception leaving a forward is a (raise) event at each call it
    leaves, named by its type; catch exception stops there, catch nan
    with a condition passes over the overflow the scaler skips, live and
    replayed alike."""
    live, _, trace = _session(tmp_path, "raises", "raises.cmds", 2)
    assert re.search(r"^raise: step 4 activation overflow in model.1$", live, re.M), live
    assert re.search(r"^nan: step 5 micro 1$", live, re.M), live
    assert ("Catchpoint 1 (exception raised), model.1 (raise) FloatingPointError "
            "at step 4, fwd\n") in live
    # bt shows each call's inputs as GDB shows arguments: (in=f32[...])
    assert re.search(r"^#0  model\.1 \(_Check\) \(in=f32\[[0-9,]+\]\) at .*\n"
                     r"#1  model \(Sequential\) \(in=", live, re.M), live
    assert ('$1 = "raise"\n$2 = "FloatingPointError"\n'
            '$3 = "activation overflow in model.1"\n') in live
    assert "Exception: FloatingPointError: activation overflow in model.1\n" in live
    assert "Catchpoint 1 (exception raised), model (raise) FloatingPointError" in live
    # the NaN, not the skipped overflow of step 2 (8 infinite gradients)
    assert "Catchpoint 2 (nan), model (in) at step 5, fwd\n" in live
    assert "\n$4 = 5\n$5 = false\n" in live
    assert ("seq 88, step 4, fwd: model.1 (raise) FloatingPointError\n"
            "seq 89, step 4, fwd: model (raise) FloatingPointError\n") in live
    assert "\n8 matching events.\n" in live
    assert "Temporary catchpoint 3 (exception raised)" not in live     # a KeyError's
    _, events, _ = read(trace)
    raised = [(e.node, e.step, e.call) for e in events if e.kind == "raise"]
    assert raised == [("model.1", 4, 1), ("model", 4, 1)]
    # the batch after the skipped one is the same optimizer step's next call
    assert [(e.step, e.call) for e in events if e.node == "model" and e.kind == "enter"][4:6] \
        == [(4, 1), (4, 2)]


@needs_tmdb
def test_a_stop_is_a_stop(tmp_path):
    """An interrupt while the program runs between events (here its
    logging) holds it there: nothing of it runs while tmdb shows the stop,
    in the first interrupt, after a continue, and until a kill ends it."""
    import select
    import time
    log = tmp_path / "log.txt"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    p = subprocess.Popen([TMDB, "-nx", "-q", "--interpreter=mi", "--args", sys.executable,
                          str(MODELS), "logging", str(log)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    buf = [b""]

    def send(cmd):
        p.stdin.write(cmd.encode() + b"\n")
        p.stdin.flush()

    def until(pat, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            i = buf[0].find(pat)
            if i >= 0:
                j = buf[0].find(b"\n", i) + 1 or len(buf[0])
                out, buf[0] = buf[0][:j], buf[0][j:]
                return out.decode()
            if select.select([p.stdout], [], [], 0.1)[0]:
                buf[0] += os.read(p.stdout.fileno(), 65536)
        raise AssertionError(f"no {pat!r} in {buf[0].decode()[-2000:]}")

    def still():
        a = log.stat().st_size
        time.sleep(0.8)          # longer than a line of logging takes
        return log.stat().st_size - a

    try:
        send("-exec-run")
        until(b"*running")
        while not log.exists() or log.stat().st_size < 200:
            time.sleep(0.1)
        for _ in range(2):
            send("-exec-interrupt")
            stop = until(b"*stopped")
            assert 'reason="signal-received",signal-name="SIGINT"' in stop, stop
            assert still() == 0, "the program ran on while stopped"
            send("-exec-continue")
            until(b"*running")
            time.sleep(1.0)
        send("-exec-interrupt")
        until(b"*stopped")
        size = log.stat().st_size
        send('-interpreter-exec console "kill"')
        assert "killed]" in until(b"^done")
        assert log.stat().st_size == size, "the program ran on after the kill"
        send("-gdb-exit")
        p.wait(20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
