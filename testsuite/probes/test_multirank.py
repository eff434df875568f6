"""Debugging a torch.distributed job as one program (issue: multi-rank runs).

tmdb launches a real torchrun job (DDP over gloo on CPU, 2 and 4 ranks)
whose rank R gets a NaN at step 3, stops every rank at the first NaN
output of the job and names the rank; the per-rank recordings the probes
wrote meanwhile, replayed together through their manifest, print the same
session.  All-stop pauses the ranks that did not hit (non-stop does not),
`info inferiors` and `inferior N` select ranks, and cross-rank TQL finds
where ranks disagree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tensormorph_probe as tp
from conftest import TMDB, comparable, needs_tmdb, read
from conftest import run_tmdb as _tmdb

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DDP = ROOT / "examples" / "train_ddp.py"
RANKS = HERE / "ranks_model.py"
pytestmark = needs_tmdb


def _torchrun(n, script, *args):
    return ["torchrun", "--standalone", f"--nproc-per-node={n}", str(script), *map(str, args)]


@pytest.mark.parametrize("world,bad", [(2, 1), pytest.param(4, 2, marks=pytest.mark.slow)])
def test_live_job_equals_replay(tmp_path, world, bad):
    """The first NaN of the job stops it on the rank that made it; the
    recording of each rank, replayed through the manifest, agrees."""
    cmds = HERE / "live" / "ddp.cmds"
    trace = tmp_path / "run.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1")
    live = _tmdb(["-x", str(cmds), "--args",
                  *_torchrun(world, DDP, "--steps", 6, "--nan-rank", bad, "--nan-step", 3)],
                 env=env)
    manifest = tmp_path / "run.manifest"
    assert manifest.exists(), live.stdout + live.stderr
    for r in range(world):
        assert (tmp_path / f"run.rank{r}.tmrun").exists()
    assert f"[Attached to {world} ranks (processes " in live.stdout, live.stdout
    replay = _tmdb(["-x", str(cmds), str(manifest)])
    a, b = comparable(live.stdout, end_varies=True), comparable(replay.stdout, end_varies=True)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    for what in [f"[Switching to inferior {bad + 1} (rank {bad})]",
                 f"Breakpoint 1, @{bad}:model.proj (out) at step 3, fwd",
                 f"#1  @{bad}:model (Net)", f"$2 = {bad}",
                 "[Switching to inferior 1 (rank 0)]",
                 "Temporary breakpoint 2, @0:model.", "$4 = 4", "Run till exit"]:
        assert what in live.stdout, f"{what!r} not in the live session:\n{live.stdout}"
    # no rank's NaN before the injected one: the stop is the job's first
    assert live.stdout.count("Breakpoint 1, ") == 1
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", live.stdout, re.M), live.stdout
    # (-batch prints no summary of what it loaded: the stop names the rank)
    assert f"Breakpoint 1, @{bad}:model.proj (out) at step 3, fwd" in replay.stdout


def _interactive(env, script_args, before_continue, settle=2.0, before_run=""):
    """A tmdb session at a terminal-like pipe: stops at the job's first NaN,
    waits `settle` seconds, runs `before_continue`, then lets the job end.
    Returns the session and the wall-clock span (ns) the user sat at the
    prompt: from the stop line's arrival to `continue`."""
    tm = subprocess.Popen([TMDB, "-nx", "-q", "--args", *script_args], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = []
    try:
        tm.stdin.write(before_run + "break model.** if tensor.nan_count > 0\nrun\n")
        tm.stdin.flush()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = tm.stdout.readline()
            if not line:
                break
            out.append(line)
            if line.startswith("Breakpoint 1, "):
                break
        assert any(ln.startswith("Breakpoint 1, @1:") for ln in out), "".join(out)
        stopped = time.time_ns()
        time.sleep(settle)
        resumed = time.time_ns()
        tm.stdin.write(before_continue + "delete\ncontinue\nquit\n")
        tm.stdin.flush()
        rest, _ = tm.communicate(timeout=120)
        out.append(rest)
    finally:
        if tm.poll() is None:
            tm.kill()
            tm.wait()
    return "".join(out), (stopped, resumed)


def _events_during(trace, span, margin=0.5):
    """How many events a rank recorded while the user sat at the prompt,
    leaving the rank `margin` seconds to reach the event it pauses at.  An
    event's wall-clock time is the recording's start (start_unix_ns, taken
    with the probe's monotonic origin) plus its time_ns."""
    with tp.Trace(str(trace)) as t:
        start = t.meta["start_unix_ns"]
        times = [start + r.time_ns for r in t.records() if isinstance(r, tp.EventRecord)]
    a, b = span[0] + int(margin * 1e9), span[1]
    return sum(a <= x <= b for x in times), len(times)


def test_all_stop_pauses_every_rank(tmp_path):
    """A hit on rank 1 pauses rank 0 too, although rank 0 never waits for
    rank 1 (it trains until rank 1 is done): its recording shows the time
    the user spent at the prompt."""
    trace = tmp_path / "run.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1")
    out, span = _interactive(env, _torchrun(2, RANKS, 20, tmp_path / "done"), "info inferiors\n")
    assert re.search(r"^\s+1\s+0\s+process \d+ \(pytorch\) \(paused\)", out, re.M), out
    assert re.search(r"^\*\s+2\s+1\s+process \d+ \(pytorch\) \(paused\)", out, re.M), out
    # (rank 0 may pause at any of its events, its first included, so the
    # test looks at the time the user spent, not at where rank 0 was: one
    # that looked for a long pause past rank 0's second event failed once
    # in CI, under ASan)
    # One event may fall in the span: the one rank 0 pauses at, when it
    # takes longer than the margin to reach it (under the sanitizers on a
    # loaded host it did, once in CI: "1 of 112"); running, it records
    # over 100 there (test_non_stop_lets_other_ranks_run).
    during, total = _events_during(tmp_path / "run.rank0.tmrun", span)
    assert during <= 1 and total > 20, f"rank 0 recorded {during} of {total} events at the prompt"
    assert re.search(r"^\[Inferior 1 \(process \d+\) exited normally\]$", out, re.M), out


@pytest.mark.slow
def test_non_stop_lets_other_ranks_run(tmp_path):
    """set non-stop on: only the rank that hit is paused; rank 0 trains on
    (until rank 1, resumed, ends the job)."""
    trace = tmp_path / "run.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1")
    out, span = _interactive(env, _torchrun(2, RANKS, 20, tmp_path / "done"),
                             "info inferiors\n", settle=3.0, before_run="set non-stop on\n")
    assert re.search(r"^\s+1\s+0\s+process \d+ \(pytorch\) \(running\)", out, re.M), out
    assert re.search(r"^\*\s+2\s+1\s+process \d+ \(pytorch\) \(paused\)", out, re.M), out
    # rank 0 trained on (10 ms steps) for the 3 s rank 1 was held
    _, events, _ = read(str(tmp_path / "run.rank0.tmrun"))
    assert max(e.step for e in events) > 100
    during, total = _events_during(tmp_path / "run.rank0.tmrun", span)
    assert during > 100, f"rank 0 recorded {during} of {total} events at the prompt"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """One recorded 2-rank DDP job with a NaN on rank 1 at step 3, level 2."""
    d = tmp_path_factory.mktemp("job")
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "tensormorph_probe", "record", "-o",
                        str(d / "run.tmrun"), "--level", "2", "--",
                        *_torchrun(2, DDP, "--steps", 6, "--nan-rank", 1, "--nan-step", 3)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def test_inferiors_and_rank_addresses(job):
    """info inferiors lists the ranks; inferior N moves the playhead to that
    rank; addresses without @R: name the playhead's rank."""
    r = _tmdb(["-ex", "info inferiors", "-ex", "break model.proj if tensor.nan_count > 0",
               "-ex", "run", "-ex", "info inferiors", "-ex", "print model.proj:out.nan_count",
               "-ex", "print @1:model.proj:out.nan_count", "-ex", "inferior 1",
               "-ex", "print rank", "-ex", "print model.proj:out.nan_count", "-ex", "inferior",
               "-ex", "print @2:model.proj:out.nan_count", str(job)])
    out = r.stdout + r.stderr
    assert re.search(r"^\* 1\s+0\s+trace, \d+ events\s+\S*run\.rank0\.tmrun$", out, re.M), out
    assert re.search(r"^  2\s+1\s+trace, \d+ events\s+\S*run\.rank1\.tmrun$", out, re.M), out
    assert "Breakpoint 1, @1:model.proj (out) at step 3, fwd" in out
    assert re.search(r"^\* 2\s+1\s+trace", out, re.M), out
    # at rank 1's stop, an address without @R: is rank 1's
    assert "$1 = 32" in out and "$2 = 32" in out, out
    assert "[Switching to inferior 1 (rank 0)]" in out
    assert "$3 = 0" in out and "$4 = 0" in out, out   # rank 0's proj: clean
    assert "[Current inferior is 1 (rank 0)" in out
    assert "no node '@2:model.proj'; did you mean '@0:model.proj'" in out, out


def test_manifest_errors(tmp_path, job):
    """A manifest naming a missing rank file, or malformed, says what and
    where; nothing crashes."""
    bad = tmp_path / "bad.manifest"
    bad.write_text("tmrun-manifest 1\nworld_size 2\nrank 0 run.rank0.tmrun\n"
                   "rank 1 nowhere.tmrun\n")
    (tmp_path / "run.rank0.tmrun").write_bytes((job / "run.rank0.tmrun").read_bytes())
    r = _tmdb(["-ex", "info inferiors", str(bad)])
    assert "No inferiors." in r.stdout, r.stdout      # nothing half-loaded
    assert "rank 1" in r.stderr and "nowhere.tmrun" in r.stderr, r.stderr
    bad.write_text("tmrun-manifest 1\nworld_size 2\nrank 0 run.rank0.tmrun\n")
    r = _tmdb([str(bad)])
    assert re.search(r"bad\.manifest:\d+: .*rank 1", r.stderr), r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = _tmdb([str(empty)])
    assert "no run manifest" in r.stderr, r.stderr


def test_directory_and_find_by_rank(job):
    """tmdb DIR replays the manifest in it; find conditions on rank: rank
    0's first NaN is a gradient DDP averaged with rank 1's."""
    r = _tmdb(["-ex", "info inferiors", "-ex", "find rank == 0 && tensor.nan_count > 0",
               "-ex", "print rank", "-ex", "print $_step", str(job)])
    out = r.stdout + r.stderr
    assert re.search(r"^  2    1     trace, \d+ events ", out, re.M), out
    # (a parameter's gradient is recorded as the backward ends, after DDP
    # averaged it, in the order the backward made them: the head's first)
    assert re.search(r"^@0:model\.head\.\w+ \(grad\) at step 3, bwd$", out, re.M), out
    assert "$1 = 0" in out and "$2 = 3" in out


def test_record_live_job(tmp_path):
    """record FILE in a live job writes one trace per rank and the manifest,
    which replays as the job; a second record FILE is refused and leaves
    the first going."""
    r = _tmdb(["-ex", "break model.proj if tensor.nan_count > 0", "-ex", "run",
               "-ex", f"record {tmp_path / 'saved.tmrun'}",
               "-ex", f"record {tmp_path / 'other.tmrun'}", "-ex", "record",
               "-ex", "delete", "-ex", "continue",
               "-ex", "record stop", "--args",
               *_torchrun(2, DDP, "--steps", 6, "--nan-rank", 1, "--nan-step", 3)])
    out = r.stdout + r.stderr
    assert f"Recording to {tmp_path / 'saved.manifest'}: the " in out, out
    assert f"already recording to {tmp_path / 'saved.manifest'}" in out, out
    assert not (tmp_path / "other.manifest").exists()
    assert re.search(rf"^Recording to {re.escape(str(tmp_path / 'saved.manifest'))}: \d+ "
                     r"events so far\.$", out, re.M), out
    assert re.search(r"^Recording stopped: \S+saved\.manifest, \d+ events\.$", out, re.M), out
    replay = _tmdb(["-ex", "info inferiors", "-ex", "break model.proj if tensor.nan_count > 0",
                    "-ex", "run", str(tmp_path / "saved.manifest")])
    assert re.search(r"^  2    1     trace, \d+ events ", replay.stdout, re.M), \
        replay.stdout + replay.stderr
    assert "saved.rank1.tmrun" in replay.stdout
    assert "Breakpoint 1, @1:model.proj (out) at step 3, fwd" in replay.stdout


def test_find_where_ranks_disagree(tmp_path):
    """The DDP divergence hunt: rank 1's model.fc weights drift after step
    2's update; spread over the ranks at equal steps finds step 3, where
    the recorded weights first differ.  Activations differ from the start
    (every rank has its own data); the head's weights never do."""
    r = subprocess.run([sys.executable, "-m", "tensormorph_probe", "record", "-o",
                        str(tmp_path / "run.tmrun"), "--level", "2", "--",
                        *_torchrun(2, DDP, "--steps", 6, "--skew-rank", 1, "--skew-step", 2)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _tmdb(["-ex", "find spread(@*:model.fc.weight:data.l2) > 0", "-ex", "print $_step",
               "-ex", "print spread(@*:model.fc.weight:data.l2) > 0.001",
               "-ex", "find spread(@*:model.head.weight:data.l2) > 0",
               "-ex", "goto start", "-ex", "find spread(@*:model.fc:out.l2) > 0",
               "-ex", "print $_step", str(tmp_path / "run.manifest")])
    out = r.stdout + r.stderr
    assert re.search(r"^@[01]:model\.fc\.weight \(data\) at step 3, bwd$", out, re.M), out
    assert "$1 = 3" in out and "$2 = true" in out, out
    assert "Not found." in out, out
    assert "$3 = 0" in out, out
