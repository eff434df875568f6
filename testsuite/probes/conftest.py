"""Shared helpers of the probe tests: traces are always read back through
libtensormorph's reader (tensormorph_probe.Trace), never decoded in Python."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")

import tensormorph_probe as tp  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a long real-process test (4-rank jobs, compiling, the "
        "frameworks) or one whose C paths others take too; run-pytest.sh leaves them "
        "out under the sanitizers and in distcheck (TM_QUICK), whose runs repeat what "
        "the normal build checks")


# The tmdb binary of this build (make check sets it); tests that drive tmdb
# skip without it.
TMDB = os.environ.get("TMDB", "")
needs_tmdb = pytest.mark.skipif(not TMDB or not os.path.exists(TMDB),
                                reason="TMDB (the tmdb binary of this build) is not set")

# Lines that differ between a live run and its replay by design: how the
# program (or each rank) starts, attaches and ends, how the trace is opened,
# and how a breakpoint set before the program has nodes is announced
# ("pending" live).
_SETTING = re.compile(r"^(Starting program: |\[Inferior \d+ \(process \d+\) |Reading trace |Attaching to |"
                      r"\[Attached to |\d+ (ranks, \d+ )?events in |End of trace\.|"
                      r"Program not running|(Temporary b|B)reakpoint \d+ (at |\()|"
                      r"tensormorph-probe: )")


def run_tmdb(args, env=None, timeout=300, **kw):
    """tmdb -batch -nx ARGS, its output captured."""
    return subprocess.run([TMDB, "-batch", "-nx", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, **kw)


def comparable(text, end_varies=False):
    """tmdb's output without the lines a live run and its replay print
    differently by design.  end_varies: the playhead's place after "End of
    trace." too (a live job's last record lands by arrival order)."""
    out, skip = [], False
    for ln in text.splitlines():
        if skip:
            skip = False
            continue
        if end_varies and ln == "End of trace.":
            skip = True
            continue
        if not _SETTING.match(ln):
            out.append(ln)
    return out


def read(path):
    """(nodes by address, events, gaps) of a trace."""
    with tp.Trace(path) as t:
        recs = list(t.records())
        nodes = dict(t.by_address)
    events = [r for r in recs if isinstance(r, tp.EventRecord)]
    gaps = [r for r in recs if isinstance(r, tp.GapRecord)]
    return nodes, events, gaps


def assert_gap_free(events, gaps, total):
    """Events and gap ranges, in file order, tile seqs 0..total-1 exactly."""
    spans = sorted([(e.seq, e.seq) for e in events] + [(g.first_seq, g.last_seq) for g in gaps])
    nxt = 0
    for a, b in spans:
        assert a == nxt, f"seq {nxt} missing (next span starts at {a})"
        nxt = b + 1
    assert nxt == total
    for g in gaps:
        assert g.count == g.last_seq - g.first_seq + 1


class MLP(torch.nn.Module):
    def __init__(self, d_in=8, d=16, d_out=4):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d)
        self.act = torch.nn.ReLU(inplace=True)
        self.fc2 = torch.nn.Linear(d, d)
        self.fc3 = torch.nn.Linear(d, d_out)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(self.act(self.fc1(x)))))


@pytest.fixture
def trace_path(tmp_path):
    return str(tmp_path / "run.tmrun")
