"""Op events (issue 18): the tensor operations inside a module's forward and
outside every module call (`main`), and the op that made the first NaN or
Inf -- on real models (ops_models.py), read back through libtensormorph and
through tmdb sessions, live and replayed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import comparable, needs_tmdb, run_tmdb

torch = pytest.importorskip("torch")
import ops_models  # noqa: E402
import tensormorph_probe as tp  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = HERE / "ops_models.py"


def line_of(text: str) -> int:
    """The line of ops_models.py that holds text (once)."""
    lines = [i for i, ln in enumerate(MODELS.read_text().splitlines(), 1) if text in ln]
    assert len(lines) == 1, text
    return lines[0]


def record(tmp_path, name, ops, **kw):
    path = tmp_path / f"{name}.tmrun"
    p = tp.attach(None, record=str(path), ops=ops, **kw)
    ops_models.RUNS[name]()
    p.close()
    return path


def first_nonfinite(path):
    for e in tp.Trace(path).events():
        if any(t.stats.get("nan_count", 0) or t.stats.get("inf_count", 0) for t in e.tensors):
            return e
    return None


def test_attention_temperature_zero_division_made_the_inf(tmp_path):
    path = record(tmp_path, "attn", "model.attn")
    e = first_nonfinite(path)
    assert e is not None and e.kind == "op" and e.step == 2
    assert e.op == "aten::div.Tensor" and e.module == "model.attn"
    assert e.file == str(MODELS) and e.line == line_of("scores = scores / self.temperature")
    assert e.inputs_finite is True
    evs = tp.Trace(path).events()
    ops = [x for x in evs if x.kind == "op" and x.step == 2 and x.phase == "fwd"]
    # numbered from 1 within the call, in order; only model.attn's own ops
    assert [x.op_index for x in ops] == list(range(1, len(ops) + 1))
    assert {x.module for x in ops} == {"model.attn"}
    soft = next(x for x in ops if x.op == "aten::_softmax")
    assert soft.inputs_finite is False          # passed on, not made
    # the module's exit comes after its ops: the NaN breakpoint of old
    # stopped there, several ops late
    ex = next(x for x in evs if x.kind == "exit" and x.node == "model.attn" and x.step == 2)
    assert ex.seq > e.seq


def test_loss_log_zero_outside_every_module(tmp_path):
    path = record(tmp_path, "loss", "main")
    e = first_nonfinite(path)
    assert e is not None and e.kind == "op" and e.step == 2
    assert e.module == "main" and e.op == "aten::log"
    assert e.line == line_of("return -torch.log(p.gather")
    assert e.inputs_finite is True
    # no module op recorded: the pattern names main only
    assert {x.module for x in tp.Trace(path).events() if x.kind == "op"} == {"main"}


def test_fp16_matmul_overflow(tmp_path):
    path = record(tmp_path, "fp16", "model")
    e = first_nonfinite(path)
    assert e is not None and e.kind == "op" and e.step == 1
    assert e.op == "aten::mm" and e.line == line_of("h = x @ self.up.weight.t()")
    assert e.inputs_finite is True and e.tensors[0].stats["inf_count"] > 0


def test_no_pattern_installs_nothing(tmp_path):
    before = torch._C._len_torch_dispatch_stack()
    m = ops_models.AttnNet()
    p = tp.attach(m, record=str(tmp_path / "off.tmrun"))
    assert p._ops is None and p.ops == ""
    assert torch._C._len_torch_dispatch_stack() == before
    assert "_enter" not in p.__dict__ and "_exit" not in p.__dict__
    assert not any(n.ops for n in p._nodes.values())
    m(torch.randn(2, 5, 16))
    p.set_ops("model.attn")
    assert torch._C._len_torch_dispatch_stack() == before + 1
    m(torch.randn(2, 5, 16))
    p.set_ops(None)
    assert torch._C._len_torch_dispatch_stack() == before
    assert "_enter" not in p.__dict__ and not any(n.ops for n in p._nodes.values())
    m(torch.randn(2, 5, 16))
    p.close()
    steps = {e.step for e in tp.Trace(tmp_path / "off.tmrun").events() if e.kind == "op"}
    assert steps == {1}


def test_bad_op_pattern_is_refused(tmp_path):
    with pytest.raises(ValueError, match="bad op pattern"):
        tp.Probe(ops_models.AttnNet(), record=str(tmp_path / "x.tmrun"), ops="model..attn")


def test_op_backward_at_level2(tmp_path):
    path = record(tmp_path, "attn", "model.attn", level=2)
    bwd = [e for e in tp.Trace(path).events() if e.kind == "op" and e.phase == "bwd"]
    assert bwd and all(e.tensors[0].slot.startswith("grad_out") for e in bwd)
    assert "aten::div.Tensor" in {e.op for e in bwd}


def test_cli_ops_and_env(tmp_path):
    out = tmp_path / "cli.tmrun"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--ops",
           "main", "--", "python", str(MODELS), "loss"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    t = tp.Trace(out)
    assert t.meta.get("ops") == "main"
    assert first_nonfinite(out).op == "aten::log"


TRANSCRIPT = [
    ("find first tensor.nan_count + tensor.inf_count > 0",
     ["Found at seq", "main!7 aten::log (out) at step 2, fwd",
      "    return -torch.log(p.gather(1, target[:, None])).mean()"]),
    ("info op", ["It made the non-finite values: its inputs were finite, its output is not."]),
    ("print $_op", ['= "aten::log"']),
    ("x/3i", ["   main!6   aten::gather",
              "=> main!7   aten::log              ops_models.py:75\t0 nan, 4 inf (made here)",
              "   main!8   aten::mean             ops_models.py:75\t0 nan, 1 inf (passed on)"]),
    ("stepi", ["main!8 aten::mean (out) at step 2, fwd"]),
    ("info op", ["It passed non-finite values on: an input was not finite."]),
    ("find first op.made_nonfinite and op.name == \"aten::log\"", ["main!7 aten::log"]),
]


@needs_tmdb
def test_tmdb_finds_the_producing_op(tmp_path):
    path = record(tmp_path, "loss", "main")
    args = []
    for cmd, _ in TRANSCRIPT:
        args += ["-ex", cmd]
    out = run_tmdb([*args, str(path)]).stdout
    pos = 0
    for cmd, wants in TRANSCRIPT:
        for w in wants:
            at = out.find(w, pos)
            assert at >= 0, f"{cmd}: {w!r} not after {pos} in:\n{out}"
            pos = at


@needs_tmdb
def test_live_equals_replay_with_ops(tmp_path):
    cmds = HERE / "live" / "ops.cmds"
    trace = tmp_path / "attn.tmrun"
    env = dict(os.environ, TENSORMORPH_RECORD=str(trace), TENSORMORPH_LEVEL="1",
               TENSORMORPH_OPS="model.attn")
    live = run_tmdb(["-x", str(cmds), "--args", sys.executable, str(MODELS), "attn"], env=env)
    assert trace.exists(), live.stdout + live.stderr
    replay = run_tmdb(["-x", str(cmds), str(trace)])
    a, b = comparable(live.stdout, end_varies=True), comparable(replay.stdout, end_varies=True)
    assert a == b, "live and replayed sessions differ:\n" + "\n".join(
        f"live:   {x}\nreplay: {y}" for x, y in zip(a, b, strict=False) if x != y)
    for want in ["Breakpoint 1, model.attn!8 aten::div.Tensor (out) at step 2, fwd",
                 "scores = scores / self.temperature", "It made the non-finite values",
                 '"aten::div.Tensor"', "=> model.attn!8", "aten::_softmax (out) at step 2"]:
        assert want in live.stdout, f"{want!r} not in:\n{live.stdout}"


@needs_tmdb
def test_set_probe_ops_live(tmp_path):
    env = dict(os.environ)
    env.pop("TENSORMORPH_OPS", None)
    out = run_tmdb(["-x", str(HERE / "live" / "ops-set.cmds"), "--args", sys.executable,
                    str(MODELS), "attn"], env=env).stdout
    for want in ["Breakpoint 1, model.head (out) at step 0, fwd",
                 "Op events in model.attn, from the model's next call.",
                 "Breakpoint 2, model.attn!8 aten::div.Tensor (out) at step 2, fwd",
                 "It made the non-finite values",
                 "=> model.attn!8   aten::div.Tensor       ops_models.py:"]:
        assert want in out, f"{want!r} not in:\n{out}"


def test_torch_compile_says_what_it_records(tmp_path):
    if not hasattr(torch, "compile"):
        pytest.skip("no torch.compile")
    # a module compiled in place (Module.compile): said at attach, as no op
    # event can come from its compiled regions (running it under the probe
    # is issue 17's)
    m = ops_models.AttnNet()
    m.attn.compile(backend="eager")
    with pytest.warns(UserWarning, match=r"model\.attn is compiled \(torch\.compile\)"):
        p = tp.attach(m, record=str(tmp_path / "c.tmrun"), ops="model.attn")
    p.close()
