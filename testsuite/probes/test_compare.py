"""A run beside a reference (issue 29, doc/manual.md "Comparing with a
reference"): pairs of real models recorded by the probe, aligned by tmdb.

    GELU tanh against erf     the first divergence is that GELU, at step 0
    bf16 against fp32         a divergence that grows step by step
    re-implementation of an   aligned through -map rules; the fused q/k/v
    HF Llama against HF       is named as what does not align; a wrong eps
                              is found where it is
    live and replay           stop at the same event

Every model is recorded in one python process (compare_models.py
--record-all): one torch start-up for all of them.  The live test starts a
second one and is marked slow.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import comparable, needs_tmdb, run_tmdb

HERE = Path(__file__).resolve().parent
MODELS = HERE / "compare_models.py"
pytestmark = needs_tmdb

sys.path.insert(0, str(HERE))
from compare_models import FUSED_MAP  # noqa: E402


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    r = subprocess.run([sys.executable, str(MODELS), "--record-all", str(d)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def tmdb(*args):
    r = run_tmdb([str(a) for a in args])
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def ex(*cmds):
    out = []
    for c in cmds:
        out += ["-ex", c]
    return out


def maps():
    out = []
    for m in FUSED_MAP:
        out += [f"-map '{m}'"]
    return " ".join(out)


def test_gelu_approximation_first_divergence(rec):
    out = tmdb(*ex(f"compare {rec / 'gelu_erf.tmrun'}",
                   "find first maxabsdiff() > 0",
                   "print reldiff(tensor.mean, ref.tensor.mean) > 0",
                   "info compare"), rec / "gelu_tanh.tmrun")
    # the first event whose contents differ is the changed activation
    assert re.search(r"^Found at seq \d+:\nmodel\.act1 \(out\) at step 0, fwd$", out, re.M), out
    assert "= true" in out
    assert "Run events: 24, aligned 24, not aligned 0." in out, out
    assert re.search(r"^  mean +\S+ at model\.act1:out step 0 ", out, re.M), out
    # fc1 before it is the same in both
    out = tmdb(*ex(f"compare {rec / 'gelu_erf.tmrun'}",
                   "find first step == 0 in model.fc1:out", "print maxabsdiff()",
                   "print cosine()"), rec / "gelu_tanh.tmrun")
    assert re.search(r"^\$1 = 0$", out, re.M) and re.search(r"^\$2 = 1$", out, re.M), out


def test_bf16_against_fp32_grows(rec):
    cmds = [f"compare {rec / 'fp32.tmrun'}"]
    for step in range(8):
        cmds += [f"find first step == {step} in model.head:out", "print relerr()"]
    cmds += ["heatmap -nocolor reldiff(model.**.weight:data.l2) over steps"]
    out = tmdb(*ex(*cmds), rec / "bf16.tmrun")
    errs = [float(x) for x in re.findall(r"^\$\d+ = (\S+)$", out, re.M)]
    assert len(errs) == 8, out
    # bfloat16 rounding from the first step, then the updates drift apart
    assert 1e-3 < errs[0] < 1e-2, errs
    assert errs[-1] > 3 * errs[0], errs
    assert sum(b > a for a, b in zip(errs, errs[1:])) >= 6, errs
    assert "reldiff(model.**.weight:data.l2) over steps 0..7: 3 nodes, 8 steps" in out, out
    row = re.search(r"^model\.fc1\.weight +\|(.{8})\|$", out, re.M)
    assert row, out
    ramp = " .:-=+*#%@"
    cells = [ramp.index(c) for c in row.group(1)]
    assert cells == sorted(cells) and cells[-1] > cells[0], row.group(1)


def test_llama_against_fused_reimplementation(rec):
    pytest.importorskip("transformers", reason="transformers is not installed (./setup installs it)")
    # without a map nothing but the root and lm_head share an address
    out = tmdb(*ex(f"compare {rec / 'llama.tmrun'}", "info compare"), rec / "fused.tmrun")
    assert "model.blocks.*.attn.qkv                  2 nodes, 8 events: no reference node" in out
    # aligned through the map: q/k/v against the fused qkv is named, both ways
    out = tmdb(*ex(f"compare {rec / 'llama.tmrun'} {maps()}", "info compare"),
               rec / "fused.tmrun")
    assert "Run events: 104, aligned 96, not aligned 8." in out, out
    assert "model.blocks.*.attn.qkv                  2 nodes, 8 events: no reference node" in out
    for p in ("q_proj", "k_proj", "v_proj"):
        assert f"model.model.layers.*.self_attn.{p}    2 nodes, 8 events" in out, out
    assert "model.model.rotary_emb" in out
    # the same numbers where they align
    assert re.search(r"^  mean +none \(max reldiff 0\.00e\+00\)$", out, re.M), out
    # a wrong eps in one norm: found there, at step 0, live breakpoint style
    out = tmdb(*ex(f"compare {rec / 'llama.tmrun'} {maps()}",
                   "break model.** if abs(tensor.mean - ref.tensor.mean) > 1e-3", "run",
                   "print ref.tensor.std", "info compare -tol 1e-6"),
               rec / "fused_bug.tmrun")
    assert "Breakpoint 1, model.blocks.1.mlp_norm (out) at step 0, fwd" in out, out
    assert re.search(r"^  std +\S+ at model\.blocks\.1\.mlp_norm:out step 0 ", out, re.M), out


@pytest.mark.slow
def test_live_and_replay_stop_at_the_same_event(rec, tmp_path):
    cmds = tmp_path / "cmp.cmds"
    cmds.write_text("break model.** if reldiff(tensor.mean, ref.tensor.mean) > 1e-4\n"
                    "run\nprint tensor.mean\nprint maxabsdiff() > 0\ninfo stats\n"
                    "continue\nprint ref.tensor.mean\n")
    trace = tmp_path / "run.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="3")
    ref = rec / "gelu_erf.tmrun"
    live = run_tmdb(["--reference", str(ref), "-x", str(cmds), "--args", sys.executable,
                     str(MODELS), "gelu_tanh"], env=env)
    assert trace.exists(), live.stdout + live.stderr
    replay = run_tmdb(["--reference", str(ref), "-x", str(cmds), str(trace)])
    a, b = comparable(live.stdout), comparable(replay.stdout)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    assert "Breakpoint 1, model.act1 (out) at step 0, fwd" in live.stdout, live.stdout
    assert "$2 = true" in live.stdout, live.stdout
    assert "Breakpoint 1, model.fc2 (out) at step 0, fwd" in live.stdout, live.stdout
