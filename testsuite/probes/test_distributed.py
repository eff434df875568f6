"""The probe under torch.distributed: a real DDP job (gloo, CPU) started by
torchrun and recorded with `tensormorph_probe record` gives one trace per
rank plus the run manifest, each trace says its rank, and the NaN planted on
one rank at one step is found there first.  Also: a single process still
writes one trace and no manifest, explicit listen sockets are per rank, and
the boot sitecustomize leaves the launcher alone.

Traces and manifests are read back through libtensormorph, never parsed here."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import MLP, read

import tensormorph_probe as tp
from tensormorph_probe import _lib
from tensormorph_probe.probe import rank_socket_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRAIN = ROOT / "examples" / "train_ddp.py"
BOOT = ROOT / "probes" / "pytorch" / "tensormorph_probe" / "_boot"
NODES = {"model", "model.embed", "model.proj", "model.fc", "model.act", "model.norm",
         "model.head"}

needs_gloo = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="torch.distributed with gloo is not available")


def _torchrun(nproc: int, module: bool = False) -> list[str]:
    """torchrun as a script (the console entry point next to this python)
    or as `python -m torch.distributed.run`: the two launcher forms."""
    script = Path(sys.executable).parent / "torchrun"
    if module or not script.exists():
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc-per-node={nproc}"]
    return [str(script), "--standalone", f"--nproc-per-node={nproc}"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"        # else torchrun warns about it
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TENSORMORPH_LISTEN",
                 "TENSORMORPH_WAIT", "TENSORMORPH_RECORD", "TENSORMORPH_PROBE_CONFIG"):
        env.pop(name, None)
    return env


def _record(out: Path, launcher: list[str], *args: str, timeout: float = 180) -> None:
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--level", "1",
           "--", *launcher, str(TRAIN), *args]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tensormorph-probe" not in r.stderr, r.stderr


def _meta(path: str) -> tuple[int, int]:
    """(rank, world_size) of a trace's run metadata, as the C reader has it."""
    with tp.Trace(path) as t:
        m = t._lib.tm_reader_meta(t._r).contents
        return m.rank, m.world_size


def _has_nan(e) -> bool:
    return any(t.stats.get("nan_count", 0) > 0 for t in e.tensors)


def _check_job(out: Path, world: int, nan_rank: int, nan_step: int, steps: int) -> None:
    manifest = out.parent / "run.manifest"
    assert manifest.is_file()
    assert not out.exists()             # the job's name, not a file of its own
    files = _lib.manifest_read(str(manifest))
    assert files == [str(out.parent / f"run.rank{r}.tmrun") for r in range(world)]
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        ["run.manifest"] + [f"run.rank{r}.tmrun" for r in range(world)])

    first = {}                          # rank -> (unix time, event) of its first NaN
    for r, path in enumerate(files):
        assert _meta(path) == (r, world)
        with tp.Trace(path) as t:
            start = t._lib.tm_reader_meta(t._r).contents.start_unix_ns
        nodes, events, gaps = read(path)
        assert not gaps
        assert NODES <= set(nodes), sorted(nodes)
        assert {e.step for e in events} == set(range(steps))
        assert all("nan_count" in t.stats for e in events if e.kind == "exit"
                   for t in e.tensors)
        bad = [e for e in events if _has_nan(e)]
        # nothing before step S anywhere; at step S only on rank R
        assert all(e.step >= nan_step for e in bad), (r, bad[:1])
        if r != nan_rank:
            assert all(e.step > nan_step for e in bad), (r, bad[:1])
        if bad:
            first[r] = (start + bad[0].time_ns, bad[0])
    # the bad sample is the model's input (level 1 records inputs), and the
    # first module output holding it is model.proj's
    e = first[nan_rank][1]
    assert (e.node, e.step, e.kind, e.call) == ("model", nan_step, "enter", 1)
    _, events, _ = read(files[nan_rank])
    e = next(x for x in events if x.kind == "exit" and _has_nan(x))
    assert (e.node, e.step, e.kind, e.call) == ("model.proj", nan_step, "exit", 1)
    # model.embed ran on the same batch just before and is clean
    embed = [x for x in events if x.node == "model.embed" and x.kind == "exit"
             and x.step == nan_step]
    assert embed and not _has_nan(embed[0]) and embed[0].seq < e.seq
    if nan_step + 1 < steps:
        # DDP averaged the gradients: from the next step every rank is NaN,
        # and on the job's one time axis rank R's NaN comes first
        assert set(first) == set(range(world))
        assert all(first[r][1].step == nan_step + 1 for r in first if r != nan_rank)
        assert min(first, key=lambda r: first[r][0]) == nan_rank


@needs_gloo
def test_ddp_two_ranks_recorded_per_rank(tmp_path):
    out = tmp_path / "rec" / "run.tmrun"
    out.parent.mkdir()
    t0 = time.monotonic()
    _record(out, _torchrun(2), "--steps", "6", "--nan-rank", "1", "--nan-step", "3")
    print(f"2 ranks: {time.monotonic() - t0:.1f} s")
    _check_job(out, 2, 1, 3, 6)


@needs_gloo
@pytest.mark.slow
def test_ddp_four_ranks_module_launcher(tmp_path):
    """python -m torch.distributed.run is a launcher too; rank 0 may be the
    bad one; a relative record path lands relative to the working dir."""
    out = tmp_path / "run.tmrun"
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", "run.tmrun", "--",
           *_torchrun(4, module=True), str(TRAIN), "--steps", "5", "--nan-rank", "2",
           "--nan-step", "2"]
    r = subprocess.run(cmd, env=_env(), cwd=tmp_path, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    print(f"4 ranks: {time.monotonic() - t0:.1f} s")
    _check_job(out, 4, 2, 2, 5)


# slow: which files a one-rank job writes is the probe's Python; the
# sanitizer run (TM_QUICK) has the C paths from the two-rank job
@needs_gloo
@pytest.mark.slow
def test_ddp_without_injection_is_clean(tmp_path):
    """The default arguments plant nothing; one process of torchrun
    (WORLD_SIZE=1) is not distributed: one trace under the name given and
    no manifest."""
    out = tmp_path / "run.tmrun"
    _record(out, _torchrun(1), "--steps", "3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.tmrun"]
    assert _meta(str(out)) == (0, 1)
    nodes, events, _ = read(str(out))
    assert NODES <= set(nodes)
    assert {e.step for e in events} == {0, 1, 2}
    assert events and not any(_has_nan(e) for e in events)


# slow: as above, the probe's Python choosing the files
@pytest.mark.slow
def test_single_process_writes_no_manifest(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            m(torch.randn(2, 4)).sum().backward()
            opt.step()
    """))
    out = tmp_path / "run.tmrun"
    cmd = [sys.executable, "-m", "tensormorph_probe", "record", "-o", str(out), "--",
           "python", str(script)]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.tmrun", "train.py"]
    assert _meta(str(out)) == (-1, 0)
    nodes, events, _ = read(str(out))
    assert {"model", "model.0", "model.1"} <= set(nodes) and events


@pytest.mark.parametrize("rank", [0, 1])
def test_api_rank_from_environment(tmp_path, monkeypatch, rank):
    """attach() in a process torchrun started (RANK, WORLD_SIZE set): rank
    R writes its own trace; only rank 0 writes the manifest."""
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    model = MLP()
    with tp.attach(model, record="out.tmrun") as probe:
        model(torch.randn(2, 8))
        assert (probe.rank, probe.world_size) == (rank, 2)
        assert probe.path == f"out.rank{rank}.tmrun"
        assert probe.manifest == ("out.manifest" if rank == 0 else None)
    assert _meta(str(tmp_path / probe.path)) == (rank, 2)
    if rank == 0:
        assert _lib.manifest_read(str(tmp_path / "out.manifest")) == [
            str(tmp_path / "out.rank0.tmrun"), str(tmp_path / "out.rank1.tmrun")]
        with open("out.manifest") as f:
            assert "rank 1 out.rank1.tmrun" in f.read()
    else:
        assert not (tmp_path / "out.manifest").exists()


def test_api_not_distributed(trace_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    model = MLP()
    with tp.attach(model, record=trace_path) as probe:
        model(torch.randn(2, 8))
        assert (probe.rank, probe.world_size, probe.path, probe.manifest) == (
            -1, 0, trace_path, None)


@needs_gloo
def test_api_ddp_wrapper_is_looked_through(trace_path, monkeypatch, tmp_path):
    """attach(DDP(net)) and an unmodified script calling DDP(net) both see
    the wrapped net as `model` (one process group of one rank, no launcher)."""
    dist = torch.distributed
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0,
                            world_size=1)
    try:
        for model_arg in (True, False):
            torch.manual_seed(0)
            ddp = torch.nn.parallel.DistributedDataParallel(MLP())
            with tp.attach(ddp if model_arg else None, record=trace_path) as probe:
                assert (probe.rank, probe.world_size) == (0, 1)
                ddp(torch.randn(2, 8)).sum().backward()
                ddp(torch.randn(2, 8))
                assert probe.model is ddp.module
            nodes, events, _ = read(trace_path)
            assert set(nodes) == {"model", "model.fc1", "model.act", "model.fc2", "model.fc3"}
            assert [e.step for e in events if e.node == "model" and e.kind == "exit"] == [0, 1]
    finally:
        dist.destroy_process_group()


def test_rank_socket_names():
    """The names tmdb looks for (libtensormorph's tm_server_rank_path)."""
    assert rank_socket_path("/tmp/x/dbg.sock", 0) == "/tmp/x/dbg.rank0.sock"
    assert rank_socket_path("/tmp/x/dbg.sock", 13) == "/tmp/x/dbg.rank13.sock"
    assert rank_socket_path("/tmp/x/dbg", 1) == "/tmp/x/dbg.rank1"
    assert rank_socket_path("rel.s", 2) == "rel.s.rank2"


# slow: the launcher passing the variable on, in Python; the sanitizer
# run has the C socket names from test_rank_socket_names and the C
# server from the live tests
@needs_gloo
@pytest.mark.slow
def test_listen_path_per_rank_under_torchrun(tmp_path):
    """TENSORMORPH_LISTEN=PATH reaches the workers through the launcher
    (which does not attach) and each rank listens on its own socket."""
    sockdir = tmp_path / "s"
    sockdir.mkdir(mode=0o700)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT), env.get("PYTHONPATH", "")])
    env["TENSORMORPH_LISTEN"] = str(sockdir / "dbg.sock")
    env["TENSORMORPH_WAIT"] = "3"      # each rank waits this long for a debugger
    proc = subprocess.Popen([*_torchrun(2), str(TRAIN), "--steps", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline and len(seen) < 2:
            for p in sockdir.iterdir():
                if stat.S_ISSOCK(p.lstat().st_mode):
                    seen.add(p.name)
            time.sleep(0.05)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert seen == {"dbg.rank0.sock", "dbg.rank1.sock"}, out
    assert proc.returncode == 0, out
    assert out.count("no debugger attached within 3 s") == 2, out


def _load_boot(monkeypatch):
    for name in ("TENSORMORPH_PROBE_CONFIG", "TENSORMORPH_LISTEN"):
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("_tm_boot_test", BOOT / "sitecustomize.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", [str(BOOT)])     # no user sitecustomize to chain to
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("argv, launcher", [
    (["py", "/venv/bin/torchrun", "--standalone", "train.py"], True),
    (["py", "-m", "torch.distributed.run", "train.py"], True),
    (["py", "-u", "-mtorch.distributed.launch", "train.py"], True),
    (["py", "-X", "dev", "-um", "torch.distributed.run"], True),
    (["py", "-u", "train.py", "torchrun"], False),
    (["py", "-c", "import torchrun"], False),
    (["py", "-Wignore", "-m", "pytest"], False),
    (["py", "/x/train_ddp.py"], False),
])
def test_boot_recognises_launchers(monkeypatch, argv, launcher):
    assert _load_boot(monkeypatch)._is_launcher(argv) is launcher


def test_boot_leaves_launcher_and_its_variables(monkeypatch, tmp_path):
    """In the launcher the boot attaches nothing and keeps the variables
    for the workers; in a worker it attaches and removes them."""
    mod = _load_boot(monkeypatch)
    cfg = ('{"record": "%s", "level": 1, "nodes": ["model.**"], "levels": {}, '
           '"lossless": false}' % (tmp_path / "w.tmrun"))
    monkeypatch.setenv("TENSORMORPH_PROBE_CONFIG", cfg)
    monkeypatch.setattr(sys, "orig_argv", ["py", "/venv/bin/torchrun", "train.py"])
    mod._attach()
    assert os.environ.get("TENSORMORPH_PROBE_CONFIG") == cfg
    assert tp.active() is None or tp.active().path != str(tmp_path / "w.tmrun")
    monkeypatch.setattr(sys, "orig_argv", ["py", "-u", "train.py"])
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    mod._attach()
    try:
        assert "TENSORMORPH_PROBE_CONFIG" not in os.environ
        assert tp.active() is not None and tp.active().path == str(tmp_path / "w.tmrun")
    finally:
        tp.active().close()
