"""Live debugging of real PyTorch programs (issue: live debugging; the
contract of ARCHITECTURE 2).

Conformance: tmdb launches a real model (`tmdb --args python live_models.py
NAME`), the probe records the same run to a .tmrun meanwhile, and one
command file is run against the live process and against that recording:
the stops and values printed must be identical.  Failure tests: a debugger
that dies while the model is paused, a model that dies under the debugger,
garbage on the probe's socket, and a segfault inside a module's forward.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import TMDB, comparable, needs_tmdb, read
from conftest import run_tmdb as _tmdb

HERE = Path(__file__).resolve().parent
MODELS = HERE / "live_models.py"
pytestmark = needs_tmdb


CASES = {
    # level 2: gradients and parameters too
    "diverge": ("2", ["Breakpoint 1, model.layers.1.norm (out) at step 3", "$1 = 2048",
                      "Run till exit", "Temporary breakpoint 4, ", "Old value", "New value"]),
    "gpt2": ("1", ["Breakpoint 1, ", "Run till exit", "Temporary breakpoint"]),
    "cnn": ("2", ["Breakpoint 1, ", "grad_out", "Temporary breakpoint"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_live_equals_replay(tmp_path, name):
    level, expected = CASES[name]
    cmds = HERE / "live" / f"{name}.cmds"
    trace = tmp_path / f"{name}.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL=level)
    live = _tmdb(["-x", str(cmds), "--args", sys.executable, str(MODELS), name], env=env)
    assert trace.exists(), live.stdout + live.stderr
    replay = _tmdb(["-x", str(cmds), str(trace)])
    a, b = comparable(live.stdout), comparable(replay.stdout)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    for what in expected:
        assert what in live.stdout, f"{what!r} not in the live session:\n{live.stdout}"
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", live.stdout, re.M), live.stdout
    assert "Error" not in live.stderr, live.stderr


# ------------------------------------------------------------ failure tests

_SCRIPT = r'''
import os, sys, time, torch
import tensormorph_probe as tp
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
probe = tp.attach(model, level=1, record=sys.argv[1])
probe.listen(sys.argv[2], wait=float(sys.argv[3]), quiet=True)
print("ready", flush=True)
x = torch.randn(4, 8)
for step in range(int(sys.argv[4])):
    model(x)
    probe.step()
    time.sleep(float(sys.argv[5]))
probe.close()
print("done", flush=True)
'''


def _model(tmp_path, steps=50, sleep=0.0, wait=30):
    script = tmp_path / "model.py"
    script.write_text(_SCRIPT)
    trace, sock = tmp_path / "run.tmrun", tmp_path / "probe.sock"
    proc = subprocess.Popen([sys.executable, str(script), str(trace), str(sock), str(wait),
                             str(steps), str(sleep)], stdout=subprocess.PIPE, text=True)
    # until it listens or ends: importing torch under the sanitizers on a
    # loaded host took longer than the 15 s this waited at first
    deadline = time.monotonic() + 180
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not sock.exists():
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the probe did not listen (exit status {proc.returncode}): {out}")
    return proc, trace, sock


def test_debugger_killed_while_paused(tmp_path):
    """The model is paused at a breakpoint when tmdb dies: it runs on within
    a second and the recording holds every event of the run."""
    proc, trace, sock = _model(tmp_path, steps=20)
    tm = subprocess.Popen([TMDB, "-nx", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    tm.stdin.write(f"attach {sock}\nbreak model.2 if tensor.numel > 0\ncontinue\n"
                   "continue\nprint tensor.numel\n")
    tm.stdin.flush()
    # the model is paused at its second hit once tmdb printed the value
    deadline = time.monotonic() + 60
    out = ""
    while "$1 = 16" not in out and time.monotonic() < deadline:
        line = tm.stdout.readline()
        if not line:
            break
        out += line
    assert "$1 = 16" in out, out
    assert proc.poll() is None
    t0 = time.monotonic()
    tm.kill()
    tm.wait()
    proc.wait(timeout=10)
    assert time.monotonic() - t0 < 5
    assert proc.returncode == 0
    _, events, gaps = read(str(trace))
    assert not gaps
    assert len(events) == 20 * 8        # 4 modules, ENTER and EXIT, 20 steps


def test_model_killed_under_debugger(tmp_path):
    """The probed process dies while tmdb waits on it: tmdb says so at once
    and what was received stays browsable."""
    proc, _, sock = _model(tmp_path, steps=1000, sleep=0.01)
    tm = subprocess.Popen([TMDB, "-nx", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    tm.stdin.write(f"attach {sock}\nbreak model.2\ncontinue\nprint tensor.numel\n")
    tm.stdin.flush()
    out = ""
    while "$1 = 16" not in out:
        line = tm.stdout.readline()
        assert line, out
        out += line
    proc.kill()
    proc.wait()
    t0 = time.monotonic()
    rest, _ = tm.communicate("delete\ncontinue\nprint tensor.numel\nquit\n", timeout=20)
    assert time.monotonic() - t0 < 10
    assert "$2 = 16" in rest, rest
    assert re.search(r"went away|exited|killed|closed", rest), rest


@pytest.mark.parametrize("junk", [
    b"\x00" * 64,                                  # not a frame
    b"TM" + b"\xff" * 10,                           # a header with a bad checksum
    os.urandom(4096),
], ids=["zeros", "bad-header", "random"])
def test_garbage_on_the_socket(tmp_path, junk):
    """Whatever arrives on the socket, the probe drops that connection and
    the model runs on; a real debugger can attach afterwards."""
    proc, trace, sock = _model(tmp_path, steps=40, sleep=0.02, wait=0)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock))
        s.sendall(junk)
        s.settimeout(5)
        try:
            while s.recv(4096):
                pass
        except (TimeoutError, ConnectionResetError):
            pass
    tm = _tmdb(["-ex", f"attach {sock}", "-ex", "break model.0", "-ex", "continue",
                "-ex", "print tensor.numel", "-ex", "detach"], timeout=60)
    assert "$1 = 64" in tm.stdout, tm.stdout + tm.stderr
    assert proc.wait(timeout=60) == 0
    _, events, gaps = read(str(trace))
    assert not gaps and len(events) == 40 * 8


def test_half_a_frame_then_silence(tmp_path):
    """A client that sends half a frame and hangs never blocks the model."""
    proc, _, sock = _model(tmp_path, steps=30, sleep=0.01, wait=0)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock))
        s.sendall(b"TM\x40\x00\x10\x00")
        assert proc.wait(timeout=60) == 0


_CRASH = r'''
import ctypes, sys, torch
class Bad(torch.nn.Module):
    def forward(self, x):
        if self.calls == 3:
            ctypes.string_at(0)         # SIGSEGV inside a module's forward
        self.calls += 1
        return x * 2
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), Bad())
model[1].calls = 0
x = torch.randn(2, 8)
for step in range(10):
    model(x)
'''


def test_segfault_in_forward_recorded(tmp_path):
    """The fatal-signal handler writes the events before the crash and a
    crash record; the process still dies of its signal."""
    script = tmp_path / "crash.py"
    script.write_text(_CRASH)
    trace = tmp_path / "crash.tmrun"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent.parent / "probes" / "pytorch"),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "tensormorph_probe", "record", "-o", str(trace),
                        "--", sys.executable, str(script)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), r
    _, events, _ = read(str(trace))
    # steps 0-2 complete (6 events each), then step 3 up to Bad's ENTER
    assert [(e.node, e.kind) for e in events[-4:]] == [
        ("model", "enter"), ("model.0", "enter"), ("model.0", "exit"), ("model.1", "enter")]
    assert len(events) == 3 * 6 + 4
    tm = _tmdb(["-ex", "run", "-ex", "bt", str(trace)])
    assert "Program received signal SIGSEGV at step 3 in model.1" in tm.stdout, tm.stdout


def test_segfault_in_forward_live(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(_CRASH)
    tm = _tmdb(["-ex", "run", "--args", sys.executable, str(script)], timeout=120)
    assert "Program received signal SIGSEGV at step 3 in model.1" in tm.stdout, tm.stdout
    assert "Program terminated with signal SIGSEGV" in tm.stdout, tm.stdout


_TRAIN = r'''
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
x = torch.randn(4, 8)
for step in range(6):
    model(x).sum().backward()
'''


def test_capture_and_level_live(tmp_path):
    """`capture` takes a full tensor at the node's next call and `level`
    deepens a node from its next call: both act on the running model."""
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    tm = _tmdb(["-ex", "break model.2", "-ex", "run", "-ex", "capture model.2:out",
                "-ex", "level model.0 2", "-ex", "continue", "-ex", "x/4f model.2:out",
                "-ex", "info stats model.0:out", "-ex", "break model.0:grad_out",
                "-ex", "continue", "-ex", "print tensor.numel", "-ex", "level 7",
                "-ex", "capture model.*:out", "-ex", "capture model.9:out",
                "--args", sys.executable, str(script)], timeout=120)
    out = tm.stdout
    assert "Will capture model.2:out at its next call." in out, out
    assert "Probe level 2 for model.0, from their next call." in out, out
    # the second call of model.2 carries its contents: four floats of row 0
    assert re.search(r"^model\.2:out\[0,0\]:(\s+-?\d+\.\d+){4}$", out, re.MULTILINE), out
    # model.0 at level 2: histogram and gradients, which level 1 has not
    assert re.search(r"^  histogram +\[.*\] octaves -2\^", out, re.MULTILINE), out
    assert "Breakpoint 2, model.0 (grad_out) at step 1, bwd" in out, out
    assert "$1 = 64" in out, out
    assert "Usage: level [PATTERN] N" in tm.stderr + out
    # one tensor of one node, or a clear error
    assert '"model.*:out" is not a tensor' in tm.stderr + out
    assert 'No node named "model.9".' in tm.stderr + out


def test_record_live_history(tmp_path):
    """`record FILE` saves what the live process sent so far and what it
    sends next: the file equals the probe's own recording of the run."""
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    saved, probe_trace = tmp_path / "saved.tmrun", tmp_path / "probe.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(probe_trace))
    tm = _tmdb(["-ex", "break model.2", "-ex", "run", "-ex", "record", "-ex", f"record {saved}",
                "-ex", "delete", "-ex", "continue", "-ex", "record", "-ex", "record stop",
                "-ex", "record stop", "--args", sys.executable, str(script)], env=env,
               timeout=120)
    out = tm.stdout + tm.stderr
    assert "Not recording." in out, out
    assert re.search(rf"Recording to {re.escape(str(saved))}: the 7 events received so far",
                     out), out
    assert re.search(r"Recording stopped: .*saved\.tmrun, 48 events\.", out), out
    _, ev_saved, gaps = read(str(saved))
    _, ev_probe, _ = read(str(probe_trace))
    assert not gaps
    assert [(e.seq, e.node, e.kind) for e in ev_saved] == [
        (e.seq, e.node, e.kind) for e in ev_probe]
    assert [t.stats for e in ev_saved for t in e.tensors] == [
        t.stats for e in ev_probe for t in e.tensors]
    replay = _tmdb(["-ex", "record foo.tmrun", str(saved)])
    assert "The trace is a recording already" in replay.stderr + replay.stdout


@pytest.mark.parametrize("how", ["kill", "quit"])
def test_ending_a_paused_run_leaves_a_whole_trace(tmp_path, how):
    """`kill`, or `quit` with the program paused, asks the probe to finish its
    recording before the process dies: the trace is indexed and holds every
    event up to the stop, and no socket file is left behind."""
    trace = tmp_path / "run.tmrun"
    # a socket directory of our own to look into, short: a socket's path has
    # a length limit that pytest's temporary directories can pass
    run_dir = Path(tempfile.mkdtemp(prefix="tm", dir="/tmp"))
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1",
               XDG_RUNTIME_DIR=str(run_dir))
    live = _tmdb(["-ex", "break model.** if tensor.nan_count > 0", "-ex", "run",
                  "-ex", "print $_seq",
                  "-ex", how, "--args", sys.executable, str(MODELS), "diverge"], env=env)
    assert "Breakpoint 1, model.layers.1.norm (out) at step 3" in live.stdout, live.stdout
    seq = int(re.search(r"^\$1 = (\d+)$", live.stdout, re.M).group(1))
    if how == "kill":
        assert re.search(r"^\[Inferior 1 \(process \d+\) killed\]$", live.stdout, re.M), live.stdout
    assert not list((run_dir / "tensormorph").iterdir()), "socket files left behind"
    shutil.rmtree(run_dir)
    replay = _tmdb(["-ex", "info probe", str(trace)])
    assert "indexed, complete" in replay.stdout, replay.stdout + replay.stderr
    assert "warning" not in replay.stderr, replay.stderr
    _, events, gaps = read(str(trace))
    assert not gaps
    assert [e.seq for e in events] == list(range(seq + 1))


def test_views_do_not_resume_live(tmp_path):
    """A view over steps on a paused live model draws the steps that have
    arrived and says so; the model stays where it was (issue 19, item 4):
    the next `continue` stops at the following step, not at the end."""
    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    tm = _tmdb(["-ex", "break model.2", "-ex", "run", "-ex", "continue",
                "-ex", "heatmap -nocolor model.*:out.abs_max over steps",
                "-ex", f"plot -nocolor -svg {tmp_path}/p.svg model.2:out.abs_max",
                "-ex", "heatmap -nocolor model.*:out.abs_max over steps 0..",
                "-ex", "continue",
                "--args", sys.executable, str(script)], timeout=120)
    out = tm.stdout
    assert "Live: the steps that have arrived so far (to step 1); the model was not resumed." \
        in out, out
    assert "model.*:out.abs_max over steps 0..1: 3 nodes, 2 steps, one a column" in out, out
    assert "model.2:out.abs_max over steps 0..1: 2 steps, one a column" in out, out
    svg = (tmp_path / "p.svg").read_text()
    assert "live: the steps that have arrived so far" in svg, svg
    # the run was held: the next continue stops at step 2
    assert "Breakpoint 1, model.2 (out) at step 2, fwd" in out, out
