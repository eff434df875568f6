"""The stats and log2 histogram a probe records at level 2, against the
definitions (doc/tmrun.md 4.3, tm-stats.h) computed here with numpy, on
tensors of every float dtype with NaN, +-Inf, subnormals, zeros and -0.0,
empty ones, all-NaN ones and ones of subnormals only: through
libtensormorph's single-pass kernels (c-stats) and through the torch
implementation used for device tensors and by the compiled path
(device-stats, run here on CPU tensors)."""

from __future__ import annotations

import ctypes
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import read
from torch import nn

import tensormorph_probe as tp
from tensormorph_probe import _lib


def ref_stats(x: torch.Tensor) -> dict:
    """Every stat and the log2 histogram of x, by their definitions."""
    v = x.detach().reshape(-1).to(torch.float64).numpy()
    fin = v[np.isfinite(v)]
    out = {"numel": v.size, "nan_count": int(np.isnan(v).sum()),
           "posinf_count": int((v == np.inf).sum()), "neginf_count": int((v == -np.inf).sum()),
           "zero_count": int((v == 0).sum())}
    out["inf_count"] = out["posinf_count"] + out["neginf_count"]
    if fin.size == 0:
        return out
    amax = float(np.abs(fin).max())
    sc = fin / amax if amax else fin            # (f64 near its max overflows unscaled)
    k = amax if amax else 1.0
    out.update(min=float(fin.min()), max=float(fin.max()), mean=float(sc.mean()) * k,
               abs_max=amax, l2=float(np.sqrt(np.sum(sc * sc))) * k, std=float(sc.std()) * k)
    top = int(np.frexp(amax)[1])                    # amax < 2^top
    hist = [0] * 32
    for val in fin:
        j = 0
        if val != 0:
            j = min(max(int(np.frexp(val)[1]) - 1 - top + 16, 0), 15)
        hist[15 - j if np.signbit(val) else 16 + j] += 1
    out["hist"] = (float(top - 15), float(top), tuple(hist))
    return out


def tensors(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    fi = torch.finfo(dtype)
    sub = fi.smallest_normal / 4                    # a subnormal of this dtype
    x = (torch.randn(1003, generator=g, dtype=torch.float64) *
         torch.exp2(torch.randint(-20, 8, (1003,), generator=g).double())).to(dtype)
    x[3] = float("nan")
    x[10] = float("inf")
    x[11] = float("-inf")
    x[20:24] = torch.tensor([sub, -sub, 0.0, -0.0], dtype=torch.float64).to(dtype)
    x[30] = fi.max
    x[31] = -fi.tiny
    small = torch.full((40,), sub, dtype=torch.float64)
    small[::3] = -sub * 2
    small[5] = 0
    return {"mixed": x, "huge": x[25:40].clone(), "subnormal": small.to(dtype),
            "zeros": torch.zeros(17, dtype=dtype), "empty": torch.zeros(0, dtype=dtype),
            "all_nan": torch.full((9,), float("nan"), dtype=dtype),
            "matrix": torch.randn(64, 48, generator=g).to(dtype)}


class Pass(nn.Module):
    """Returns a copy of what it is given: its output is read afresh."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


class Net(nn.Module):
    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.names = names
        self.parts = nn.ModuleDict({n: Pass() for n in names})

    def forward(self, xs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return [self.parts[n](xs[n]) for n in self.names]


DTYPES = pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
    ids=["f32", "f64", "f16", "bf16"])


@DTYPES
@pytest.mark.parametrize("device_path", [False, True], ids=["c-stats", "device-stats"])
def test_recorded_stats_match_definitions(trace_path, dtype, device_path):
    check_recorded(trace_path, dtype, device_path)


@DTYPES
@pytest.mark.parametrize("isa", ["avx2", "sse2"])
def test_lower_isa_kernels_match_definitions(trace_path, dtype, isa):
    """The C kernels of each lower instruction set this CPU runs too: a
    user's CPU may have no AVX-512."""
    lib = _lib.load()
    lib.tm_stats_isa.restype = ctypes.c_char_p
    lib.tm_stats_use_isa.argtypes = [ctypes.c_char_p]
    was = lib.tm_stats_isa()
    if isa.encode() == was or lib.tm_stats_use_isa(isa.encode()) != 0:
        pytest.skip(f"{isa}: not a lower instruction set this CPU runs")
    try:
        assert lib.tm_stats_isa() == isa.encode()   # the library the probe calls
        check_recorded(trace_path, dtype, False)
    finally:
        lib.tm_stats_use_isa(was)


def check_recorded(trace_path, dtype, device_path):
    """dtype's test tensors recorded at level 2 give their definitions."""
    xs = tensors(dtype)
    names = list(xs)
    model = Net(names)
    with tp.attach(model, level=2, record=trace_path, device_stats_on_cpu=device_path):
        model(xs)
    _, events, _ = read(trace_path)
    checked = set()
    for e in events:
        part = e.node.rsplit(".", 1)[-1]
        if e.kind != "exit" or part not in xs:
            continue
        got, want = e.tensors[0], ref_stats(xs[part])
        where = (part, str(dtype))
        for k in ("numel", "nan_count", "inf_count", "posinf_count", "neginf_count",
                  "zero_count"):
            assert got.stats[k] == want[k], (where, k)
        if "hist" not in want:          # no finite element: counts only
            assert "min" not in got.stats and got.hist is None, where
            checked.add(part)
            continue
        for k in ("min", "max", "abs_max"):
            assert got.stats[k] == want[k], (where, k)
        for k in ("mean", "l2", "std"):
            assert math.isclose(got.stats[k], want[k], rel_tol=1e-9, abs_tol=1e-300), \
                (where, k, got.stats[k], want[k])
        assert got.hist_kind == _lib.HIST_LOG2, where
        lo, hi, bins = got.hist
        assert (lo, hi, tuple(bins)) == want["hist"], where
        assert sum(bins) == want["numel"] - want["nan_count"] - want["inf_count"]
        checked.add(part)
    assert checked == set(names)


def test_c_and_device_paths_agree_on_real_activations(tmp_path):
    """A small convnet's level-2 trace is the same, histogram for histogram,
    through both implementations (and both say the histogram is log2)."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.Flatten(),
                          nn.Linear(8 * 4 * 4, 10))
    x = torch.randn(2, 3, 8, 8)
    hists = []
    for device_path in (False, True):
        model.zero_grad(set_to_none=True)
        path = str(tmp_path / f"r{int(device_path)}.tmrun")
        with tp.attach(model, level=2, record=path, device_stats_on_cpu=device_path):
            model(x).sum().backward()
        _, events, _ = read(path)
        hists.append([(e.node, e.kind, t.slot, t.hist_kind, t.hist)
                      for e in events for t in e.tensors if t.hist is not None])
    assert hists[0] == hists[1]
    assert len(hists[0]) > 10 and all(h[3] == _lib.HIST_LOG2 for h in hists[0])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device: run gpu-check itself")
def test_gpu_check_without_cuda_says_so():
    """testsuite/perf/gpu-check on a machine without CUDA: a clear message,
    exit 77, no traceback, nothing claimed."""
    script = Path(__file__).resolve().parents[1] / "perf" / "gpu-check"
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ))
    assert r.returncode == 77, r.stdout + r.stderr
    assert "no CUDA device" in r.stdout and "not measured on a GPU" in r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("body,fails", [
    ("def run(argv=None):\n    assert argv == ['--device', 'cpu']\n    return 0\n", False),
    ("def run(argv=None):\n    return 1\n", True),
    ("def run(argv=None):\n    raise RuntimeError('boom')\n", True),
])
def test_gpu_check_reports_the_compiled_checks(tmp_path, body, fails, capsys):
    """gpu-check runs gpu_compiled.py's run() on its own device, and a
    failed check there (run() returns 1, or raises) fails gpu-check."""
    import importlib.machinery
    import importlib.util
    script = Path(__file__).resolve().parents[1] / "perf" / "gpu-check"
    loader = importlib.machinery.SourceFileLoader("gpu_check_under_test", str(script))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    gc = importlib.util.module_from_spec(spec)
    loader.exec_module(gc)
    extra = tmp_path / "gpu_compiled.py"
    extra.write_text(body)
    gc.run_extra(extra, "cpu")
    assert bool(gc.FAILED) == fails, capsys.readouterr().out
    gc.run_extra(tmp_path / "absent.py", "cpu")     # no file: nothing to run, nothing failed
    assert len(gc.FAILED) == int(fails)


def _probe_overhead():
    """testsuite/perf/probe-overhead, loaded as a module."""
    import importlib.machinery
    import importlib.util
    script = Path(__file__).resolve().parents[1] / "perf" / "probe-overhead"
    loader = importlib.machinery.SourceFileLoader("probe_overhead_under_test", str(script))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    po = importlib.util.module_from_spec(spec)
    loader.exec_module(po)
    return po


def test_kernel_floor_counts_each_tensor_once(tmp_path):
    """probe-overhead's kernel floor times each tensor a step summarised
    once: in a chain of three Linear layers a layer's output is the next
    one's input, so level 1 reduces four tensors (the input and three
    outputs), not the eight slots they fill; level 2 adds the gradients and
    the parameters, and costs more.  The tensors (64 x 256 floats) are large
    enough that the kernel's time stands well above the noise of timing
    an empty call through ctypes, which the floor takes off each tensor's
    (on 8 x 64 floats the two were close, and a level's floor could come
    out as nothing)."""
    po = _probe_overhead()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.Linear(256, 256), nn.Linear(256, 256))
    x = torch.randn(64, 256)

    def step():
        model.zero_grad()
        model(x).sum().backward()
    ms1, n1 = po.kernel_floor(model, step, 1, str(tmp_path))
    ms2, n2 = po.kernel_floor(model, step, 2, str(tmp_path))
    assert n1 == 4
    assert n2 > n1 and ms2 > ms1 > 0


def test_goal_verdicts():
    """probe-overhead's summary against the goals: met only when the whole
    interval is under the goal, the two cases where the point estimate and
    the interval disagree named, a kernel floor over the goal said, and the
    compile time held to its own goal."""
    po = _probe_overhead()
    rows = [dict(config="hook", tool="probe", level=0, ratio=1.010, ci_lo=0.990, ci_hi=1.019),
            dict(config="hook", tool="probe", level=1, ratio=1.049, ci_lo=1.03, ci_hi=1.07),
            dict(config="deep", tool="probe", level=1, ratio=1.056, ci_lo=1.035, ci_hi=1.076),
            dict(config="conv", tool="probe", level=2, ratio=1.30, ci_lo=1.25, ci_hi=1.35),
            dict(config="compute", tool="probe", level=2, ratio=1.04, ci_lo=1.03, ci_hi=1.05),
            dict(config="compute", tool="kernel-floor", level=2, ratio=1.062),
            dict(config="hook", tool="probe", level=3, ratio=3.5, ci_lo=3.4, ci_hi=3.6),
            dict(config="compiled-gpt2", tool="probe", level=1, ratio=1.08, ci_lo=1.06,
                 ci_hi=1.10, compile_ratio=1.12, warm_compile_ratio=2.5)]
    lines = po.against_goals(rows)
    assert [r.get("verdict") for r in rows] == [
        "met",
        "met at the point estimate, not beyond the noise (interval up to 1.070x)",
        "not met at the point estimate, within the noise (interval from 1.035x)",
        "not met",
        "met; the stats kernel alone costs 1.062x, over the goal: a ratio under that is "
        "this run's noise",
        None, None, "not met"]
    assert rows[-1]["compile_verdict"] == "met"
    one = [dict(config="hook", tool="probe", level=1, ratio=1.04, ci_lo=1.04, ci_hi=1.04,
                rounds=1)]
    assert po.against_goals(one) == [
        "  hook           L1  1.040x  goal 1.05x: met (one round: no interval)"]
    assert len(lines) == 7 and "goal 1.15x: not met" in lines[3]
    assert "compile 1.12x (cold caches), goal 1.2x: met; warm 2.50x" in lines[-1]
