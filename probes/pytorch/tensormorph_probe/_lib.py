"""Loading libtensormorph and the ctypes mirrors of its structs.

The probe is glue: the event encoding, the ring with gap accounting, the
.tmrun writer and reader, stats over host memory and address patterns all
live in libtensormorph (C).  This module finds the shared library, declares
the functions the probe calls, and mirrors the few structs that cross the
boundary (tm-recorder.h batch structs, tm-types.h records for reading).
Every mirror -- struct sizes, field offsets and sizes, constants, the
batch views, and the C fast path's structs -- is checked against the
library's own table (tm_layout) when it is loaded: a difference is refused
with a message that names it (check_layout, check_hook_layout).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import os
import struct
import sys
import sysconfig
from pathlib import Path
from typing import Any

TM_MAX_RANK = 8
TM_STAT_COUNT = 12
TM_HIST_BINS = 32
HIST_LINEAR, HIST_LOG2 = 1, 2     # tm_tensor.have_hist (tm-types.h)
TM_MAX_TENSORS = 64
TM_META_MAX_PAIRS = 64
TM_MAX_FRAMES = 64
TM_NODE_NONE = 0xFFFFFFFF

TM_ANNOT_MAX_VALUES = 1024
TM_ANNOT_MAX_VALUE = 256

TM_OK = 0
TM_ERR_TOO_LARGE = 9
TM_ERR_END = 13
TM_ERR_AGAIN = 18

# enum tm_event_kind, tm_phase, tm_slot_kind, tm_node_kind, tm_record_type
EV_ENTER, EV_EXIT, EV_BWD, EV_PARAM, EV_RAISE, EV_OP = 0, 1, 2, 3, 4, 5
PHASE_FWD, PHASE_BWD = 0, 1
SLOT_OUT, SLOT_IN, SLOT_GRAD_OUT, SLOT_GRAD_IN, SLOT_DATA, SLOT_GRAD = range(6)
# one request's rows of a batched tensor (tm-types.h, tm_slot_row_of):
# index = SLOT_ROWS | request << 8 | the batch tensor's index
SLOT_ROWS, SLOT_ROW_MAX, SLOT_ROW_INDEX_MAX = 0x8000, 128, 256
NODE_MODULE, NODE_PARAM, NODE_BUFFER, NODE_OP = 0, 1, 2, 3
OPF_INPUTS_CHECKED, OPF_INPUTS_FINITE = 1, 2
CAP_OPS = 1 << 4                    # enum tm_wire_caps: SET_OPS honoured
REC_META, REC_NODE, REC_EVENT, REC_GAP, REC_CRASH, REC_ANNOT = 1, 2, 3, 4, 5, 6
GAP_BACKPRESSURE, GAP_LEVEL, GAP_FILTERED, GAP_CRASH, GAP_TRUNCATED = 1, 2, 4, 8, 16

STAT_NAMES = (
    "numel", "nan_count", "inf_count", "posinf_count", "neginf_count",
    "min", "max", "mean", "abs_max", "l2", "std", "zero_count",
)
SLOT_NAMES = ("out", "in", "grad_out", "grad_in", "data", "grad")
KIND_NAMES = ("enter", "exit", "bwd", "param", "raise", "op")


class LibraryNotFound(ImportError):
    """libtensormorph could not be loaded; the message lists every place tried."""


# ------------------------------------------------------------ batch structs

class RecTensor(ctypes.Structure):
    """struct tm_rec_tensor (tm-recorder.h)."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("numel", ctypes.c_uint64),
        ("have", ctypes.c_uint32),
        ("slot_index", ctypes.c_uint16),
        ("device_index", ctypes.c_uint16),
        ("slot_kind", ctypes.c_uint8),
        ("dtype", ctypes.c_uint8),
        ("rank", ctypes.c_uint8),
        ("device_type", ctypes.c_uint8),
        ("level", ctypes.c_uint8),
        ("capture", ctypes.c_uint8),
        ("have_hist", ctypes.c_uint8),
        ("done", ctypes.c_uint8),
        ("shape", ctypes.c_int64 * TM_MAX_RANK),
        ("stat", ctypes.c_double * TM_STAT_COUNT),
        ("hist_lo", ctypes.c_double),
        ("hist_hi", ctypes.c_double),
        ("hist", ctypes.c_uint32 * TM_HIST_BINS),
    ]


class RecEvent(ctypes.Structure):
    """struct tm_rec_event (tm-recorder.h)."""

    _fields_ = [
        ("step", ctypes.c_uint64),
        ("time_ns", ctypes.c_uint64),
        ("start_ns", ctypes.c_uint64),
        ("end_ns", ctypes.c_uint64),
        ("node", ctypes.c_uint32),
        ("call", ctypes.c_uint32),
        ("ntensors", ctypes.c_uint16),
        ("op_index", ctypes.c_uint16),
        ("kind", ctypes.c_uint8),
        ("phase", ctypes.c_uint8),
        ("level", ctypes.c_uint8),
        ("op_flags", ctypes.c_uint8),
    ]


# struct.Struct views of the same layouts, for filling a batch buffer in
# place with pack_into (much cheaper than ctypes attribute stores).  They
# and the offsets are checked with everything else at load (check_layout).
# ntensors and op_index are packed as one u32 (ntensors | op_index << 16),
# op_flags in the last byte: every event but an op's packs n and 0 there.
EVENT_STRUCT = struct.Struct("<QQQQIIIBBBB")
TENSOR_SIZE = ctypes.sizeof(RecTensor)
# data, numel, have, slot_index, device_index, slot_kind, dtype, rank,
# device_type, level, capture, have_hist, done, shape[rank]: one short
# pack_into per tensor; the stats after it are absent while `have` is 0.
TENSOR_PACK = [struct.Struct(f"<QQIHHBBBBBBBB{r}q") for r in range(TM_MAX_RANK + 1)]
OFF_HAVE = RecTensor.have.offset
OFF_SLOT = RecTensor.slot_index.offset
OFF_SLOT_KIND = RecTensor.slot_kind.offset
OFF_CAPTURE = RecTensor.capture.offset
OFF_HAVE_HIST = RecTensor.have_hist.offset
TENSOR_STATS_OFF = RecTensor.stat.offset
TENSOR_STATS = struct.Struct(f"<{TM_STAT_COUNT}ddd{TM_HIST_BINS}I")


class RecorderOpts(ctypes.Structure):
    _fields_ = [
        ("ring_events", ctypes.c_uint32),
        ("ring_tensors", ctypes.c_uint32),
        ("ring_payload_bytes", ctypes.c_uint64),
        ("lossless", ctypes.c_int),
        ("manual_drain", ctypes.c_int),
        ("drain_interval_ns", ctypes.c_uint64),
    ]


class FlightOpts(ctypes.Structure):
    """struct tm_flight_opts (tm-recorder.h)."""

    _fields_ = [
        ("steps", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("budget_bytes", ctypes.c_uint64),
        ("path", ctypes.c_char_p),
        ("rendezvous", ctypes.c_char_p),
    ]


class FlightInfo(ctypes.Structure):
    """struct tm_flight_info (tm-recorder.h)."""

    _fields_ = [
        ("steps", ctypes.c_uint32),
        ("steps_held", ctypes.c_uint32),
        ("dumps", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("first_step", ctypes.c_uint64),
        ("steps_dropped", ctypes.c_uint64),
        ("steps_over", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("budget", ctypes.c_uint64),
        ("not_kept", ctypes.c_uint64),
        ("reason", ctypes.c_char * 200),
    ]


class RecBatch(ctypes.Structure):
    """struct tm_rec_batch (tm-recorder.h): the producer's pending batch, for
    the fatal-signal handler."""

    _fields_ = [
        ("events", ctypes.c_uint64),
        ("tensors", ctypes.c_uint64),
        ("nev", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class ServerOpts(ctypes.Structure):
    """struct tm_server_opts (tm-server.h)."""

    _fields_ = [
        ("path", ctypes.c_char_p),
        ("probe_kind", ctypes.c_char_p),
        ("trace", ctypes.c_char_p),
        ("max_level", ctypes.c_uint8),
        ("caps", ctypes.c_uint32),
        ("max_queue", ctypes.c_size_t),
        ("max_frame", ctypes.c_uint32),
        ("no_pause", ctypes.c_uint8),
        ("pause_ms", ctypes.c_uint32),
        ("hello_ms", ctypes.c_uint32),
        ("takeover_ms", ctypes.c_uint32),
    ]


class ServerStats(ctypes.Structure):
    """struct tm_server_stats (tm-server.h)."""

    _fields_ = [
        ("connected", ctypes.c_int),
        ("subscribed", ctypes.c_int),
        ("stopped", ctypes.c_int),
        ("clients", ctypes.c_uint64),
        ("events_sent", ctypes.c_uint64),
        ("events_dropped", ctypes.c_uint64),
        ("stops", ctypes.c_uint64),
        ("bad_frames", ctypes.c_uint64),
        ("breakpoints", ctypes.c_uint32),
        ("timed_out", ctypes.c_uint64),
    ]


class RecorderStats(ctypes.Structure):
    _fields_ = [
        ("next_seq", ctypes.c_uint64),
        ("events_written", ctypes.c_uint64),
        ("events_dropped", ctypes.c_uint64),
        ("gaps_written", ctypes.c_uint64),
        ("payload_bytes", ctypes.c_uint64),
        ("writer_err", ctypes.c_int),
    ]


# ------------------------------------------------------------ record structs

class Slot(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint8), ("index", ctypes.c_uint16)]


class Tensor(ctypes.Structure):
    """struct tm_tensor (tm-types.h)."""

    _fields_ = [
        ("slot", Slot),
        ("dtype", ctypes.c_uint8),
        ("rank", ctypes.c_uint8),
        ("device_type", ctypes.c_uint8),
        ("device_index", ctypes.c_uint16),
        ("shape", ctypes.c_int64 * TM_MAX_RANK),
        ("have", ctypes.c_uint32),
        ("stat", ctypes.c_double * TM_STAT_COUNT),
        ("have_hist", ctypes.c_uint8),
        ("hist_lo", ctypes.c_double),
        ("hist_hi", ctypes.c_double),
        ("hist", ctypes.c_uint32 * TM_HIST_BINS),
        ("payload", ctypes.c_void_p),
        ("payload_len", ctypes.c_uint64),
    ]


class Event(ctypes.Structure):
    """struct tm_event (tm-types.h)."""

    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("phase", ctypes.c_uint8),
        ("kind", ctypes.c_uint8),
        ("level", ctypes.c_uint8),
        ("node", ctypes.c_uint32),
        ("call", ctypes.c_uint32),
        ("time_ns", ctypes.c_uint64),
        ("start_ns", ctypes.c_uint64),
        ("end_ns", ctypes.c_uint64),
        ("ntensors", ctypes.c_uint32),
        ("tensors", ctypes.POINTER(Tensor)),
        ("op_index", ctypes.c_uint32),
        ("op_flags", ctypes.c_uint8),
    ]


class Gap(ctypes.Structure):
    _fields_ = [
        ("first_seq", ctypes.c_uint64),
        ("last_seq", ctypes.c_uint64),
        ("count", ctypes.c_uint64),
        ("reason", ctypes.c_uint32),
        ("time_ns", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
    ]


class Crash(ctypes.Structure):
    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("time_ns", ctypes.c_uint64),
        ("signo", ctypes.c_int32),
        ("node", ctypes.c_uint32),
        ("phase", ctypes.c_uint8),
        ("nframes", ctypes.c_uint32),
        ("frames", ctypes.c_char_p * TM_MAX_FRAMES),
    ]


class Node(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint32),
        ("parent", ctypes.c_uint32),
        ("depth", ctypes.c_uint16),
        ("kind", ctypes.c_uint8),
        ("address", ctypes.c_char_p),
        ("type", ctypes.c_char_p),
        ("file", ctypes.c_char_p),
        ("line", ctypes.c_uint32),
    ]


class RunMeta(ctypes.Structure):
    _fields_ = [
        ("probe_kind", ctypes.c_char_p),
        ("default_level", ctypes.c_uint8),
        ("torch_version", ctypes.c_char_p),
        ("host", ctypes.c_char_p),
        ("start_unix_ns", ctypes.c_uint64),
        ("rank", ctypes.c_int32),
        ("world_size", ctypes.c_int32),
        ("command", ctypes.c_char_p),
        ("npairs", ctypes.c_uint32),
        ("keys", ctypes.c_char_p * TM_META_MAX_PAIRS),
        ("values", ctypes.c_char_p * TM_META_MAX_PAIRS),
    ]


class Manifest(ctypes.Structure):
    """struct tm_manifest (tm-manifest.h): a multi-rank run's per-rank traces."""

    _fields_ = [
        ("world_size", ctypes.c_int32),
        ("paths", ctypes.POINTER(ctypes.c_char_p)),
    ]


class Annot(ctypes.Structure):
    """struct tm_annot (tm-types.h): what a step was about (request ids)."""

    _fields_ = [
        ("seq", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("time_ns", ctypes.c_uint64),
        ("key", ctypes.c_char_p),
        ("count", ctypes.c_uint32),
        ("nvalues", ctypes.c_uint32),
        ("values", ctypes.POINTER(ctypes.c_char_p)),
    ]


class _RecordUnion(ctypes.Union):
    _fields_ = [
        ("meta", RunMeta),
        ("node", Node),
        ("event", Event),
        ("gap", Gap),
        ("crash", Crash),
        ("annot", Annot),
    ]


class Record(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint8), ("u", _RecordUnion)]


class Summary(ctypes.Structure):
    _fields_ = [
        ("version_major", ctypes.c_uint16),
        ("version_minor", ctypes.c_uint16),
        ("indexed", ctypes.c_int),
        ("complete", ctypes.c_int),
        ("damaged", ctypes.c_int),
        ("damage_err", ctypes.c_int),
        ("damage_offset", ctypes.c_uint64),
        ("nchunks", ctypes.c_uint64),
        ("nevents", ctypes.c_uint64),
        ("ngaps", ctypes.c_uint64),
        ("ncrashes", ctypes.c_uint64),
        ("nrecords", ctypes.c_uint64),
        ("first_seq", ctypes.c_uint64),
        ("last_seq", ctypes.c_uint64),
        ("first_step", ctypes.c_uint64),
        ("last_step", ctypes.c_uint64),
        ("first_time_ns", ctypes.c_uint64),
        ("last_time_ns", ctypes.c_uint64),
        ("file_bytes", ctypes.c_uint64),
        ("uncompressed_bytes", ctypes.c_uint64),
        ("index_damage", ctypes.c_int),
    ]


# ------------------------------------------------------------ layout check
#
# Everything above copies libtensormorph's headers: the ctypes structs, the
# struct.Struct views of the batch, the constants.  The library describes
# its own layout (tm_layout: every struct size, field offset and size, and
# constant, filled by the compiler), and load() compares each mirror with
# it, in every build (a build tree, an installed library, pip's): a
# difference is refused by name, never run with.

class LayoutMismatch(ImportError):
    """A mirror in this package disagrees with the libtensormorph loaded."""


# (ctypes mirror, the C struct it mirrors)
MIRRORS: tuple[tuple[type, str], ...] = (
    (RecTensor, "tm_rec_tensor"), (RecEvent, "tm_rec_event"),
    (RecBatch, "tm_rec_batch"), (RecorderOpts, "tm_recorder_opts"),
    (RecorderStats, "tm_recorder_stats"), (ServerOpts, "tm_server_opts"),
    (ServerStats, "tm_server_stats"), (Slot, "tm_slot"), (Tensor, "tm_tensor"),
    (Event, "tm_event"), (Gap, "tm_gap"), (Crash, "tm_crash"), (Node, "tm_node"),
    (RunMeta, "tm_run_meta"), (Annot, "tm_annot"), (Record, "tm_record"),
    (Manifest, "tm_manifest"), (Summary, "tm_summary"),
)


def _constants() -> dict[str, int]:
    """The constants copied above, by the C name the library gives them."""
    g = globals()
    out = {name: g[name] for name in (
        "TM_MAX_RANK", "TM_HIST_BINS", "TM_MAX_TENSORS", "TM_META_MAX_PAIRS",
        "TM_MAX_FRAMES", "TM_NODE_NONE", "TM_ANNOT_MAX_VALUES", "TM_ANNOT_MAX_VALUE",
        "TM_OK", "TM_ERR_TOO_LARGE", "TM_ERR_END", "TM_ERR_AGAIN")}
    out["TM_STAT__COUNT"] = TM_STAT_COUNT
    out["TM_SLOT__COUNT"] = len(SLOT_NAMES)
    for prefix in ("EV_", "PHASE_", "SLOT_", "NODE_", "REC_", "GAP_", "OPF_", "CAP_", "HIST_"):
        for name, value in g.items():
            if name.startswith(prefix) and name.isupper() and isinstance(value, int):
                out["TM_" + name] = value
    return out


def _views(table: dict[str, int]) -> list[tuple[str, int, int]]:
    """The struct.Struct views and offsets the fast path packs with:
    (what, ours, the library's)."""
    t = "tm_rec_tensor."
    return [
        ("EVENT_STRUCT.size", EVENT_STRUCT.size, table.get("tm_rec_event.sizeof", -1)),
        ("TENSOR_SIZE", TENSOR_SIZE, table.get(t + "sizeof", -1)),
        ("TENSOR_PACK prefix (up to shape)", TENSOR_PACK[0].size,
         table.get(t + "shape.offset", -1)),
        ("OFF_HAVE", OFF_HAVE, table.get(t + "have.offset", -1)),
        ("OFF_SLOT", OFF_SLOT, table.get(t + "slot_index.offset", -1)),
        ("OFF_SLOT_KIND", OFF_SLOT_KIND, table.get(t + "slot_kind.offset", -1)),
        ("OFF_CAPTURE", OFF_CAPTURE, table.get(t + "capture.offset", -1)),
        ("OFF_HAVE_HIST", OFF_HAVE_HIST, table.get(t + "have_hist.offset", -1)),
        ("TENSOR_STATS_OFF", TENSOR_STATS_OFF, table.get(t + "stat.offset", -1)),
        ("TENSOR_STATS.size", TENSOR_STATS.size,
         table.get(t + "sizeof", -1) - table.get(t + "stat.offset", 0)),
    ]


def layout_table(lib: Any) -> dict[str, int]:
    """The library's tm_layout() as {name: value}."""
    fn = getattr(lib, "tm_layout", None)
    if fn is None:
        raise LayoutMismatch(
            f"tensormorph_probe: {getattr(lib, 'path', 'libtensormorph')} has no tm_layout, "
            "so its structs cannot be checked against this probe's mirrors; it is older "
            "than the probe: rebuild it, or point TENSORMORPH_LIB at a matching one")
    fn.restype = ctypes.POINTER(_LayoutItem)
    fn.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    n = ctypes.c_size_t()
    items = fn(ctypes.byref(n))
    return {items[i].name.decode(): items[i].value for i in range(n.value)}


def layout_mismatches(table: dict[str, int],
                      mirrors: tuple[tuple[type, str], ...] = MIRRORS,
                      constants: dict[str, int] | None = None,
                      views: bool = True) -> list[str]:
    """Every difference between the mirrors in this module and the
    library's layout table, one sentence each (empty: they agree)."""
    bad = []

    def cmp(what: str, key: str, ours: int) -> None:
        if key not in table:
            bad.append(f"{what} is {ours}, and the library does not describe {key}")
        elif table[key] != ours:
            bad.append(f"{what} is {ours} here but {table[key]} in the library")

    for cls, cname in mirrors:
        cmp(f"sizeof(struct {cname}) ({cls.__name__})", f"{cname}.sizeof", ctypes.sizeof(cls))
        for field in cls._fields_:
            name = field[0]
            desc = getattr(cls, name)
            cmp(f"struct {cname} field {name}: offset", f"{cname}.{name}.offset", desc.offset)
            cmp(f"struct {cname} field {name}: size", f"{cname}.{name}.sizeof", desc.size)
    for cname, value in sorted((_constants() if constants is None else constants).items()):
        cmp(f"constant {cname}", cname, value)
    if views:
        for what, ours, theirs in _views(table):
            if ours != theirs:
                bad.append(f"{what} is {ours} here but {theirs} in the library")
    return bad


def check_layout(lib: Any) -> None:
    """Refuses (LayoutMismatch) a library whose structs or constants differ
    from this module's mirrors, naming every difference."""
    table = layout_table(lib)
    bad = layout_mismatches(table)
    for i, name in enumerate(STAT_NAMES):
        if lib.tm_stat_from_name(name.encode()) != i:
            bad.append(f"STAT_NAMES[{i}] is {name!r}, which the library does not number {i}")
    for names, fn in ((SLOT_NAMES, lib.tm_slot_kind_name), (KIND_NAMES, lib.tm_event_kind_name)):
        for i, name in enumerate(names):
            theirs = (fn(i) or b"").decode()
            if theirs != name:
                bad.append(f"name {i} is {name!r} here but {theirs!r} in the library")
    if bad:
        raise LayoutMismatch(
            f"tensormorph_probe: {getattr(lib, 'path', 'libtensormorph')} does not match "
            "this probe's mirrors of its headers (tensormorph_probe/_lib.py):\n  "
            + "\n  ".join(bad) + "\nUse the probe and the library of the same build.")


def check_hook_layout(hook_layout: Any, table: dict[str, int], where: str) -> None:
    """Refuses (LayoutMismatch) a C fast path (_hook.c) built against
    another batch layout than the library's, naming every difference."""
    if not isinstance(hook_layout, dict):
        raise LayoutMismatch(
            f"tensormorph_probe: {where} is the C fast path of an older probe (its layout() "
            "does not name its fields); rebuild it (pip install, or make), or set "
            "TENSORMORPH_NO_HOOK=1 to run without it")
    bad = []
    for key, ours in sorted(hook_layout.items()):
        if key not in table:
            bad.append(f"{key} is {ours}, and the library does not describe it")
        elif table[key] != ours:
            bad.append(f"{key} is {ours} in the fast path but {table[key]} in the library")
    if bad:
        raise LayoutMismatch(
            f"tensormorph_probe: the C fast path {where} was built against another batch "
            "layout than the libtensormorph loaded:\n  " + "\n  ".join(bad)
            + "\nRebuild it from this probe's sources, or set TENSORMORPH_NO_HOOK=1 to run "
            "without it.")


class _LayoutItem(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


# ------------------------------------------------------------ loading

_SONAMES = ("libtensormorph.so", "libtensormorph.so.0")
# where `make install` puts the library (./setup installs it under /usr/local)
_PREFIXES = ("/usr/local", "/usr")


def _repo_root() -> Path:
    # probes/pytorch/tensormorph_probe/_lib.py -> the repository root
    return Path(__file__).resolve().parents[3]


def candidates() -> list[tuple[str, str]]:
    """Every (where, path) the loader tries, in order."""
    out: list[tuple[str, str]] = []
    env = os.environ.get("TENSORMORPH_LIB")
    if env:
        out.append(("TENSORMORPH_LIB", env))
    bdir = os.environ.get("TENSORMORPH_BUILD_DIR")
    if bdir:
        for so in _SONAMES:
            out.append(("TENSORMORPH_BUILD_DIR", os.path.join(bdir, "src/lib/.libs", so)))
    root = _repo_root()
    builds = sorted(glob.glob(str(root / "_build*" / "src/lib/.libs" / _SONAMES[0])),
                    key=lambda p: -os.path.getmtime(p))
    if builds:
        out.extend(("build tree", p) for p in builds)
    else:
        out.append(("build tree", str(root / "_build*" / "src/lib/.libs" / _SONAMES[0])))
    for prefix in dict.fromkeys((sys.prefix, *_PREFIXES)):
        for libdir in ("lib", "lib64"):
            out.append(("install prefix", os.path.join(prefix, libdir, _SONAMES[0])))
    found = ctypes.util.find_library("tensormorph")
    out.append(("ctypes.util.find_library", found or "tensormorph (not found)"))
    return out


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_vp, c_sz, c_u32, c_u64 = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                       ctypes.c_uint32, ctypes.c_uint64)
    c_str = ctypes.c_char_p
    sigs = {
        "tm_strerror": (c_str, [c_int]),
        "tm_version_string": (c_str, []),
        "tm_stat_from_name": (c_int, [c_str]),
        "tm_slot_kind_name": (c_str, [c_int]),
        "tm_event_kind_name": (c_str, [c_int]),
        "tm_dtype_from_name": (c_int, [c_str]),
        # what probe-overhead times as the stats kernel's floor
        "tm_stats_compute": (c_int, [ctypes.POINTER(Tensor), c_vp, c_u64, c_int, c_int]),
        "tm_path_glob": (c_int, [c_str, c_str]),
        "tm_path_segment": (ctypes.c_size_t, [c_str, ctypes.c_char_p, ctypes.c_size_t]),
        "tm_recorder_opts_default": (None, [ctypes.POINTER(RecorderOpts)]),
        "tm_recorder_open": (c_int, [c_str, ctypes.POINTER(RecorderOpts), ctypes.POINTER(c_vp)]),
        "tm_recorder_meta": (c_int, [c_vp, ctypes.POINTER(RunMeta)]),
        "tm_recorder_node2": (c_int, [c_vp, c_str, c_str, c_str, c_u32, c_u32, c_u32, c_u32,
                                      ctypes.POINTER(c_u32)]),
        "tm_recorder_stats": (c_int, [c_vp, c_vp, c_sz]),
        "tm_recorder_submit": (c_int, [c_vp, c_vp, c_sz, c_vp, c_sz, ctypes.POINTER(c_u64)]),
        "tm_recorder_gap": (c_int, [c_vp, c_u64, c_u32, c_u64, c_u64, ctypes.POINTER(c_u64)]),
        "tm_recorder_annotate": (c_int, [c_vp, c_u64, c_u64, c_str,
                                         ctypes.POINTER(c_str), c_u32, c_u32]),
        "tm_recorder_flush": (c_int, [c_vp]),
        "tm_recorder_get_stats": (None, [c_vp, ctypes.POINTER(RecorderStats)]),
        "tm_recorder_close": (c_int, [c_vp]),
        "tm_recorder_detail": (c_str, [c_vp]),
        "tm_recorder_serve": (c_int, [c_vp, c_vp]),
        "tm_recorder_watch_batch": (c_int, [c_vp, ctypes.POINTER(RecBatch)]),
        "tm_recorder_crash_install": (c_int, [c_vp]),
        "tm_recorder_open_flight": (c_int, [ctypes.POINTER(RecorderOpts),
                                            ctypes.POINTER(FlightOpts), ctypes.POINTER(c_vp)]),
        "tm_recorder_flight_trigger": (c_int, [c_vp, c_str]),
        "tm_recorder_flight_dump": (c_int, [c_vp, c_str, c_u64]),
        "tm_recorder_flight_info": (c_int, [c_vp, ctypes.POINTER(FlightInfo)]),
        "tm_recorder_flight_word": (c_vp, [c_vp]),
        "tm_recorder_close_at_exit": (c_int, [c_vp, c_u64]),
        "tm_crash_uninstall": (None, []),
        "tm_server_opts_default": (None, [ctypes.POINTER(ServerOpts)]),
        "tm_server_start": (c_int, [ctypes.POINTER(ServerOpts), ctypes.POINTER(c_vp)]),
        "tm_server_stop": (None, [c_vp]),
        "tm_server_drop": (None, [c_vp]),
        "tm_server_pause_handler": (None, [c_vp, c_vp, c_vp]),
        "tm_server_hold": (c_int, [c_vp]),
        "tm_server_killed": (c_int, [c_vp]),
        "tm_server_path": (c_str, [c_vp]),
        "tm_server_start_error": (c_str, []),
        "tm_server_token": (c_str, [c_vp]),
        "tm_server_token_path": (c_str, [c_vp]),
        "tm_server_detail": (c_str, [c_vp]),
        "tm_server_state": (c_vp, [c_vp]),
        "tm_server_wait_client": (c_int, [c_vp, c_int]),
        "tm_server_level": (c_int, [c_vp, c_u32]),
        "tm_server_ops": (c_int, [c_vp, ctypes.c_char_p, ctypes.c_size_t]),
        "tm_server_wants_capture": (c_int, [c_vp, c_u32]),
        "tm_server_get_stats": (None, [c_vp, ctypes.POINTER(ServerStats)]),
        "tm_reader_open": (c_int, [c_str, ctypes.c_uint, ctypes.POINTER(c_vp),
                                   ctypes.POINTER(c_vp)]),
        "tm_reader_close": (None, [c_vp]),
        "tm_reader_next": (c_int, [c_vp, ctypes.POINTER(Record)]),
        "tm_reader_annotation": (c_int, [c_vp, c_u64, c_str,
                                         ctypes.POINTER(ctypes.POINTER(Annot))]),
        "tm_reader_summary": (ctypes.POINTER(Summary), [c_vp]),
        "tm_reader_meta": (ctypes.POINTER(RunMeta), [c_vp]),
        "tm_reader_nodes": (c_vp, [c_vp]),
        "tm_nodetab_count": (c_u32, [c_vp]),
        "tm_nodetab_get": (ctypes.POINTER(Node), [c_vp, c_u32]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    # the run manifest of a multi-rank recording (tm-manifest.h): optional,
    # so that a library from before it still records single processes
    opt = {
        "tm_manifest_read": (c_int, [c_str, ctypes.POINTER(ctypes.POINTER(Manifest)),
                                     ctypes.POINTER(c_vp)]),
        "tm_manifest_write": (c_int, [c_str, ctypes.c_int32, ctypes.POINTER(c_str)]),
        "tm_manifest_free": (None, [ctypes.POINTER(Manifest)]),
        "tm_manifest_rank_path": (c_int, [c_str, ctypes.c_int32, ctypes.c_char_p, c_sz]),
        "tm_manifest_path": (c_int, [c_str, ctypes.c_char_p, c_sz]),
        "tm_server_rank_path": (c_int, [c_str, ctypes.c_int32, ctypes.c_char_p, c_sz]),
        # a compiled region's eager re-run (tmdb's rerun)
        "tm_server_rerun": (c_int, [c_vp]),
    }
    for name, (res, args) in opt.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args
    # the per-event stats call, undeclared: the probe passes None, a c_void_p
    # it reuses and a prebuilt c_size_t, so no argtypes conversion per call
    raw = lib._FuncPtr(("tm_recorder_stats", lib))
    raw.restype = c_int
    lib.tm_recorder_stats_raw = raw  # type: ignore[attr-defined]
    # the per-event submit of a live session, undeclared for the same reason
    raw = lib._FuncPtr(("tm_recorder_submit", lib))
    raw.restype = c_int
    lib.tm_recorder_submit_raw = raw  # type: ignore[attr-defined]
    libc_free = ctypes.CDLL(None).free
    libc_free.argtypes = [c_vp]
    libc_free.restype = None
    lib.libc_free = libc_free  # type: ignore[attr-defined]


def _needs_asan(path: str) -> bool:
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return False
    try:
        with open(path, "rb") as f:
            return b"libasan.so" in f.read()
    except OSError:
        return False


@functools.cache
def load() -> ctypes.CDLL:
    """Loads libtensormorph once; LibraryNotFound names every place tried."""
    tried: list[str] = []
    for where, path in candidates():
        if where != "ctypes.util.find_library" and not os.path.exists(path):
            tried.append(f"  {where}: {path} (no such file)")
            continue
        if where == "ctypes.util.find_library" and not ctypes.util.find_library("tensormorph"):
            tried.append(f"  {where}: {path}")
            continue
        if _needs_asan(path):
            # dlopen of an ASan build aborts the process unless the runtime
            # was preloaded: skip it rather than die
            tried.append(f"  {where}: {path} (sanitizer build; needs LD_PRELOAD of libasan)")
            continue
        try:
            lib = ctypes.CDLL(path)
            _declare(lib)
        except (OSError, AttributeError) as exc:
            tried.append(f"  {where}: {path} ({exc})")
            continue
        if getattr(lib, "tm_layout", None) is None:
            # an older library, like one that lacks a function: passed over
            tried.append(f"  {where}: {path} (older than this probe: no tm_layout)")
            continue
        lib.path = path  # type: ignore[attr-defined]
        check_layout(lib)               # a differing layout is refused, loudly
        return lib
    raise LibraryNotFound(
        "tensormorph_probe: cannot load libtensormorph; looked in:\n" + "\n".join(tried)
        + "\nBuild it (./configure && make) or set TENSORMORPH_LIB to the path of "
        "libtensormorph.so (or TENSORMORPH_BUILD_DIR to a build directory).")


@functools.cache
def load_hook() -> Any | None:
    """The probe's C fast path (_hook.c) as a module, or None, and the
    probe then runs its Python path alone: the one built next to the
    libtensormorph that load() takes from a build tree, else the one pip
    built into this package.  TENSORMORPH_NO_HOOK=1 turns it off."""
    if os.environ.get("TENSORMORPH_NO_HOOK", "") not in ("", "0"):
        return None
    mod = None
    for where, path in candidates():
        if where == "ctypes.util.find_library" or not os.path.exists(path) or _needs_asan(path):
            continue
        lib = Path(path)
        if lib.parent.name == ".libs" and lib.parents[1].name == "lib" \
                and lib.parents[2].name == "src":
            so = lib.parents[3] / "probes/pytorch/tensormorph_probe" / (
                "_hook" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
            spec = importlib.util.spec_from_file_location("tensormorph_probe._hook", so)
            if so.exists() and not _needs_asan(str(so)) and spec and spec.loader:
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
        break                           # the library load() takes
    if mod is None:
        try:
            from . import _hook as mod  # type: ignore[attr-defined, no-redef]
        except ImportError:
            return None
    check_hook_layout(mod.layout(), layout_table(load()), getattr(mod, "__file__", "_hook"))
    return mod


def strerror(err: int) -> str:
    return load().tm_strerror(err).decode()


# ------------------------------------------------------------ multi-rank runs
#
# A distributed recording is one .tmrun per rank plus a manifest naming them
# (doc/tmrun.md, "Run manifest"); a distributed live session one socket per
# rank.  The names and the format are libtensormorph's: these wrappers only
# call it.

def _multi_fn(name: str) -> Any:
    fn = getattr(load(), name, None)
    if fn is None:
        raise OSError(f"{load().path}: this libtensormorph has no {name} (multi-rank "
                      "runs); rebuild it")
    return fn


def _name(fn: Any, what: str, *args: Any) -> str:
    """Calls a tm_manifest_*path function with a buffer big enough."""
    size = 256
    while True:
        buf = ctypes.create_string_buffer(size)
        err = fn(*args, buf, size)
        if err == TM_ERR_TOO_LARGE and size < (1 << 20):
            size *= 4
            continue
        if err:
            raise OSError(f"{what}: {strerror(err)}")
        return os.fsdecode(buf.value)


def manifest_rank_path(record: str | os.PathLike[str], rank: int) -> str:
    """The trace rank `rank` writes for a record path ("run.tmrun", 1 ->
    "run.rank1.tmrun"; tm_manifest_rank_path)."""
    rec = os.fspath(record)
    return _name(_multi_fn("tm_manifest_rank_path"), f"{rec}: rank {rank} trace name",
                 os.fsencode(rec), rank)


def manifest_path(record: str | os.PathLike[str]) -> str:
    """The manifest of a record path ("run.tmrun" -> "run.manifest")."""
    rec = os.fspath(record)
    return _name(_multi_fn("tm_manifest_path"), f"{rec}: manifest name", os.fsencode(rec))


def server_rank_path(path: str | os.PathLike[str], rank: int) -> str:
    """The socket rank `rank` listens on when every rank of a job was given
    the same path ("dbg.sock", 1 -> "dbg.rank1.sock"; tm_server_rank_path,
    which tmdb uses to find them)."""
    p = os.fspath(path)
    return _name(_multi_fn("tm_server_rank_path"), f"{p}: rank {rank} socket name",
                 os.fsencode(p), rank)


def manifest_write(path: str | os.PathLike[str], files: list[str]) -> None:
    """Writes a manifest naming files[rank] for every rank (atomically)."""
    fn = _multi_fn("tm_manifest_write")
    arr = (ctypes.c_char_p * max(1, len(files)))(*[os.fsencode(f) for f in files])
    err = fn(os.fsencode(path), len(files), arr)
    if err:
        raise OSError(f"{os.fspath(path)}: cannot write the run manifest: {strerror(err)}")


def manifest_read(path: str | os.PathLike[str]) -> list[str]:
    """The per-rank trace paths a manifest names, index = rank, resolved
    against the manifest's directory (tm_manifest_read)."""
    fn = _multi_fn("tm_manifest_read")
    lib = load()
    out = ctypes.POINTER(Manifest)()
    detail = ctypes.c_void_p()
    err = fn(os.fsencode(path), ctypes.byref(out), ctypes.byref(detail))
    if err:
        msg = ctypes.string_at(detail.value).decode(errors="replace") if detail.value else ""
        if detail.value:
            lib.libc_free(detail)
        raise OSError(msg or f"{os.fspath(path)}: {strerror(err)}")
    try:
        m = out.contents
        return [os.fsdecode(m.paths[r]) for r in range(m.world_size)]
    finally:
        lib.tm_manifest_free(out)
