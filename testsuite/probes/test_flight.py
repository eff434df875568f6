"""Flight mode (issue 21): the last N steps stay in memory and reach the disk
only at a trigger -- a TQL condition evaluated by libtensormorph, a fatal
signal, SIGUSR1, dump(), an uncaught exception, sys.exit(N) -- as an
ordinary .tmrun whose start is a "not kept" gap.  Real training loops
(GPT-2 from a config, an MLP), recorded through `tensormorph-probe record`
or attach(); traces are read back through libtensormorph."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import MLP, assert_gap_free, needs_tmdb, read, run_tmdb

import tensormorph_probe as tp
from tensormorph_probe import _lib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
NOT_KEPT = 1 << 7

_GPT2 = r'''
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
k = int(sys.argv[1])
cfg = GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=16, vocab_size=64,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(12):
    if step == k:
        with torch.no_grad():           # a weight goes bad: NaN from here on
            model.transformer.h[1].mlp.c_fc.weight[0, 0] = float("nan")
    ids = torch.randint(0, 64, (2, 8))
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
print("finished")
'''

_LOOP = r'''
import ctypes, os, signal, sys, torch
torch.manual_seed(0)
mode, k = sys.argv[1], int(sys.argv[2])
class Bomb(torch.nn.Module):
    step = -1
    def forward(self, x):
        if mode == "crash" and self.step == k:
            ctypes.string_at(0)         # SIGSEGV inside the model
        return x
bomb = Bomb()
model = torch.nn.Sequential(torch.nn.Linear(8, 16), bomb, torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    x = torch.randn(4, 8)
    bomb.step = step
    if step == k:
        print(f"trigger at step {step}", flush=True)   # the loop's own count
        if mode == "usr1":
            os.kill(os.getpid(), signal.SIGUSR1)
        elif mode == "raise":
            raise RuntimeError(f"boom at step {step}")
        elif mode == "exit":
            sys.exit(2)
        elif mode == "systemexit":     # no sys.exit: only the exit status says it
            raise SystemExit(2)
        elif mode == "dump":
            model(x)                    # the dump comes after this call
            import tensormorph_probe
            assert tensormorph_probe.dump("checkpoint looked odd")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "probes" / "pytorch"),
                                         env.get("PYTHONPATH", "")])
    for name in ("RANK", "WORLD_SIZE", "TENSORMORPH_LISTEN", "TENSORMORPH_WAIT",
                 "TENSORMORPH_PROBE_CONFIG", "TENSORMORPH_FLIGHT"):
        env.pop(name, None)
    return env


def _record(tmp_path: Path, script: str, args: list[str], *opts: str, timeout: float = 180):
    src = tmp_path / "train.py"
    src.write_text(script)
    out = tmp_path / "run.tmrun"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), *opts, "--",
           sys.executable, str(src), *args]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    return r, out


def _meta_pairs(path: Path) -> dict[str, str]:
    with tp.Trace(str(path)) as t:
        return {k: v for k, v in t.meta.items() if k.startswith("flight.")}


def _has_nan(e) -> bool:
    return any(t.stats.get("nan_count", 0) > 0 for t in e.tensors)


def _check_window(path: Path, first: int, last: int):
    """Events of steps first..last only; before them one NOT_KEPT gap from
    seq 0; events and gaps tile the seqs."""
    _, events, gaps = read(str(path))
    assert {e.step for e in events} == set(range(first, last + 1)), \
        sorted({e.step for e in events})
    assert gaps and gaps[0].first_seq == 0 and gaps[0].reason == NOT_KEPT, gaps
    assert gaps[0].last_seq + 1 == min(e.seq for e in events)
    assert all(g.reason == NOT_KEPT for g in gaps)
    return events, gaps


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers is not installed (./setup installs it)")
def test_nan_at_step_k_writes_k_minus_3_to_k(tmp_path):
    """GPT-2 goes NaN at step 7: --flight 3 writes steps 4..7 (the NaN and
    what came before it in that step), not steps 0..3, and stops."""
    k = 7
    r, out = _record(tmp_path, _GPT2, [str(k)], "--level", "1", "--flight", "3",
                     "--trigger", "tensor.nan_count > 0", "--on-trigger", "stop")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "finished" not in r.stdout
    assert "tensormorph-probe: trigger tensor.nan_count > 0 at seq" in r.stderr, r.stderr
    assert "wrote the last 3 steps to" in r.stderr
    events, gaps = _check_window(out, k - 3, k)
    bad = [e for e in events if _has_nan(e)]
    assert bad and bad[0].step == k
    assert (bad[0].node, bad[0].kind) == ("model.transformer.h.1.mlp.c_fc", "exit")
    assert not any(_has_nan(e) for e in events if e.step < k)
    pairs = _meta_pairs(out)
    assert pairs["flight.steps"] == "3"
    assert pairs["flight.steps_held"].startswith(f"3 complete steps from step {k - 3},")
    assert pairs["flight.trigger"] == f"trigger tensor.nan_count > 0 at seq {bad[0].seq} step {k}"
    assert pairs["flight.not_kept"] == f"{gaps[0].count} events before the window"




def _printed_step(stdout: str) -> int:
    """The step the script itself counted at its trigger (_LOOP prints it):
    the probe's steps are the loop's (doc/manual.md, "Steps")."""
    line = [ln for ln in stdout.splitlines() if ln.startswith("trigger at step ")]
    assert line, stdout
    return int(line[0].split()[-1])


@needs_tmdb
def test_not_kept_gap_in_tmdb(tmp_path):
    """tmdb names the gap before the window: `goto step 0` crosses it, and
    `info probe` says what the ring held.  SIGUSR1 between two iterations
    belongs to the next one: the window is the 3 iterations before it."""
    r, out = _record(tmp_path, _LOOP, ["usr1", "6"], "--flight", "3")
    assert r.returncode == 0, r.stderr
    k = _printed_step(r.stdout)
    _, events, _ = read(str(out))
    per_step = {s: sum(e.step == s for e in events) for s in range(k - 3, 10)}
    assert len(set(per_step.values())) == 1, per_step     # one forward and backward each
    lost = per_step[k - 3] * (k - 3)
    tm = run_tmdb(["-ex", "info gaps", "-ex", "goto step 0", "-ex", "info probe", str(out)])
    assert tm.returncode == 0, tm.stdout + tm.stderr
    text = tm.stdout
    assert re.search(rf"^1 +0-{lost - 1} +{lost} +0 +not kept \(flight window\)$", text,
                     re.M), text
    assert (f"Crossed gap at step 0: seq 0-{lost - 1}, {lost} events lost "
            "(not kept (flight window))." in text), text
    assert f"model (in) at step {k - 3}, fwd" in text
    assert f"flight.steps_held = 3 complete steps from step {k - 3}" in text
    assert "flight.trigger = SIGUSR1" in text


# The triggers that live in Python (SIGUSR1, an exception, an exit status)
# end in the C dump that dump() takes: the sanitizer run (TM_QUICK) checks
# the C paths with the crash and dump(), the normal build every trigger.
_PY_TRIGGER = pytest.mark.slow


@pytest.mark.parametrize("mode,reason", [
    ("crash", "fatal signal"),
    pytest.param("usr1", "SIGUSR1", marks=_PY_TRIGGER),
    pytest.param("raise", "uncaught exception: RuntimeError: boom at step 6", marks=_PY_TRIGGER),
    pytest.param("exit", "exit status 2", marks=_PY_TRIGGER),
    pytest.param("systemexit", "exit status 2", marks=_PY_TRIGGER),
    ("dump", "checkpoint looked odd"),
])
def test_each_trigger_writes_its_window(tmp_path, mode, reason):
    """A crash, SIGUSR1, an uncaught exception, sys.exit(2), a bare raise
    SystemExit(2) and dump() in the loop's step k each write steps k-3..k-1
    (and k as far as it went) with --flight 3."""
    r, out = _record(tmp_path, _LOOP, [mode, "6"], "--flight", "3")
    assert out.exists(), r.stderr
    assert _meta_pairs(out)["flight.trigger"] == reason
    k = _printed_step(r.stdout)
    _, events, gaps = read(str(out))
    steps = sorted({e.step for e in events})
    with tp.Trace(str(out)) as t:
        ncrashes = t.summary["ncrashes"]
    if mode == "crash":
        assert r.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), r
        assert steps == [k - 3, k - 2, k - 1, k]
        # step k up to the call that crashed, then the crash record
        assert [(e.node, e.kind) for e in events if e.step == k] == [
            ("model", "enter"), ("model.0", "enter"), ("model.0", "exit"), ("model.1", "enter")]
        assert ncrashes == 1
    elif mode in ("raise", "exit", "systemexit"):
        # before step k's forward: nothing of it
        assert r.returncode == (1 if mode == "raise" else 2), r.stderr
        assert steps == [k - 3, k - 2, k - 1]
        assert f"tensormorph-probe: {reason}: wrote the last 3 steps to {out}" in r.stderr
    else:
        # SIGUSR1 before step k's forward, dump() after its first call;
        # recording went on
        assert r.returncode == 0, r.stderr
        assert steps == list(range(k - 3, 10))
    assert gaps[0].first_seq == 0 and gaps[0].reason == NOT_KEPT
    assert gaps[0].last_seq == min(e.seq for e in events) - 1


@_PY_TRIGGER           # nothing dumped: no C path the others miss
def test_no_trigger_no_file(tmp_path):
    r, out = _record(tmp_path, _LOOP, ["none", "-1"], "--flight", "3",
                     "--trigger", "tensor.nan_count > 0")
    assert r.returncode == 0, r.stderr
    assert not out.exists()
    assert "tensormorph-probe" not in r.stderr


def test_attach_continue_and_info(tmp_path):
    """attach(flight=3): the window, then normal recording (on_trigger
    continue); flight_info says what the ring held."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = tmp_path / "run.tmrun"
    p = tp.attach(model, level=1, record=str(out), flight=3,
                  triggers=["model.fc2 if tensor.nan_count > 0"])
    for step in range(10):
        x = torch.randn(4, 8)
        if step == 5:
            with torch.no_grad():
                model.fc2.bias[0] = float("nan")
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
    p.flush()
    info = p.flight_info()
    p.close()
    assert info["dumps"] == 1 and info["steps_held"] == 3 and info["first_step"] == 2
    assert info["reason"].startswith("trigger model.fc2 if tensor.nan_count > 0 at seq")
    events, _ = _check_window(out, 2, 9)
    first = [e for e in events if _has_nan(e)][0]
    assert (first.node, first.step) == ("model.fc2", 5)


@needs_tmdb
def test_budget_bounds_the_ring(tmp_path):
    """Level 3 with a budget of two steps (about 114 KB each): the window holds fewer
    steps than asked, `info probe` says so, and a step too big for the
    budget by itself is a NOT_KEPT gap, never a silent hole."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 8))
    out = tmp_path / "run.tmrun"
    p = tp.attach(model, level=3, record=str(out), flight=4, flight_budget="256k")
    for step in range(8):
        model(torch.randn(8 if step != 5 else 64, 64))
        p.step()
    p.dump("test")
    p.close()
    nodes, events, gaps = read(str(out))
    pairs = _meta_pairs(out)
    held = int(pairs["flight.steps_held"].split()[0])
    assert held == 2, pairs
    assert pairs["flight.budget"] == "262144 bytes; 1 step did not fit", pairs
    big = [g for g in gaps if g.step == 5]
    # the seqs of its one forward, as many as step 6's
    assert len(big) == 1 and big[0].reason == NOT_KEPT
    assert big[0].count == sum(e.step == 6 for e in events) > 0
    assert not any(e.step == 5 for e in events)
    assert_gap_free(events, gaps, max(e.seq for e in events) + 1)
    # tmdb says what the ring held: 2 steps, and step 5 over the budget
    tm = run_tmdb(["-ex", "info probe", str(out)])
    assert re.search(r"flight.steps_held = 2 complete steps and 1 over the budget \(gaps\) "
                     r"from step 5, \d+ bytes$", tm.stdout, re.M), tm.stdout
    assert "flight.budget = 262144 bytes; 1 step did not fit" in tm.stdout


def test_bad_options(tmp_path):
    model = MLP()
    with pytest.raises(ValueError, match="bad trigger 'tensor.nan_count >'"):
        tp.attach(model, record=str(tmp_path / "a.tmrun"), flight=2,
                  triggers=["tensor.nan_count >"])
    with pytest.raises(ValueError, match="triggers need flight mode"):
        tp.attach(model, record=str(tmp_path / "a.tmrun"), triggers=["tensor.nan_count > 0"])
    with pytest.raises(ValueError, match="on_trigger must be one of"):
        tp.attach(model, record=str(tmp_path / "a.tmrun"), flight=2, on_trigger="later")
    r, _ = _record(tmp_path, _LOOP, ["none", "-1"], "--trigger", "tensor.nan_count > 0")
    assert r.returncode == 2 and "need --flight N" in r.stderr
    r, _ = _record(tmp_path, _LOOP, ["none", "-1"], "--flight", "2", "--flight-budget", "lots")
    assert r.returncode == 2 and "--flight-budget" in r.stderr
    assert not (tmp_path / "a.tmrun").exists()


def test_environment_variable(tmp_path):
    """TENSORMORPH_FLIGHT=N turns flight mode on for attach()."""
    src = tmp_path / "t.py"
    src.write_text(textwrap.dedent('''
        import sys, torch, tensormorph_probe as tp
        m = torch.nn.Linear(4, 4)
        p = tp.attach(m, record=sys.argv[1])
        for s in range(6):
            m(torch.randn(2, 4)); p.step()
        assert p.flight_info()["steps"] == 2
        p.dump("env")
        p.close()
    '''))
    env = _env()
    env["TENSORMORPH_FLIGHT"] = "2"
    out = tmp_path / "run.tmrun"
    r = subprocess.run([sys.executable, str(src), str(out)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    _check_window(out, 4, 5)


needs_gloo = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with gloo is not available")


@needs_gloo
@needs_tmdb
@pytest.mark.slow
def test_two_ranks_one_trigger_dumps_both(tmp_path):
    """A DDP job (torchrun, gloo, CPU) in flight mode whose rank 1 alone
    meets the trigger: both ranks write their window -- rank 0 through the
    rendezvous file, not a collective -- and tmdb replays them from the
    manifest, stopping at rank 1's NaN."""
    out = tmp_path / "run.tmrun"
    env = _env()
    env["OMP_NUM_THREADS"] = "1"
    for name in ("LOCAL_RANK", "TENSORMORPH_RECORD"):
        env.pop(name, None)
    torchrun = Path(sys.executable).parent / "torchrun"
    launcher = ([str(torchrun)] if torchrun.exists()
                else [sys.executable, "-m", "torch.distributed.run"])
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--flight", "2",
           # rank 0 goes NaN a step later (DDP averages the gradients): the
           # condition names the step so that only rank 1 triggers
           "--trigger", "model.proj if tensor.nan_count > 0 && step == 4", "--",
           *launcher, "--standalone", "--nproc-per-node=2", str(ROOT / "examples" / "train_ddp.py"),
           "--steps", "12", "--nan-rank", "1", "--nan-step", "4"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    files = _lib.manifest_read(str(tmp_path / "run.manifest"))
    assert [Path(f).name for f in files] == ["run.rank0.tmrun", "run.rank1.tmrun"]
    reasons = [_meta_pairs(Path(f))["flight.trigger"] for f in files]
    assert reasons[1].startswith("trigger model.proj if tensor.nan_count > 0 && step == 4 at seq")
    assert reasons[0] == f"another rank: {reasons[1]}", reasons
    # rank 1: steps 2..4 kept, then everything (on_trigger continue)
    _check_window(Path(files[1]), 2, 11)
    # rank 0 dumped when it noticed (its writer polls every 20 ms; this
    # tiny model runs a step in a few ms, so it may be some steps later)
    _, ev0, gaps0 = read(files[0])
    assert gaps0[0].first_seq == 0 and gaps0[0].reason == NOT_KEPT
    assert gaps0[0].last_seq + 1 == min(e.seq for e in ev0)
    assert max(e.step for e in ev0) == 11
    tm = run_tmdb(["-ex", "info inferiors", "-ex", "break model.proj if tensor.nan_count > 0",
                   "-ex", "run", str(tmp_path / "run.manifest")])
    assert tm.returncode == 0, tm.stdout + tm.stderr
    assert "Breakpoint 1, @1:model.proj (out) at step 4, fwd" in tm.stdout, tm.stdout


@needs_tmdb
def test_on_trigger_wait_then_attach(tmp_path):
    """--on-trigger wait: the program writes the window, prints how to
    attach and waits; tmdb attaches with the window as its history and the
    playhead at the triggering event (`bt`, `print`, `reverse-step` there),
    detaches, and the run goes on.  The written window shows the triggering
    event to `run` and `bt` too."""
    src = tmp_path / "train.py"
    src.write_text(_LOOP.replace('if mode == "usr1":', 'if mode == "nan":\n'
                                 '            x[0, 0] = float("nan")\n'
                                 '        elif mode == "usr1":'))
    out = tmp_path / "run.tmrun"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--flight", "2",
           "--trigger", "model.0 if tensor.nan_count > 0", "--on-trigger", "wait",
           "--wait", "120", "--", sys.executable, str(src), "nan", "6"]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        pid, lines = None, []
        deadline = time.monotonic() + 120
        while pid is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "waiting for a debugger: tmdb -ex 'attach " in line:
                pid = int(line.split("attach ")[1].split("'")[0])
        assert pid is not None, "".join(lines)
        assert lines[0].startswith("tensormorph-probe: trigger model.0 if tensor.nan_count > 0"
                                   " at seq"), lines
        assert f"or replay the window: tmdb {out}" in lines[-1]
        tm = run_tmdb(["-ex", f"attach {pid}", "-ex", "bt", "-ex", "print tensor.nan_count",
                       "-ex", "reverse-step", "-ex", "detach"], timeout=120)
        text = tm.stdout + tm.stderr
        assert f"Attaching to process {pid} (pytorch)" in text, text
        assert proc.wait(timeout=120) == 0
        k = _printed_step(proc.stdout.read())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the window is the history and the playhead starts at the trigger:
    # bt, print and reverse-step work there without moving the model
    assert re.search(r"The probe wrote its flight window \(trigger model.0 if "
                     rf"tensor.nan_count > 0 at seq \d+ step {k}\) to {re.escape(str(out))}: "
                     r"its \d+ records are the history.\n"
                     rf"model.0 \(out\) at step {k}, fwd\n", text), text
    assert "#0  model.0 (Linear)" in text and "#1  model (Sequential)" in text, text
    # x[0, 0] is NaN: row 0 of model.0's 16 outputs
    assert "$1 = 16\n" in text, text
    assert f"model.0 (in) at step {k}, fwd" in text, text
    tm = run_tmdb(["-ex", "break model.0 if tensor.nan_count > 0", "-ex", "run", "-ex", "bt",
                   str(out)])
    assert "Breakpoint 1, model.0 (out) at step 6, fwd" in tm.stdout, tm.stdout
    assert "#0  model.0 (Linear)" in tm.stdout and "#1  model (Sequential)" in tm.stdout
    _check_window(out, 4, 9)


_SLOW = r'''
import sys, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(sys.argv[1])):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 5:
        print("step 5", flush=True)
    time.sleep(0.02)
'''


@needs_tmdb
def test_tmdb_dump_and_set_probe_flight(tmp_path):
    """From tmdb, on a live run in flight mode: `set probe-flight 2`
    changes the window, `dump REASON` writes it (wire FLIGHT); on a
    recording, `dump` says there is no window."""
    src = tmp_path / "slow.py"
    src.write_text(_SLOW)
    out = tmp_path / "run.tmrun"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--flight", "4",
           "--listen", "--", sys.executable, str(src), "150"]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stderr.readline()
        assert "tmdb -ex 'attach " in line, line
        pid = int(line.split("attach ")[1].split("'")[0])
        assert proc.stdout.readline() == "step 5\n"
        tm = run_tmdb(["-ex", f"attach {pid}", "-ex", "set probe-flight 2",
                       "-ex", "dump loss looked odd", "-ex", "dump", "-ex", "detach"],
                      timeout=120)
        text = tm.stdout + tm.stderr
        assert "The probe is keeping the last 2 steps." in text, text
        assert "The probe wrote the window (2 complete steps from step " in text, text
        assert f"found its window already written to {out} (loss looked odd)." in text, text
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    pairs = _meta_pairs(out)
    assert pairs["flight.steps"] == "2" and pairs["flight.trigger"] == "loss looked odd"
    first = int(pairs["flight.steps_held"].split("from step ")[1].split(",")[0])
    _check_window(out, first, 149)
    tm = run_tmdb(["-ex", "dump", str(out)])
    assert "A recording has no flight window to dump" in tm.stderr, tm.stdout + tm.stderr


def test_dump_that_cannot_write(tmp_path, capsys):
    """A window that cannot be written (no such directory) is a clear
    message; the run goes on and the ring keeps its steps."""
    model = MLP()
    where = tmp_path / "no" / "such" / "dir" / "run.tmrun"
    p = tp.attach(model, record=str(where), flight=2)
    for _ in range(4):
        model(torch.randn(2, 8))
        p.step()
    assert p.dump("test") is False
    err = capsys.readouterr().err
    assert f"tensormorph-probe: flight dump to {where}: " in err, err
    assert p.flight_info()["dumps"] == 0 and p.flight_info()["steps_held"] == 2
    model(torch.randn(2, 8))
    p.close()                           # reported once, by dump()
    assert not where.exists()


_UNTIL = r'''
import os, sys, time, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while not os.path.exists(sys.argv[1]):      # the test says when to end
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}", flush=True)
    step += 1
    time.sleep(0.01)
'''


@needs_tmdb
@pytest.mark.slow
def test_set_probe_flight_on_a_recording(tmp_path):
    """A live run recording everything: `set probe-flight 2` from tmdb turns
    flight mode on (the probe's Python triggers too: SIGUSR1 then writes
    the last 2 steps after a NOT_KEPT gap), `set probe-flight off` writes
    the window and records everything again; every seq is accounted for."""
    src = tmp_path / "until.py"
    src.write_text(_UNTIL)
    out, stop = tmp_path / "run.tmrun", tmp_path / "stop"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--listen",
           "--", sys.executable, str(src), str(stop)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)

    def upto(n: int) -> int:
        """Reads the script's steps until step n is done; returns the last."""
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            if int(line.split()[1]) >= n:
                return int(line.split()[1])
    try:
        line = proc.stderr.readline()
        pid = int(line.split("attach ")[1].split("'")[0])
        upto(3)
        tm = run_tmdb(["-ex", f"attach {pid}", "-ex", "set probe-flight 2", "-ex", "detach"],
                      timeout=120)
        text = tm.stdout + tm.stderr
        assert (f"The probe is keeping the last 2 steps from now on; {out} gets them at a "
                "trigger." in text), text
        on = upto(0)
        k = upto(on + 8) + 1            # the probe's Python triggers are in by now
        os.kill(pid, signal.SIGUSR1)    # between step k - 1's optimizer step and step k
        upto(k + 3)
        tm = run_tmdb(["-ex", f"attach {pid}", "-ex", "set probe-flight 3",
                       "-ex", "set probe-flight off", "-ex", "detach"], timeout=120)
        text = tm.stdout + tm.stderr
        # a window was written: attaching reads the trace as history
        assert re.search(rf"The probe wrote its flight window \(SIGUSR1\) to "
                         rf"{re.escape(str(out))}: its \d+ records are the history.", text), text
        assert "Flight mode is off: the probe wrote the window (" in text, text
        stop.touch()
        assert proc.wait(timeout=120) == 0
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"tensormorph-probe: SIGUSR1: wrote the last 2 steps to {out}" in err, err
    _, events, gaps = read(str(out))
    assert_gap_free(events, gaps, max(e.seq for e in events) + 1)
    not_kept = [g for g in gaps if g.reason == NOT_KEPT]
    assert not_kept and not_kept[0].first_seq > 0, gaps
    steps = sorted({e.step for e in events})
    # recorded from step 0 until flight mode came on; then the SIGUSR1
    # window, steps k-2 and k-1, and everything after
    first_kept = min(e.step for e in events if e.seq > not_kept[0].last_seq)
    assert first_kept == k - 2, (k, steps)
    assert steps[0] == 0 and set(range(k - 2, steps[-1] + 1)) <= set(steps)
    assert _meta_pairs(out)["flight.trigger"] == "set probe-flight off"
