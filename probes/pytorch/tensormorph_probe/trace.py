"""Reading a .tmrun trace through libtensormorph's reader.

Tests and scripts use this to look at what a probe recorded.  It is a thin
ctypes wrapper: the format is decoded by the C reader (tm_reader_open/next),
never in Python; this only copies the decoded structs into Python objects.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from . import _lib


@dataclass
class TensorRecord:
    slot: str                     # "out.0", "in.1", "grad_out.0", "data", "grad",
                                  # "out.0[r1]" (a request's rows of out.0)
    dtype: int
    shape: tuple[int, ...]
    device_type: int
    stats: dict[str, float]       # only the stats present (absent = unknown)
    # (lo, hi, bins): for hist_kind HIST_LOG2 (1.3 on) lo and hi are the
    # exponents E - 15 and E (tm-stats.h); for HIST_LINEAR (older traces)
    # the range the 32 even bins split
    hist: tuple[float, float, tuple[int, ...]] | None
    payload: bytes | None
    hist_kind: int = 0


@dataclass
class EventRecord:
    seq: int
    step: int
    phase: str                    # "fwd" | "bwd"
    kind: str                     # "enter" | "exit" | "bwd" | "param" | "raise" | "op"
    level: int
    node: str                     # node address
    call: int
    time_ns: int
    start_ns: int
    end_ns: int
    tensors: list[TensorRecord] = field(default_factory=list)
    # op events (kind "op"): node is the op site, module its module's
    # address; op the aten overload, file/line where the user's code called it
    op_index: int = 0
    op_flags: int = 0
    op: str | None = None
    module: str | None = None
    file: str | None = None
    line: int = 0

    @property
    def inputs_finite(self) -> bool | None:
        """An op's inputs were all finite (None: not checked)."""
        if not self.op_flags & _lib.OPF_INPUTS_CHECKED:
            return None
        return bool(self.op_flags & _lib.OPF_INPUTS_FINITE)

    def slot(self, name: str) -> TensorRecord | None:
        for t in self.tensors:
            if t.slot == name:
                return t
        return None


@dataclass
class GapRecord:
    first_seq: int
    last_seq: int
    count: int
    reason: int
    step: int


@dataclass
class NodeRecord:
    id: int
    parent: int
    depth: int
    kind: int
    address: str
    type: str
    file: str | None
    line: int


def _s(b: bytes | None) -> str | None:
    return b.decode("utf-8", "replace") if b is not None else None


def _tensor(t: _lib.Tensor) -> TensorRecord:
    slot = _lib.SLOT_NAMES[t.slot.kind] if t.slot.kind < len(_lib.SLOT_NAMES) else "?"
    index = t.slot.index
    if t.slot.kind not in (_lib.SLOT_DATA, _lib.SLOT_GRAD):
        if index & _lib.SLOT_ROWS:
            # a request's rows of a batch tensor, named as tmdb names them
            slot = (f"{slot}.{index % _lib.SLOT_ROW_INDEX_MAX}"
                    f"[r{index // _lib.SLOT_ROW_INDEX_MAX % _lib.SLOT_ROW_MAX}]")
        else:
            slot = f"{slot}.{index}"
    stats = {name: t.stat[i] for i, name in enumerate(_lib.STAT_NAMES) if t.have >> i & 1}
    hist = (t.hist_lo, t.hist_hi, tuple(t.hist)) if t.have_hist else None
    payload = ctypes.string_at(t.payload, t.payload_len) if t.payload else None
    return TensorRecord(slot, t.dtype, tuple(t.shape[: t.rank]), t.device_type, stats, hist,
                        payload, t.have_hist)


class Trace:
    """An open .tmrun file: nodes, metadata, and an iterator over records."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._r: ctypes.c_void_p | None = None
        self._lib = _lib.load()
        self.path = os.fspath(path)
        handle = ctypes.c_void_p()
        detail = ctypes.c_void_p()
        err = self._lib.tm_reader_open(self.path.encode(), 0, ctypes.byref(handle),
                                       ctypes.byref(detail))
        if err:
            msg = ctypes.string_at(detail.value).decode() if detail.value else ""
            if detail.value:
                self._lib.libc_free(detail)
            raise OSError(msg or f"{self.path}: {_lib.strerror(err)}")
        self._r = handle
        tab = self._lib.tm_reader_nodes(handle)
        self.nodes: list[NodeRecord] = []
        for i in range(self._lib.tm_nodetab_count(tab)):
            n = self._lib.tm_nodetab_get(tab, i).contents
            self.nodes.append(NodeRecord(n.id, n.parent, n.depth, n.kind, _s(n.address) or "",
                                         _s(n.type) or "", _s(n.file), n.line))
        self.by_address = {n.address: n for n in self.nodes}
        s = self._lib.tm_reader_summary(handle).contents
        self.summary = {name: getattr(s, name) for name, _ in _lib.Summary._fields_}
        m = self._lib.tm_reader_meta(handle)
        self.meta: dict[str, object] = {}
        if m:
            mc = m.contents
            self.meta = {"probe_kind": _s(mc.probe_kind), "default_level": mc.default_level,
                         "torch_version": _s(mc.torch_version), "command": _s(mc.command),
                         "rank": mc.rank, "world_size": mc.world_size,
                         "start_unix_ns": mc.start_unix_ns}
            for i in range(mc.npairs):
                self.meta[_s(mc.keys[i]) or ""] = _s(mc.values[i])

    def records(self) -> Iterator[EventRecord | GapRecord]:
        """Events and gaps in file order (crash records are skipped)."""
        rec = _lib.Record()
        while True:
            err = self._lib.tm_reader_next(self._r, ctypes.byref(rec))
            if err == _lib.TM_ERR_END:
                return
            if err:
                raise OSError(f"{self.path}: {_lib.strerror(err)}")
            if rec.type == _lib.REC_EVENT:
                e = rec.u.event
                nd = self.nodes[e.node] if e.node < len(self.nodes) else None
                node = nd.address if nd is not None else str(e.node)
                kind = _lib.KIND_NAMES[e.kind] if e.kind < len(_lib.KIND_NAMES) else "?"
                ev = EventRecord(e.seq, e.step, "bwd" if e.phase else "fwd", kind, e.level, node,
                                 e.call, e.time_ns, e.start_ns, e.end_ns,
                                 [_tensor(e.tensors[i]) for i in range(e.ntensors)])
                if e.kind == _lib.EV_OP and nd is not None:
                    ev.op_index, ev.op_flags = e.op_index, e.op_flags
                    ev.op, ev.file, ev.line = nd.type, nd.file, nd.line
                    if nd.parent < len(self.nodes):
                        ev.module = self.nodes[nd.parent].address
                yield ev
            elif rec.type == _lib.REC_GAP:
                g = rec.u.gap
                yield GapRecord(g.first_seq, g.last_seq, g.count, g.reason, g.step)

    def events(self) -> list[EventRecord]:
        return [r for r in self.records() if isinstance(r, EventRecord)]

    def annotation(self, step: int, key: str = "request") -> tuple[list[str], int] | None:
        """The annotation key of step (a serving probe's request ids): the
        ids kept and how many the step had, or None when there is none."""
        out = ctypes.POINTER(_lib.Annot)()
        err = self._lib.tm_reader_annotation(self._r, step, key.encode(), ctypes.byref(out))
        if err:
            return None
        a = out.contents
        return [_s(a.values[i]) or "" for i in range(a.nvalues)], a.count

    def close(self) -> None:
        if getattr(self, "_r", None):
            self._lib.tm_reader_close(self._r)
            self._r = None

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
