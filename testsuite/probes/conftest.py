"""Shared helpers of the probe tests: traces are always read back through
libtensormorph's reader (tensormorph_probe.Trace), never decoded in Python."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tensormorph_probe as tp  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: a long real-process test (4-rank jobs); run-pytest.sh leaves "
        "them out under the sanitizers and in distcheck (TM_QUICK), whose runs repeat "
        "what the normal build checks")


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
