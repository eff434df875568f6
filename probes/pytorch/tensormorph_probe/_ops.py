"""Operation events: the tensor operations inside a module's forward.

A module call is the probe's finest node; when the first NaN is made by the
code in a module's own forward, an op event says which operation made it and
where.  For the module nodes an op pattern selects (Probe(ops="PATTERN"),
`tensormorph-probe record --ops`, TENSORMORPH_OPS, tmdb's `set probe-ops`),
each aten operation run directly in the module's forward -- not inside a
child module -- is an OP event (doc/tmrun.md 4.3): its node is the op's
*site*, a node of kind TM_NODE_OP whose parent is the module, whose type is
the aten overload ("aten::div.Tensor") and whose file and line are the line
of the user's code that called it; its call is the module's call number; its
tensors are the op's outputs with stats at the module's level (views and
empty tensors at level 0: they make no values); op_index is its place in the call, from 1;
op_flags say whether the inputs were all finite (checked when the output is
not finite, and before every in-place op, which overwrites them).

Operations run during a step (from the first call of the model on) outside
every module call -- the loss, the
arithmetic of the training loop, the optimizer's update -- belong to the node
`main` (one call per step), so that a NaN made in the loss is found where it
is made.

How: a TorchDispatchMode on the thread that attaches sees every aten op
below autograd.  The op's module is the innermost observed module call in
flight: with ops on, every observed node's calls go through the probe's
Python _enter/_exit (NodeBase.ops turns _hook.c's fast path off), which this
module replaces per probe instance to keep a call stack.  The source line is
found by walking frames only for the ops recorded, past torch's own code
(torch/nn/modules stays: a Linear's ops are at its forward's line), each
code object judged once.  With no pattern nothing is installed: no mode, no
override, the C fast path as before.

Backward: autograd runs the backward's ops below the mode too, but nothing
ties them to the forward op; an op's gradient is recorded as an OP event of
phase bwd (slot grad_out, the gradient of its output) through a hook on the
output tensor, at level >= 2 as module gradients are.

torch.compile: a compiled region runs inductor's kernels, which no dispatch
mode sees; the probe says so once (a warning naming the module) rather than
recording nothing silently.
"""

from __future__ import annotations

import os
import struct
import sys
import time
import warnings
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _lib

MAIN = "main"                   # the node of the ops outside every module call
_EV_OP = _lib.EV_OP
_FWD, _BWD = _lib.PHASE_FWD, _lib.PHASE_BWD
_SLOT_OUT, _SLOT_GRAD_OUT = _lib.SLOT_OUT, _lib.SLOT_GRAD_OUT
_CHECKED, _FINITE = _lib.OPF_INPUTS_CHECKED, _lib.OPF_INPUTS_FINITE
_TSIZE = _lib.TENSOR_SIZE
_STATS = _lib.TENSOR_STATS_OFF
_NAN_INF = (1 << 1) | (1 << 2)          # stat bits nan_count, inf_count
_Tensor = torch.Tensor
_now = time.monotonic_ns
_U32 = struct.Struct("<I").pack_into
_NAN_INF_AT = struct.Struct("<dd").unpack_from     # stat[1], stat[2]
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_MODULES_DIR = os.path.join(_TORCH_DIR, "nn", "modules") + os.sep
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_current_node = getattr(torch._C, "_current_autograd_node", None)


def split_patterns(ops: str | None) -> list[str]:
    """"model.attn,main" -> ["model.attn", "main"]; None or "" -> []."""
    if not ops:
        return []
    return [p.strip() for p in str(ops).split(",") if p.strip()]


class _Frame:
    """One module call in flight (or a step's `main`): its node, call
    number, ops counted so far, and whether its ops are recorded."""

    __slots__ = ("node", "call", "count", "rec", "nid", "level", "address", "step")

    def __init__(self, node: Any, call: int, rec: bool) -> None:
        self.node = node
        self.call = call
        self.count = 0
        self.rec = rec
        self.nid = node.id if node is not None else _lib.TM_NODE_NONE
        self.level = node.level if node is not None else 0
        self.address = node.address if node is not None else MAIN
        self.step = -1


class _Mode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a dynamo-disabling
        # function unless told not to: some 3 us of every op.  Op events
        # are off in compiled regions anyway (the module docstring).
        return False

    def __init__(self, rec: OpRecorder) -> None:
        super().__init__()
        self._rec = weakref.ref(rec)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        rec = self._rec()
        if rec is None:
            return func(*args, **(kwargs or {}))
        return rec.dispatch(func, args, kwargs or {})


class OpRecorder:
    """The op events of one probe for the nodes its patterns select."""

    def __init__(self, probe: Any, patterns: list[str]) -> None:
        self.probe = probe
        self.patterns = patterns
        self.stack: list[_Frame] = []
        self.guard = 0                  # > 0: the probe's own tensor work
        self.sites: dict[tuple[Any, ...], int] = {}
        self.site_addr: set[str] = set()
        self.internal: dict[Any, bool] = {}     # code object -> torch's own
        self.finfo: dict[Any, tuple[str, bool, bool]] = {}
        self.node_rec: dict[int, bool] = {}     # id(node) -> its ops recorded
        self.main: _Frame | None = None
        self.main_node: Any = None
        self.recorded = 0
        self.compiled_warned = False
        self.mode: _Mode | None = None
        self.started = False            # a root was called: main's ops count
        self.pending: list[tuple[Any, ...]] = []    # outputs awaiting grad hooks

    # ------------------------------------------------------------ setup

    def matches(self, address: str) -> bool:
        return any(self.probe._match(p, address) for p in self.patterns)

    def install(self) -> None:
        """Pushes the dispatch mode and routes observed calls through the
        stack-keeping _enter/_exit."""
        p = self.probe
        for node in p._nodes.values():
            self.adopt(node)
        if self.matches(MAIN):
            self.main_node = _MainNode(p._register(MAIN, "main", None, 0,
                                                   _lib.TM_NODE_NONE, _lib.NODE_MODULE),
                                       p.level)
        p._enter = self.enter
        p._exit = self.exit
        self.mode = _Mode(self)
        torch._C._push_on_torch_dispatch_stack(self.mode)

    def adopt(self, node: Any) -> None:
        """A node the probe wraps: its calls go through Python (stack)."""
        node.ops = True
        if (not self.compiled_warned and getattr(node.module, "_compiled_call_impl", None)
                is not None and self.matches(node.address)):
            self._compiled(node.address)

    def uninstall(self) -> None:
        p = self.probe
        for node in p._nodes.values():
            node.ops = False
        p.__dict__.pop("_enter", None)
        p.__dict__.pop("_exit", None)
        mode, self.mode = self.mode, None
        if mode is not None:
            self._pop_mode(mode)
        self.stack.clear()

    @staticmethod
    def _pop_mode(mode: _Mode) -> None:
        """Takes our mode off the thread's dispatch mode stack, leaving any
        pushed after it in place."""
        held = []
        try:
            while torch._C._len_torch_dispatch_stack() > 0:
                top = torch._C._pop_torch_dispatch_stack(None)
                if top is mode:
                    break
                held.append(top)
        finally:
            for m in reversed(held):
                torch._C._push_on_torch_dispatch_stack(m)

    # ------------------------------------------------------------ calls

    def enter(self, node: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
        self.guard += 1
        try:
            t, call = type(self.probe)._enter(self.probe, node, args, kwargs)
        finally:
            self.guard -= 1
        if node.is_root:
            self.started = True
        rec = self.node_rec.get(id(node))
        if rec is None:
            rec = self.node_rec[id(node)] = (node.observed and node.id != _lib.TM_NODE_NONE
                                             and self.matches(node.address))
        self.stack.append(_Frame(node, call, rec))
        if rec and not self.compiled_warned and torch.compiler.is_compiling():
            self._compiled(node.address)
        return t, call

    def exit(self, node: Any, start: int, call: int, output: Any, returned: bool = True) -> None:
        if self.pending:
            self.hook_pending()
        st = self.stack
        if st and st[-1].node is node:
            st.pop()
        self.guard += 1
        try:
            type(self.probe)._exit(self.probe, node, start, call, output, returned)
        finally:
            self.guard -= 1

    def _compiled(self, where: str) -> None:
        self.compiled_warned = True
        warnings.warn(f"tensormorph-probe: {where} is compiled (torch.compile): no dispatch "
                      "mode sees the kernels of its compiled regions, so they record no op "
                      "events (module events only)", stacklevel=3)

    # ------------------------------------------------------------ ops

    def _frame(self) -> _Frame | None:
        if self.stack:
            f = self.stack[-1]
            return f if f.rec else None
        if self.main_node is None or not self.started:
            return None     # building the model is no step
        step = self.probe.step_count
        f = self.main
        if f is None or f.step != step:
            f = self.main = _Frame(self.main_node, 1, True)
            f.step = step
        return f

    def hook_pending(self) -> None:
        """Gradient hooks on the recorded outputs that now require grad."""
        pend, self.pending = self.pending, []
        for tensors, sid, call, index, node in pend:
            for j, x in enumerate(tensors):
                if x.requires_grad:
                    x.register_hook(_GradOp(self, sid, call, index, j, node))

    def dispatch(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if self.pending:
            self.hook_pending()
        if self.guard or self.probe._closed:
            return func(*args, **kwargs)
        f = self._frame()
        if f is None or (_current_node is not None and _current_node() is not None):
            # not recorded, or autograd's backward (no module call is open
            # there and nothing ties its ops to the forward's)
            return func(*args, **kwargs)
        info = self.finfo.get(func)
        if info is None:
            info = self.finfo[func] = _op_info(func)
        pre = _inputs_flags(args, kwargs) if info[2] else 0
        start = _now() - self.probe._t0
        out = func(*args, **kwargs)
        self.guard += 1
        try:
            self._record(f, func, info, args, kwargs, out, pre, start)
        finally:
            self.guard -= 1
        return out

    def _site(self, f: _Frame, func: Any, name: str) -> int:
        """The op site node of func called from the current user frame."""
        fr = sys._getframe(3)
        internal = self.internal
        while fr is not None:
            code = fr.f_code
            inside = internal.get(code)
            if inside is None:
                fn = code.co_filename
                inside = internal[code] = (
                    (fn.startswith(_TORCH_DIR) and not fn.startswith(_MODULES_DIR))
                    or fn.startswith(_OWN_DIR))
            if not inside:
                break
            fr = fr.f_back
        code = fr.f_code if fr is not None else None
        lasti = fr.f_lasti if fr is not None else -1
        key = (f.nid, func, code, lasti)
        sid = self.sites.get(key)
        if sid is not None:
            return sid
        file = os.path.abspath(code.co_filename) if code is not None else None
        line = fr.f_lineno if fr is not None else 0
        # one site per (module, op, line); the code object only caches it
        k2 = (f.nid, name, file, line)
        sid = self.sites.get(k2)
        if sid is None:
            p = self.probe
            short = name[6:] if name.startswith("aten::") else name
            seg = f"op_{short}_{line}" if line else f"op_{short}"
            address = p._address(f.address, seg)
            p._addresses.add(address)
            sid = p._register(address, name, file, line, f.nid, _lib.NODE_OP)
            self.sites[k2] = sid
        self.sites[key] = sid
        return sid

    def _record(self, f: _Frame, func: Any, info: tuple[str, bool, bool], args: Any,
                kwargs: dict[str, Any], out: Any, pre: int, start: int) -> None:
        p = self.probe
        name, view, _ = info
        sid = self._site(f, func, name)
        f.count += 1
        index = min(f.count, 0xFFFF)
        if type(out) is _Tensor or isinstance(out, _Tensor):
            tensors = [out]
        elif isinstance(out, (tuple, list)):
            tensors = [x for x in out if isinstance(x, _Tensor)][:_lib.TM_MAX_TENSORS]
        else:
            tensors = []
        level = 0 if view else f.node.level
        n = len(tensors)
        live = p._live is not None and p._live.value & 1
        if n == 1 and not live:
            # the common op: one output, packed by the probe's one-tensor
            # event (C where it can), then given its index and flags
            t = _now() - p._t0
            p._event1(_EV_OP, _FWD, sid, f.call, t, start, t, tensors[0], _SLOT_OUT, level, 0)
            flags = pre
            if level and not pre and self._nonfinite(p, p._nt - 1, tensors):
                flags = _inputs_flags(args, kwargs)
            off = (p._nev - 1) * 48
            _U32(p._evbuf, off + 40, 1 | (index << 16))
            p._evbuf[off + 47] = flags
        else:
            self._pack(p, f, sid, index, tensors, level, args, kwargs, pre, start)
        self.recorded += 1
        if level >= 2 and torch.is_grad_enabled() and tensors:
            # below autograd the outputs have no history yet: their hooks
            # go on once the op has returned (at the next op or call exit)
            self.pending.append((tensors, sid, f.call, index, f.node))

    def _pack(self, p: Any, f: _Frame, sid: int, index: int, tensors: list[torch.Tensor],
              level: int, args: Any, kwargs: dict[str, Any], pre: int, start: int) -> None:
        """An op event packed here: several outputs, or a debugger's
        single-event submit (which must see the flags)."""
        n = len(tensors)
        if p._nev >= p._bev or p._nt + n > p._bt:
            p._submit()
        base = p._nt
        need = 0
        for j, x in enumerate(tensors):
            need |= p._put_tensor(base + j, x, _SLOT_OUT, j, level)
        if need:
            p._stats_now(base, n)
        flags = pre
        if level and not pre and self._nonfinite(p, base, tensors):
            flags = _inputs_flags(args, kwargs)
        t = _now() - p._t0
        _lib.EVENT_STRUCT.pack_into(p._evbuf, p._nev * 48, p.step_count, t, start, t, sid,
                                    f.call, n | (index << 16), _EV_OP, _FWD, level, flags)
        p._nt = base + n
        p._nev = nev = p._nev + 1
        p._bnev.value = nev
        if p._live is not None and p._live.value & 1:
            p._submit_live()

    @staticmethod
    def _nonfinite(p: Any, base: int, tensors: list[torch.Tensor]) -> bool:
        """Whether an output holds NaN or Inf, from the stats just packed
        (host) or from the tensor (device: its stats come at submit)."""
        tb = p._tbuf
        for j, x in enumerate(tensors):
            off = (base + j) * _TSIZE
            have = int.from_bytes(tb[off + 16:off + 20], "little")
            if have & _NAN_INF == _NAN_INF:
                nan, inf = _NAN_INF_AT(tb, off + _STATS + 8)
                if nan or inf:
                    return True
            elif x.is_floating_point() or x.is_complex():
                if not bool(torch.isfinite(x.detach()).all()):
                    return True
        return False

    def grad_event(self, sid: int, call: int, index: int, slot: int, node: Any,
                   grad: torch.Tensor) -> None:
        p = self.probe
        if p._closed:
            return
        self.guard += 1
        try:
            t = _now() - p._t0
            if p._nev >= p._bev or p._nt + 1 > p._bt:
                p._submit()
            base = p._nt
            if p._put_tensor(base, grad, _SLOT_GRAD_OUT, slot, node.level):
                p._stats_now(base, 1)
            _lib.EVENT_STRUCT.pack_into(p._evbuf, p._nev * 48, p.step_count, t, t, t, sid,
                                        call, 1 | (index << 16), _EV_OP, _BWD, node.level, 0)
            p._nt = base + 1
            p._nev = nev = p._nev + 1
            p._bnev.value = nev
            if p._live is not None and p._live.value & 1:
                p._submit_live()
        finally:
            self.guard -= 1


class _GradOp:
    """An op output's gradient hook: an OP event of phase bwd."""

    __slots__ = ("rec", "sid", "call", "index", "slot", "node")

    def __init__(self, rec: OpRecorder, sid: int, call: int, index: int, slot: int,
                 node: Any) -> None:
        self.rec = weakref.ref(rec)
        self.sid, self.call, self.index, self.slot, self.node = sid, call, index, slot, node

    def __call__(self, grad: torch.Tensor) -> None:
        rec = self.rec()
        if rec is not None and rec.probe._ops is rec:
            rec.grad_event(self.sid, self.call, self.index, self.slot, self.node, grad)


class _MainNode:
    """The node `main`: ops outside every module call."""

    __slots__ = ("id", "level", "address", "observed")

    def __init__(self, nid: int, level: int) -> None:
        self.id = nid
        self.level = level
        self.address = MAIN
        self.observed = True


def _op_info(func: Any) -> tuple[str, bool, bool]:
    """(name, is_view, mutates) of an OpOverload, once per overload."""
    name = func.name()
    if "::" not in name:
        name = f"aten::{name}"
    view = mutates = False
    if name.startswith(("aten::empty", "aten::new_empty")):
        return name, True, False        # uninitialised memory: no values made
    try:
        schema = func._schema
        for a in schema.arguments:
            ai = a.alias_info
            if ai is not None and ai.is_write:
                mutates = True
        rets = schema.returns
        if rets and all(r.alias_info is not None and not r.alias_info.is_write for r in rets):
            view = True
    except (AttributeError, RuntimeError):
        pass
    return name, view, mutates


def _inputs_flags(args: Any, kwargs: dict[str, Any]) -> int:
    """TM_OPF_INPUTS_CHECKED, plus FINITE when every floating input is."""
    for x in _tensors(args, kwargs):
        if (x.is_floating_point() or x.is_complex()) and x.numel() and \
                not bool(torch.isfinite(x.detach()).all()):
            return _CHECKED
    return _CHECKED | _FINITE


def _tensors(args: Any, kwargs: dict[str, Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out.extend(x for x in a if isinstance(x, _Tensor))
    return out
