"""The probe inside torch.compile's graphs.

Eager module calls are observed by _hook.c's Forward (or probe.py's Python
wrapper), code that dynamo cannot trace: ctypes, struct packing, C.  When
dynamo traces a wrapped forward it takes traced_call instead (_hook.c's
set_trace_call shows it to dynamo as Forward.__call__; the Python wrapper
branches on torch.compiler.is_compiling()).  That path is plain Python and
tensor code, so the probe adds no graph break:

- at trace time, each observed call appends its events to a table of
  ints: event kind, node id, level, tensor count, and how many ints of
  per-tensor entries follow (its slot, dtype, device, numel and shape --
  SymInts where dynamo made a size dynamic).  An event whose tensors are
  all host tensors (the common case) has none: its rows come whole from
  host_stats, so dynamo traces little Python per call.  A level-0 event
  of static sizes has them, constants (_put_static): its rows are the
  same at every run, packed once by _plan, and no tensor leaves the graph;
- a host tensor's stats are computed by libtensormorph, as in eager mode
  (tm_recorder_stats, one pass in C): the region hands its host tensors,
  a chunk at a time (_HOST_CHUNK), to one opaque op,
  tensormorph::host_stats, which returns their summaries (struct
  tm_rec_tensor, as bytes), metadata read from the tensors at run time; a
  tensor passed again (one module's output is the next one's input) is
  reduced once, as eager mode's reuse does.  One node per chunk instead of
  a few dozen reductions per tensor: the graph and its compile time stay
  the model's, and a chunk bounds how long the region keeps tensors alive
  for it.  The last chunk goes to the flush below, which computes its
  rows: a region of fewer tensors than a chunk makes one op call;
- a device tensor's stats are computed by device_stats (_devstats.py, the
  definitions of stats.c), tensor reductions that inductor fuses with the
  model's kernels and a CUDA graph captures; they are stacked into one
  float64 tensor;
- when the outermost observed call traced into the graph returns (the
  region), one custom op, tensormorph::flush(stats, table, ...), takes the
  stats and the table.  It is registered as an ordered effect, so dynamo,
  AOTAutograd and inductor keep it, after the region's kernels.  At run
  time it reads the stats to the host once and hands the events to the
  probe (Probe._compiled_flush), which numbers the calls, moves the step as
  a root call does in eager mode and packs them into its batch: the same
  order, call numbers, addresses and seqs as eager mode.  The table and
  the slots host_stats reads are constants of the trace: the ops get
  them by key (_const) rather than as lists converted on every call.

The region's state while it is traced lives in module lists that dynamo
tracks as side effects of the trace (they are empty again when a region
ends, and a restarted trace starts from them empty).  Each value dynamo
reads is a guard evaluated on every call of the compiled code, so per
module the traced code reads one: the Forward's _tm_mode (the node's
level, whether it is observed, a release), and a level a debugger
changes recompiles the region (doc/manual.md, "Compiled models"); what
never changes for a Forward comes as a constant (_static).  The traced
code reaches the probe through _live and the module through _modules,
globals keyed by those constant ints (_Node's pid, mid): reaching the one
probe and each module through several local
objects (the module's forward, a method bound to it, was one) would make
dynamo guard that they are the same object, a Python lambda per module
evaluated on every call of the compiled code.  A module's observed
forward is therefore its instance attribute, not a bound method
(forward_traced).

Level 3 passes each tensor's copy to the op, which copies it to the host.

Level 2's gradients: the traced call registers a gradient hook where eager
mode does (the inputs at ENTER, the outputs at EXIT); dynamo compiles it
into the backward graph, where it computes the gradient's stats and calls
tensormorph::grad, one host read per gradient event, in the order eager
mode's hooks fire.  The event names its forward call through a token that
tensormorph::begin hands the region when it starts (the flush maps it to
the calls it numbered).  Parameter events (once a step, at the optimizer)
are made outside compiled code as in eager mode.
"""

from __future__ import annotations

import array
import ctypes
import functools
import hashlib
import importlib.abc
import importlib.util
import itertools
import sys
import time
import warnings
import weakref
from typing import Any

import torch

from . import _lib
from ._devstats import VEC_LEN, device_stats, sync_allowed
from ._flatten import flatten, flatten_call

_EV_ENTER, _EV_EXIT, _EV_BWD = _lib.EV_ENTER, _lib.EV_EXIT, _lib.EV_BWD
_MAX_RANK = _lib.TM_MAX_RANK
_MAX_TENSORS = _lib.TM_MAX_TENSORS
_SLOT_IN, _SLOT_OUT = _lib.SLOT_IN, _lib.SLOT_OUT
_SLOT_GRAD_IN, _SLOT_GRAD_OUT = _lib.SLOT_GRAD_IN, _lib.SLOT_GRAD_OUT
_KEEP_REGIONS = 256     # region runs whose calls a later backward may name
_TENSOR_PACK = [p.pack_into for p in _lib.TENSOR_PACK]

# the region being traced (see the module's docstring)
_open: list[int] = []
_table: list[Any] = []
_rows: list[torch.Tensor] = []
_caps: list[torch.Tensor] = []
_tok: list[torch.Tensor] = []          # the region's token, once a hook wants it
_nev: list[int] = [0]                  # events tabled so far in the region
_hooks: list[Any] = []                 # tensor, hook, ...: registered as the region ends
_leaves: list[torch.Tensor] = []       # leaf tensors whose gradient a call wants
_leafmeta: list[int] = []              # for each: ordinal, slot kind, index
_host: list[torch.Tensor] = []         # host tensors whose stats are still to compute
_hlev: list[int] = []                  # their levels
_hrecs: list[torch.Tensor] = []        # the region's host_stats results, by chunk
_hsize = [0]                           # their elements, as far as known
_dyn = [False]                         # the table has per-tensor entries (_put)
# A host_stats op takes the pending tensors when they are this many or this
# large: few ops (each call costs ~20 us), and a bounded number of bytes
# kept alive for it in a model whose activations would be freed sooner.
_HOST_CHUNK = 256
_HOST_ELEMS = 1 << 22
_META = 8                              # int64 per event in a plan's meta (_plan)
_ROW_NONE, _ROW_DEV, _ROW_HOST = 0, 1, 2   # a tensor's stats in the table: none, a
                                           # device row of `stats`, a host summary

# probe id -> probe, for the op (its arguments are tensors and ints)
_probes: dict[int, weakref.ref[Any]] = {}
_pids = itertools.count(1)


def _dtype_codes() -> dict[torch.dtype, int]:
    lib = _lib.load()
    codes = {}
    for name in dir(torch):
        dt = getattr(torch, name)
        if isinstance(dt, torch.dtype) and dt not in codes:
            codes[dt] = lib.tm_dtype_from_name(str(dt).encode())
    return codes


_DTYPES = _dtype_codes()


# probe id -> probe, as traced code finds it (one source for every node:
# no aliasing guards); while the probe is open
_live: dict[int, Any] = {}
# id(module) -> module, for each module whose forward a probe wraps: the
# traced code's way to the module (forward_traced)
_modules: dict[int, Any] = {}
# id(fn) -> fn, the class forwards that wrapped forwards call: the traced
# code's way to them, one source (one guard on its code) per class forward
# however many modules share it.  A function from _static's constants
# cannot be traced; type(module).forward would make dynamo guard that the
# modules of one class have the same class, a lambda per module.  Never
# dropped: a class's function lives as long as its class, and kept here
# its id names no other.
_fns: dict[int, Any] = {}


def add_module(module: Any, fn: Any) -> None:
    _modules[id(module)] = module
    if fn is not None:
        _fns[id(fn)] = fn


def drop_module(mid: int) -> None:
    _modules.pop(mid, None)


def register(probe: Any) -> int:
    """The id by which compiled regions name probe: the how-manieth probe
    of this process it is, not an address, so that the graph that names it
    is the same in the next run of the program and inductor's caches on
    disk find it."""
    pid = next(_pids)
    _probes[pid] = weakref.ref(probe)
    _live[pid] = probe
    return pid


def unregister(pid: int) -> None:
    _probes.pop(pid, None)
    _live.pop(pid, None)


def _grad_traced(pid: int, tok: torch.Tensor, ordinal: int, slot_kind: int, index: int,
                 host: bool, g: torch.Tensor) -> None:
    """A gradient hook of a traced call (compiled into the backward)."""
    dev = g.device
    shape = list(g.shape)
    if len(shape) > _MAX_RANK:
        shape = shape[:_MAX_RANK - 1] + [-1]
    meta = [ordinal, slot_kind, index, _DTYPES.get(g.dtype, 0),
            0 if dev.type == "cpu" else 1 if dev.type == "cuda" else 2,
            dev.index if dev.index is not None else 0, g.numel(), len(shape)]
    if host and dev.type == "cpu":
        torch.ops.tensormorph.grad(g.detach(), tok, pid, meta + shape, True)
    else:
        torch.ops.tensormorph.grad(device_stats(g.detach(), 2), tok, pid, meta + shape, False)


def _grad_hooks(pid: int, ordinal: int, tensors: Any, slot_kind: int, host: bool) -> None:
    if not torch.is_grad_enabled():
        return
    for j in range(len(tensors)):
        x = tensors[j]
        if x.requires_grad:
            if not _tok:
                _tok.append(torch.ops.tensormorph.begin(pid))
            if x.is_leaf:
                # a parameter handed to a module: a hook the compiled code
                # registers is registered again at each run, and each
                # reports at every later backward; leaf_grads gives it the
                # eager path's hook, one per tensor (_hook.c's GradHook)
                _leaves.append(x)
                _leafmeta.extend((ordinal, slot_kind, j))
                continue
            _hooks.append(x)
            _hooks.append(functools.partial(_grad_traced, pid, _tok[0], ordinal, slot_kind, j, host))


# lists of ints the compiled code hands its ops on every run, by key
_consts: dict[int, list[int]] = {}


def _const(*ints: int) -> int:
    """The key of a list of ints that compiled code passes an op each time
    it runs (a region's table, a chunk's slots).  Dynamo calls this while
    it traces and keeps the key as a constant (assume_constant_result): an
    int[] argument would cost each call of the op two conversions of every
    int (36 us for a 12-block model's table of 1250).  The key is a hash of
    the ints, so that a graph that inductor cached on disk in another
    process, traced there, names the same list: the trace that finds it
    in the cache registers it here."""
    data = array.array("q", ints).tobytes()
    key = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1
    key = key or 1
    if key not in _consts:
        _consts[key] = list(ints)
    return key


def _take_host() -> tuple[list[torch.Tensor], int]:
    """The pending host tensors and the key of their slots, as host_stats
    takes them; none pending after."""
    host, key = list(_host), _const(*_hlev) if _host else 0
    _host.clear()
    _hlev.clear()
    _hsize[0] = 0
    return host, key


def _host_chunk() -> None:
    _hrecs.append(torch.ops.tensormorph.host_stats(*_take_host()))


def _put_static(kind: int, nid: int, tensors: Any, slot_kind: int) -> bool:
    """A level-0 event whose sizes are all static: its tensors' entries
    (metadata only) are constants of the table, whose rows _plan packs
    once, and the tensors stay in the graph: no op keeps them alive to the
    region's end or takes them at every run.  False (nothing tabled) when
    a size is dynamic."""
    ents: list[int] = []
    for j in range(len(tensors)):
        x = tensors[j]
        shape = list(x.shape)
        for s in shape:
            # a dynamic size (a SymInt, though isinstance(s, int) holds
            # while dynamo traces) is read at run time, by host_stats
            if not torch.fx.experimental.symbolic_shapes.has_static_value(s):
                return False
        if len(shape) > _MAX_RANK:
            shape = shape[:_MAX_RANK - 1] + [-1]
        dev = x.device
        ents.extend((slot_kind, j, _DTYPES.get(x.dtype, 0),
                     0 if dev.type == "cpu" else 1 if dev.type == "cuda" else 2,
                     dev.index if dev.index is not None else 0, x.numel(), _ROW_NONE,
                     len(shape)))
        ents.extend(shape)
    _table.extend((kind, nid, 0, len(tensors), len(ents)))
    _table.extend(ents)
    return True


def _put(kind: int, nid: int, level: int, tensors: Any, slot_kind: int, host: bool) -> None:
    n = len(tensors)
    _nev[0] += 1
    if not level and n and _put_static(kind, nid, tensors, slot_kind):
        return
    if host and level < 3:
        size = 0
        for j in range(n):
            x = tensors[j]
            if x.device.type != "cpu" or x.layout != torch.strided:
                break
            numel = x.numel()
            if isinstance(numel, int):      # not a dynamic size
                size += numel
        else:
            # host tensors only (the common case): host_stats makes their
            # rows, metadata and stats, at run time from the tensors
            # themselves; the trace keeps nothing per tensor, which is less
            # Python for dynamo to trace
            _table.extend((kind, nid, level, n, 0))
            _host.extend(tensors)
            _hlev.extend((level | slot_kind << 2, n))
            _hsize[0] += size
            if len(_host) >= _HOST_CHUNK or _hsize[0] >= _HOST_ELEMS:
                _host_chunk()
            return
    # per-tensor entries: sizes, which may be dynamic (a SymInt, which
    # under dynamo passes for an int): the table is passed whole
    _dyn[0] = True
    start = len(_table)
    _table.extend((kind, nid, level, n, 0))
    for j in range(n):
        x = tensors[j]
        dev = x.device
        devtype = 0 if dev.type == "cpu" else 1 if dev.type == "cuda" else 2
        shape = list(x.shape)
        if len(shape) > _MAX_RANK:
            shape = shape[:_MAX_RANK - 1] + [-1]
        stats = _ROW_NONE
        if level and x.layout == torch.strided:
            stats = _ROW_HOST if host and devtype == 0 else _ROW_DEV
        numel = x.numel()
        _table.extend((slot_kind, j, _DTYPES.get(x.dtype, 0), devtype,
                       dev.index if dev.index is not None else 0, numel, stats, len(shape)))
        _table.extend(shape)
        if stats == _ROW_HOST:
            _host.append(x)
            _hlev.extend((level | slot_kind << 2 | j << 8, 1))
            if isinstance(numel, int):      # not a dynamic size
                _hsize[0] += numel
            if len(_host) >= _HOST_CHUNK or _hsize[0] >= _HOST_ELEMS:
                _host_chunk()
        elif stats == _ROW_DEV:
            _rows.append(device_stats(x.detach(), level))
        if stats:
            if level >= 3:
                _caps.append(x.detach().clone())
    # the header's last field: how many ints of per-tensor entries follow
    _table[start + 4] = len(_table) - start - 5


def _emit(pid: int) -> None:
    if _rows:
        dev = _rows[0].device
        stats = torch.stack([r.to(dev, torch.float64) for r in _rows])
    else:
        stats = torch.zeros((0, VEC_LEN), dtype=torch.float64)
    # the last chunk's tensors go to the flush, which computes their rows:
    # one op call, not two, for a region of fewer than _HOST_CHUNK tensors
    host, hkey = _take_host()
    if _dyn[0]:
        table, plan = list(_table), 0
    else:
        table, plan = [], _const(*_table)
    caps = list(_caps)
    hrecs = list(_hrecs)
    tok = _tok[0] if _tok else None
    # registered once the region's own code has run: a hook registered
    # in its middle makes dynamo lose attribute stores of objects the
    # region creates (transformers' DynamicCache layers)
    for i in range(0, len(_hooks), 2):
        _hooks[i].register_hook(_hooks[i + 1])
    _hooks.clear()
    leaves, leafmeta = list(_leaves), _const(*_leafmeta) if _leaves else 0
    _leaves.clear()
    _leafmeta.clear()
    _table.clear()
    _rows.clear()
    _caps.clear()
    _hrecs.clear()
    _tok.clear()
    _nev[0] = 0
    _dyn[0] = False
    torch.ops.tensormorph.flush(stats, table, plan, pid, caps, tok, hrecs, host, hkey)
    if leaves:
        torch.ops.tensormorph.leaf_grads(tok, pid, leaves, leafmeta)


def _snapshot(pid: int, nid: int, args: Any, kwargs: Any) -> None:
    """The region's entry, kept for an eager re-run (tensormorph::snap): its
    tensor arguments; the op adds the RNG state and the module's buffers.
    A region called with other arguments records that it cannot re-run."""
    ts: list[Any] = []
    ok = True
    for a in args:
        if isinstance(a, torch.Tensor):
            ts.append(a)
        else:
            ok = False
    names = []
    for k, v in kwargs.items():
        if v is None or isinstance(v, torch.Tensor):
            ts.append(v)
            names.append(k)
        else:
            ok = False
    if ok:
        torch.ops.tensormorph.snap(pid, nid, ts, len(args), ",".join(names))
    else:
        torch.ops.tensormorph.snap(pid, nid, [], -1, "")


def region_call(probe: Any, nid: int, level: int, inner: Any, args: Any, kwargs: Any,
                module: Any = None) -> Any:
    """An observed call of node nid at level, traced: its events go to the
    region's table.  inner is called with module first unless it is None
    (a bound method)."""
    outer = not _open
    _open.append(nid)
    pid = probe._cid
    host = not probe._force_dev
    if outer and probe._rerun_snap:
        _snapshot(pid, nid, args, kwargs)
    if level < 1:
        ins = []
    elif not kwargs and len(args) == 1 and isinstance(args[0], torch.Tensor):
        ins = [args[0]]         # the common call: less Python to trace
    else:
        ins = flatten_call(args, kwargs, _MAX_TENSORS)
    if level >= 2:
        _grad_hooks(pid, _nev[0], ins, _SLOT_GRAD_IN, host)
    _put(_EV_ENTER, nid, level, ins, _SLOT_IN, host)
    out = inner(*args, **kwargs) if module is None else inner(module, *args, **kwargs)
    outs = flatten(out, _MAX_TENSORS)
    _put(_EV_EXIT, nid, level, outs, _SLOT_OUT, host)
    if level >= 2:
        _grad_hooks(pid, _nev[0] - 1, outs, _SLOT_GRAD_OUT, host)
    _open.pop()
    if outer:
        _emit(pid)
    return out


def _static(fwd: Any) -> tuple[int, int, int, int, int]:
    """What the traced path needs of a Forward that stays the same while it
    is set: the probe's id, the module's, the node's id, the key in _fns of
    the class's forward it calls (else 0: fwd._tm_inner) and whether it is
    bound.  Dynamo calls this while it traces and keeps the result as a
    constant (it is marked assume_constant_result once dynamo is imported),
    guarding only fwd's identity, which it guards anyway (a module's
    forward found in its instance dictionary: torch/_dynamo's
    guard_to_detect_forward_monkeypatching): each value read as an
    attribute would be a guard of its own, evaluated on every call of the
    compiled code (eight per module).  What may change -- the level,
    whether the node is observed, a release -- is fwd._tm_mode, one
    guarded int."""
    node = fwd._tm_node
    bound = fwd._tm_bound
    # (a function from a constant cannot be traced: dynamo guards it)
    cls = node.fn is not None and not (bound and fwd.__name__ != "forward")
    return node.pid, node.mid, node.id, id(node.fn) if cls else 0, bound


def _mark_static() -> None:
    torch._dynamo.assume_constant_result(_static)
    torch._dynamo.assume_constant_result(_const)
    _inductor_config()


# the probe's ops: those registered as ordered effects (below), and all
_EFFECTS = ("flush", "begin", "grad", "snap", "leaf_grads")
_OPS = (*_EFFECTS, "host_stats")


def _inductor_config() -> None:
    """What inductor must be told of the probe's ops.

    CUDA graphs (mode="reduce-overhead"): the ops are host code, tagged
    cudagraph_unsafe, so that inductor's graph partitioning runs them
    between the captured graphs.  But an ordered effect reaches inductor
    wrapped in with_effects, whose node hides the tag from it: flush would
    be captured, read the stats while the stream captures, and never run on
    a replay.  custom_should_partition_ops names them to it; without CUDA
    graphs no op is captured, so this changes nothing there.

    Caches: inductor keeps a graph in its caches on disk only if each higher
    order op in it says it may be cached, and with_effects -- how an
    ordered effect such as the probe's flush is kept in the graph -- does
    not by default: every run of a probed program would compile from
    cold (a 3-block MLP, its second run: 7.1 s with the probe, 3.8 s
    alone).  The probe's ops may be cached: their arguments are tensors,
    and ints that name the same thing in every run of the program (the
    probe by its ordinal, tables by their hash).  Inductor's other checks
    stay (a torchbind object, which with_effects may also carry, is still
    not cached)."""
    import torch._inductor.config as icfg
    parts = getattr(icfg, "custom_should_partition_ops", None)
    if isinstance(parts, list):
        parts.extend(n for n in (f"tensormorph::{o}" for o in _OPS) if n not in parts)
    icfg.unsafe_marked_cacheable_functions.setdefault(
        "torch.ops.higher_order.with_effects", torch.__version__)


def forward_traced(fwd: Any, args: Any, kwargs: Any) -> Any:
    """A probe's Forward (_hook.c's, or probe.py's _PyForward) called in
    code dynamo traces.  It reads fwd's mode (the one guarded value per
    module, see _static) and its constants, never the Forward's probe and
    module: the probe is reached through _live and the module through
    _modules or the call's arguments (one local path to each, see the
    module's docstring)."""
    mode = fwd._tm_mode
    if mode < 0:                                        # released
        if fwd._tm_bound:
            return type(args[0]).forward(*args, **kwargs)
        return fwd._tm_inner(*args, **kwargs)
    pid, mid, nid, fid, bound = _static(fwd)
    probe = _live.get(pid)
    if bound:
        module, args = args[0], args[1:]
        if id(module) != mid:                           # a copy
            return type(module).forward(module, *args, **kwargs)
    elif probe is None:
        return fwd._tm_inner(*args, **kwargs)
    else:
        module = _modules[mid]
    if fid:
        fn = _fns[fid]
    else:
        fn = fwd._tm_inner              # an instance's own forward, a Lightning step
        module = None
    if probe is None or probe._closed or not mode & 1:
        return fn(*args, **kwargs) if module is None else fn(module, *args, **kwargs)
    return region_call(probe, nid, mode >> 1, fn, args, kwargs, module)


def traced_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Forward.__call__ as dynamo sees it (_hook.c's set_trace_call)."""
    if not torch.compiler.is_compiling():
        return self(*args, **kwargs)        # an explicit __call__: the C path
    return forward_traced(self, args, kwargs)


# Host code (a host read, the recorder): inductor's graph partitioning runs
# them between CUDA graphs (mode="reduce-overhead") instead of giving up on
# capturing the graph; the stats they read are the captured partition's
# static outputs, filled on each replay.
_TAGS = (torch.Tag.cudagraph_unsafe,) if hasattr(torch.Tag, "cudagraph_unsafe") else ()


def _probe(pid: int) -> Any:
    ref = _probes.get(pid)
    p = ref() if ref is not None else None
    return p if p is not None and not p._closed else None


# The operators are defined with torch.library.Library rather than
# torch.library.custom_op: the latter wraps each call in an autograd
# function, which costs about 50 us a call at run time (measured: 66 us
# against 18 us for an op taking 50 tensors), and none of them has a
# gradient.
_LIB = torch.library.Library("tensormorph", "DEF")
_LIB.define("flush(Tensor stats, int[] table, int plan, int probe, Tensor[] captures, "
            "Tensor? token, Tensor[] hrecs, Tensor[] host, int hkey) -> ()", tags=_TAGS)
_LIB.define("host_stats(Tensor[] xs, int levels) -> Tensor")
_LIB.define("begin(int probe) -> Tensor", tags=_TAGS)
_LIB.define("leaf_grads(Tensor token, int probe, Tensor[] leaves, int meta) -> ()", tags=_TAGS)
_LIB.define("grad(Tensor stats, Tensor token, int probe, int[] meta, bool raw) -> ()", tags=_TAGS)
_LIB.define("snap(int probe, int node, Tensor?[] tensors, int npos, str kwnames) -> ()",
            tags=_TAGS)


def _impl(name: str) -> Any:
    def reg(fn: Any) -> Any:
        _LIB.impl(name, fn, "CompositeExplicitAutograd")
        return fn
    return reg


def _fake(name: str) -> Any:
    def reg(fn: Any) -> Any:
        torch.library.register_fake("tensormorph::" + name, fn, lib=_LIB)
        return fn
    return reg


def _lost(what: str) -> None:
    """Compiled code names a constant no trace in this process made (code
    compiled ahead of time, loaded without dynamo tracing it here): what it
    recorded cannot be read."""
    if not _lost_said:
        _lost_said.append(what)
        warnings.warn(f"tensormorph probe: a compiled region's {what} is unknown in this "
                      "process (compiled elsewhere and loaded without tracing): its events "
                      "are not recorded", RuntimeWarning, stacklevel=2)


_lost_said: list[str] = []


@_impl("flush")
def flush(stats: torch.Tensor, table: list[int], plan: int, probe: int,
          captures: list[torch.Tensor], token: torch.Tensor | None,
          hrecs: list[torch.Tensor], host: list[torch.Tensor], hkey: int) -> None:
    """A compiled region ran: its events to the probe (run time).  The
    table is _consts[plan] unless plan is 0 (a table with dynamic sizes);
    host and hkey: the region's last chunk of host tensors, as host_stats
    takes them, whose rows follow hrecs'."""
    p = _probe(probe)
    if p is None:
        return
    if host:
        hrecs = [*hrecs, host_stats(host, hkey)]
    if plan:
        got = _consts.get(plan)
        if got is None:
            _lost("table")
            return
        table = got
    p._compiled_flush(stats, table, captures, token, hrecs, plan)


@_fake("flush")
def _flush_fake(stats: torch.Tensor, table: list[int], plan: int, probe: int,
                captures: list[torch.Tensor], token: torch.Tensor | None,
                hrecs: list[torch.Tensor], host: list[torch.Tensor], hkey: int) -> None:
    return None


_TSIZE = _lib.TENSOR_SIZE
_HDR = _lib.TENSOR_PACK[0]
_STATS_OFF = _lib.TENSOR_STATS_OFF
_HAVE_OFF = _lib.OFF_HAVE
_HAVE_HIST_OFF = _lib.OFF_HAVE_HIST
_LEVEL_OFF = _lib.RecTensor.level.offset
_DONE_OFF = _lib.RecTensor.done.offset
_stats_fn: list[Any] = []


def _c_stats_addr() -> int:
    """tm_recorder_stats's address, for C."""
    if len(_stats_fn) < 2:
        _stats_fn[:] = [_c_stats(), ctypes.cast(_c_stats(), ctypes.c_void_p).value or 0]
    return _stats_fn[1]


def _c_stats() -> Any:
    if not _stats_fn:
        _stats_fn.append(_lib.load().tm_recorder_stats_raw)
    return _stats_fn[0]


@_impl("host_stats")
def host_stats(xs: list[torch.Tensor], key: int) -> torch.Tensor:
    """Host tensors' summaries (struct tm_rec_tensor rows, uint8) as the
    batch takes them: metadata from the tensors, the slots from `levels`
    (_consts[key], pairs: level | slot kind << 2 | first slot index << 8,
    and how many tensors of one event take the next indexes), stats
    computed by libtensormorph as eager mode computes them.  A tensor
    passed again (a module's output is the next one's input) is reduced
    once."""
    n = len(xs)
    out = torch.zeros((n, _TSIZE), dtype=torch.uint8)
    levels = _consts.get(key)
    if levels is None:
        _lost("slots")
        return out
    hook = _lib.load_hook()
    if hook is not None and hasattr(hook, "host_stats"):
        # the same, in one C call (_hook.c's host_stats)
        if n:
            hook.host_stats(list(xs), levels, _DTYPES, out.data_ptr(), _c_stats_addr())
        return out
    buf = out.numpy()
    hold = []
    seen: dict[tuple[int, int, int, int], int] = {}
    dst, src = [], []
    codes = []
    for k in range(0, len(levels), 2):
        code = levels[k]
        codes += range(code, code + (levels[k + 1] << 8), 256)
    for i in range(n):
        x = xs[i]
        code = codes[i]
        lv = min(code & 3, 2)
        dtype = _DTYPES.get(x.dtype, 0)
        shape = x.shape
        rank = len(shape)
        if rank > _MAX_RANK:
            shape = [*shape[:_MAX_RANK - 1], -1]
            rank = _MAX_RANK
        numel = x.numel()
        ptr = 0
        if lv:
            if x.is_contiguous():
                key = (x.data_ptr(), numel, dtype, lv)
                j = seen.get(key)
                if j is None:
                    seen[key] = i
                    ptr = key[0]
                else:
                    dst.append(i)
                    src.append(j)
                    lv = 0
            else:
                y = x.contiguous()
                hold.append(y)
                ptr = y.data_ptr()
        _TENSOR_PACK[rank](buf, i * _TSIZE, ptr, numel, 0, code >> 8, 0, (code >> 2) & 63,
                           dtype, rank, 0, lv, 0, 0, 0, *shape)
    _c_stats()(None, ctypes.c_void_p(out.data_ptr()), ctypes.c_size_t(n))
    if dst:
        buf[dst, _STATS_OFF:] = buf[src, _STATS_OFF:]
        buf[dst, _HAVE_OFF:_HAVE_OFF + 4] = buf[src, _HAVE_OFF:_HAVE_OFF + 4]
        buf[dst, _HAVE_HIST_OFF] = buf[src, _HAVE_HIST_OFF]
    # as the batch holds them: no address, nothing left to compute
    buf[:, 0:8] = 0
    buf[:, _LEVEL_OFF] = 0
    buf[:, _DONE_OFF] = 0
    return out


@_fake("host_stats")
def _host_stats_fake(xs: list[torch.Tensor], key: int) -> torch.Tensor:
    return torch.empty((len(xs), _TSIZE), dtype=torch.uint8, device="cpu")


_region_runs = [0]


@_impl("begin")
def begin(probe: int) -> torch.Tensor:
    """A compiled region whose gradients are wanted starts: its token."""
    _region_runs[0] += 1
    return torch.tensor(_region_runs[0], dtype=torch.int64)


@_fake("begin")
def _begin_fake(probe: int) -> torch.Tensor:
    return torch.empty((), dtype=torch.int64)


@_impl("grad")
def grad(stats: torch.Tensor, token: torch.Tensor, probe: int, meta: list[int],
         raw: bool) -> None:
    """A gradient a traced call wanted was computed (run time); raw: stats
    is the gradient itself, a host tensor whose stats C computes."""
    p = _probe(probe)
    if p is not None:
        run_grad(p, stats, int(token), meta, raw)


@_fake("grad")
def _grad_fake(stats: torch.Tensor, token: torch.Tensor, probe: int, meta: list[int],
               raw: bool) -> None:
    return None


@_impl("leaf_grads")
def leaf_grads(token: torch.Tensor, probe: int, leaves: list[torch.Tensor], meta: int) -> None:
    """The region that just ran (flush numbered its calls under token) wants
    the gradients of these leaf tensors (run time): the eager path's hooks
    on them, for those calls."""
    p = _probe(probe)
    if p is None:
        return
    m = _consts.get(meta)
    calls = p._region_calls.get(int(token))
    if m is None:
        _lost("table")
        return
    if calls is None:
        return
    for k, x in enumerate(leaves):
        ordinal, slot_kind, index = m[3 * k:3 * k + 3]
        nid, call, _ = calls[ordinal]
        p._leaf_grad_hook(x, p._by_id[nid], call, slot_kind, index)


@_fake("leaf_grads")
def _leaf_grads_fake(token: torch.Tensor, probe: int, leaves: list[torch.Tensor],
                     meta: int) -> None:
    return None


@_impl("snap")
def snap(probe: int, node: int, tensors: list[torch.Tensor | None], npos: int,
         kwnames: str) -> None:
    """A region whose re-run a debugger may ask for begins (run time)."""
    p = _probe(probe)
    n = p._by_id.get(node) if p is not None else None
    if n is None:
        return
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    bufs = [(b, b.detach().clone()) for b in n.module.buffers()]
    p._snaps[node] = (list(tensors), npos, kwnames.split(",") if kwnames else [],
                      torch.get_rng_state(), cuda, bufs)


@_fake("snap")
def _snap_fake(probe: int, node: int, tensors: list[torch.Tensor | None], npos: int,
               kwnames: str) -> None:
    return None


try:
    from torch._library.effects import EffectType
    for _name in _EFFECTS:
        _LIB._register_effectful_op("tensormorph::" + _name, EffectType.ORDERED)
except (ImportError, AttributeError):   # older torch: kept as ops without outputs
    pass


def run_grad(p: Any, stats: torch.Tensor, token: int, meta: list[int], raw: bool) -> None:
    """A BWD event, as Probe._on_grad makes it, for the forward call the
    region run `token` numbered."""
    calls = p._region_calls.get(token)
    ordinal, slot_kind, index, dtype, devtype, devidx, numel, rank = meta[:8]
    if calls is None or ordinal >= len(calls):
        return      # a run older than _KEEP_REGIONS: nothing is made up
    nid, call, level = calls[ordinal]
    row = None if raw else stats.to("cpu", torch.float64).tolist()
    t = time.monotonic_ns() - p._t0
    if p._nev >= p._bev or p._nt + 1 > p._bt:
        p._submit()
    idx = p._nt
    if raw:
        # a host gradient: its stats computed by C as eager mode's are
        y = stats if stats.is_contiguous() else stats.contiguous()
        _TENSOR_PACK[rank](p._tbuf, idx * _TSIZE, y.data_ptr(), numel, 0, index, devidx,
                           slot_kind, dtype, rank, devtype, min(level, 2), 0, 0, 0,
                           *meta[8:8 + rank])
        _c_stats()(None, ctypes.c_void_p(p._taddr + idx * _TSIZE), ctypes.c_size_t(1))
        ctypes.c_uint64.from_buffer(p._tbuf, idx * _TSIZE).value = 0
    else:
        _TENSOR_PACK[rank](p._tbuf, idx * _TSIZE, 0, numel, 0, index, devidx, slot_kind,
                           dtype, rank, devtype, 0, 0, 0, 0, *meta[8:8 + rank])
        p._pack_stats(idx, row, level)
    _lib.EVENT_STRUCT.pack_into(p._evbuf, p._nev * 48, p.step_count, t, t, t, nid, call, 1,
                                _EV_BWD, _lib.PHASE_BWD, level, 0)
    p._nt = idx + 1
    p._nev = nev = p._nev + 1
    p._bnev.value = nev
    if p._live is not None and p._live.value & 1:
        p._submit_live()


_plans: dict[Any, tuple[Any, int, str, int, Any]] = {}


def _static_rows(table: list[int], i: int, n: int, rows: bytearray) -> int:
    """The rows of an event's n per-tensor entries at table[i:] when none
    has stats (level 0, _put_static), appended to rows; their first row's
    index there, else -1 (nothing appended)."""
    j, packed = i, []
    for _ in range(n):
        slot_kind, slot_index, dtype, devtype, devidx, numel, has, rank = table[j:j + 8]
        if has != _ROW_NONE:
            return -1
        packed.append((rank, (0, numel, 0, slot_index, devidx, slot_kind, dtype, rank, devtype,
                              0, 0, 0, 0, *table[j + 8:j + 8 + rank])))
        j += 8 + rank
    first = len(rows) // _TSIZE
    rows.extend(bytes(n * _TSIZE))
    for k, (rank, fields) in enumerate(packed):
        _TENSOR_PACK[rank](rows, (first + k) * _TSIZE, *fields)
    return first


def _plan(table: list[int], plan: int = 0) -> tuple[Any, int, str, int, Any]:
    """A region's table read once (a region runs the same table every
    time): _META int64 per event (kind, node, level, tensors, per-tensor
    ints, their offset in the table, the index of an EXIT's ENTER, else -1,
    the index of its first constant row, else -1), the number of events,
    the levels it observes its calls at ("1,2"), and the address of the
    constant rows (level-0 events of static sizes: their tensors' rows
    are the same at every run) with the buffer that holds them.
    plan: the table's key in _consts, else 0."""
    key: Any = plan or tuple(table)
    got = _plans.get(key)
    if got is None:
        meta = array.array("q")
        open_: dict[int, list[int]] = {}
        seen = set()
        rows = bytearray()
        i, e, end = 0, 0, len(table)
        while i < end:
            kind, nid, level, n, m = table[i:i + 5]
            if kind == _EV_ENTER:
                open_.setdefault(nid, []).append(e)
                pair = -1
            else:
                q = open_.get(nid)
                pair = q.pop() if q else -1
            srow = _static_rows(table, i + 5, n, rows) if m and n and level < 3 else -1
            meta.extend((kind, nid, level, n, m, i + 5, pair, srow))
            seen.add(level)
            e += 1
            i += 5 + m
        cbuf = (ctypes.c_uint8 * len(rows)).from_buffer(rows) if rows else None
        got = (meta, e, ",".join(str(lv) for lv in sorted(seen)),
               ctypes.addressof(cbuf) if cbuf is not None else 0, cbuf)
        if len(_plans) > 1024:
            _plans.clear()
        _plans[key] = got
    return got


def _first_event(p: Any, node: Any, levels: str) -> None:
    """A region's first event, its call counted: the regions of the step
    so far and their levels.  tmdb's `info frame` tells a compiled
    region's stop by them, `info probe` lists them (one annotation each,
    the latest has all)."""
    regs = p._compiled_regions
    step = p.step_count
    if p._compiled_step != step:
        p._compiled_step = step
        regs.clear()
    key = (node.address, levels)
    if key not in regs:
        regs.append(key)
        p._annotate_regions(regs)


def run_flush(p: Any, stats: torch.Tensor, table: list[int],
              captures: list[torch.Tensor], token: torch.Tensor | None,
              hrecs: list[torch.Tensor], plan: int = 0) -> None:
    """The events of a region that ran, into p's batch as _enter and _exit
    would have packed them: calls numbered, the step moved by a root call,
    stats from the rows of `stats` (one host read) and the summaries of
    `hrecs`, in table order.  The common events (host tensors only, a root
    call's included: it calls Probe._root_call and _first_event as this
    loop does) are packed by _hook.c's flush_events, a run of them a call:
    a region of host tensors is one call of it."""
    with sync_allowed():        # the region's one host read (and its level-3 copies)
        rows = stats.to("cpu", torch.float64).tolist() if stats.numel() else []
        caps = [c.to("cpu").contiguous() for c in captures]
    if hrecs:
        hcat = hrecs[0] if len(hrecs) == 1 else torch.cat(hrecs)
        haddr = hcat.data_ptr()
        # its bytes as ctypes sees them: 2 us, where .numpy() costs 40
        hb = memoryview((ctypes.c_uint8 * hcat.numel()).from_address(haddr)).cast("B")
    else:
        hb, haddr = memoryview(b""), 0
    sofs, hofs, hhofs = _STATS_OFF, _HAVE_OFF, _HAVE_HIST_OFF
    tbuf = p._tbuf
    h = 0
    t = time.monotonic_ns() - p._t0
    nodes = p._by_id
    meta, nevents, levels, saddr, _keep = _plan(table, plan)
    callv = array.array("q", bytes(8 * nevents))
    hook = _lib.load_hook()
    fast = getattr(hook, "flush_events", None) if hook is not None else None
    if getattr(hook, "META_INTS", None) != _META:   # a build of another layout
        fast = None
    maddr, caddr = meta.buffer_info()[0], callv.buffer_info()[0]
    ev_pack, t_pack, tsize = _lib.EVENT_STRUCT.pack_into, _TENSOR_PACK, _lib.TENSOR_SIZE
    r = c = 0
    evbuf, bnev, live, phase = p._evbuf, p._bnev, p._live, _lib.PHASE_FWD
    step = p.step_count
    e = 0
    while e < nevents:
        if fast is not None:
            e, h = fast(p, maddr, nevents, e, nodes, haddr, h, t, caddr, _first_event, levels,
                        saddr)
            if e >= nevents:
                break
            step = p.step_count
        kind, nid, level, n, m, i, pair, _ = meta[_META * e:_META * e + _META]
        node = nodes[nid]
        is_root = node.is_root
        if kind == _EV_ENTER:
            # a root call as Probe._enter counts it (the step, the
            # micro-batch); its arguments stayed in the compiled code: a
            # serving probe reads its batch from the worker
            root = is_root and p._root_call((), None)
            step = p.step_count
            node.depth += 1
            if node.epoch != step:
                node.epoch = step
                node.count = 0
            call = node.count = node.count + 1
            if root:
                p._micro = call
            callv[e] = call
            tend = 0
        else:
            call = callv[e] = callv[pair] if pair >= 0 else 0
            node.depth -= 1
            tend = t
        if not e:
            _first_event(p, node, levels)
            step = p.step_count
        if p._nev >= p._bev or p._nt + n > p._bt:
            p._submit()
        base = p._nt
        if not m:
            if n:
                # host tensors only: their rows as host_stats made them
                tbuf[base * tsize:(base + n) * tsize] = hb[h * tsize:(h + n) * tsize]
                h += n
        else:
            for j in range(n):
                slot_kind, slot_index, dtype, devtype, devidx, numel, has, rank = table[i:i + 8]
                shape = table[i + 8:i + 8 + rank]
                i += 8 + rank
                idx = base + j
                off = idx * tsize
                t_pack[rank](tbuf, off, 0, numel, 0, slot_index, devidx, slot_kind,
                             dtype, rank, devtype, 0, 0, 0, 0, *shape)
                if has == _ROW_HOST:
                    src = h * tsize
                    tbuf[off + hofs:off + hofs + 4] = hb[src + hofs:src + hofs + 4]
                    tbuf[off + hhofs] = hb[src + hhofs]
                    tbuf[off + sofs:off + tsize] = hb[src + sofs:src + tsize]
                    h += 1
                elif has:
                    p._pack_stats(idx, rows[r], level)
                    r += 1
                if has:
                    if level >= 3:
                        p._put_capture(idx, caps[c])
                        c += 1
        nev = p._nev
        ev_pack(evbuf, nev * 48, step, t, t, tend, nid, call, n, kind, phase, level, 0)
        p._nt = base + n
        p._nev = nev = nev + 1
        bnev.value = nev
        if is_root and kind != _EV_ENTER:
            p._root_depth -= 1
        if live is not None and live.value & 1:
            p._submit_live()
        e += 1
    end = nevents
    if p._srv and p._rerun_snap and end and p._lib.tm_server_rerun(p._srv):
        rerun(p, table[1])
    if token is not None:
        runs = p._region_calls
        runs[int(token)] = [(meta[_META * k + 1], callv[k], meta[_META * k + 2])
                            for k in range(nevents)]
        while len(runs) > _KEEP_REGIONS:
            del runs[next(iter(runs))]


def rerun(p: Any, nid: int) -> None:
    """tmdb's rerun: the region that just ran, again, eagerly, from its
    snapshot (tensormorph::snap): its events are the eager hooks', so the
    debugger stops inside it (the server stops at its first event).  The
    annotation "rerun" ([count, region], or [count, "", why not]) comes
    first; tmdb stops at the first event after it.  The RNG state and the
    module's buffers are the entry's while it runs and are put back after."""
    p._reruns += 1
    count = str(p._reruns)
    node = p._by_id.get(nid)
    snap = p._snaps.get(nid)
    why = None
    if node is None or snap is None:
        why = ("no snapshot of this region's entry: the probe takes one while a debugger "
               "is attached, from the region's next compilation on")
    elif snap[1] < 0:
        why = "the region's arguments are not all tensors"
    if why is not None:
        p._annotate("rerun", [count, "", why])
        return
    tensors, npos, names, rng, cuda, bufs = snap
    args = tensors[:npos]
    kwargs = dict(zip(names, tensors[npos:], strict=True))
    now_rng = torch.get_rng_state()
    now_cuda = torch.cuda.get_rng_state_all() if cuda is not None else None
    now_bufs = [(b, b.detach().clone()) for b, _ in bufs]
    p._annotate("rerun", [count, node.address])
    module = node.module
    p._rerunning = True
    try:
        torch.set_rng_state(rng)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)
        with torch.no_grad():
            for b, v in bufs:
                b.copy_(v)
            torch.compiler.disable(lambda: module(*args, **kwargs))()
    except Exception as e:      # the re-run's own error: the compiled run goes on
        p._annotate("rerun-error", [count, f"{type(e).__name__}: {e}"])
    finally:
        p._rerunning = False
        p._annotate("rerun", [count])       # ended: info frame tells its events apart
        torch.set_rng_state(now_rng)
        if now_cuda is not None:
            torch.cuda.set_rng_state_all(now_cuda)
        with torch.no_grad():
            for b, v in now_bufs:
                b.copy_(v)


def _discover_ctx(ctx: Any) -> None:
    vt = ctx.get_local("module")._i_will_not_complain_if_bc_breaks_VariableTracker()
    mod = getattr(vt, "value", None)
    if not isinstance(mod, torch.nn.Module):
        return
    for ref in list(_probes.values()):
        p = ref()
        if p is not None and not p._closed and not p._active and p._discovering:
            known = len(p._nodes)
            p._discover(mod)
            if len(p._nodes) != known:
                # dynamo has read the forwards it guards on before this
                # call: trace the frame again with the probe's
                raise torch._dynamo.exc.RestartAnalysis(
                    restart_reason="tensormorph probe: a model found")


def discover_traced(module: Any) -> None:
    """A module called in code dynamo traces (a compiled function that calls
    the model): discovered now, at trace time, as an eager call would be, so
    that the forward dynamo reads next is the probe's."""
    from torch._dynamo.comptime import comptime
    comptime(_discover_ctx)


def traced_discover(self: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
    """_hook.c's Discover.__call__ as dynamo sees it (set_discover_trace_call)."""
    if not torch.compiler.is_compiling():
        return self(module, *args, **kwargs)    # an explicit __call__: the C path
    discover_traced(module)
    return self.__wrapped__(module, *args, **kwargs)


def _dynamo_loaded() -> Any:
    """torch._dynamo when it is imported, else None (never imports it)."""
    return sys.modules.get("torch._dynamo")


_after_dynamo: list[Any] = []


class _DynamoImport(importlib.abc.MetaPathFinder):
    """Runs _after_dynamo's callbacks right after torch._dynamo is imported.
    Importing it takes about a second, which a run that never compiles
    should not pay for the probe; a run that compiles imports it anyway."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch._dynamo":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        orig = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            orig(module)
            run, _after_dynamo[:] = list(_after_dynamo), []
            for fn in run:
                fn()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_finder = _DynamoImport()


def when_dynamo(fn: Any) -> None:
    """fn() now if torch._dynamo is imported, else just after it is."""
    if _dynamo_loaded() is not None:
        fn()
        return
    _after_dynamo.append(fn)
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def patch_optimized_module(is_ours: Any) -> Any:
    """Applies _patch_optimized_module when torch._dynamo is (or once it
    is) imported; returns the undo."""
    undos: list[Any] = []
    live = [True]

    def apply() -> None:
        if live[0]:
            undos.append(_patch_optimized_module(is_ours))

    def undo() -> None:
        live[0] = False
        for u in undos:
            if u is not None:
                u()

    when_dynamo(apply)
    return undo


def _patch_optimized_module(is_ours: Any) -> Any:
    """torch.compile(model) of a model whose forward the probe wrapped:
    OptimizedModule asks dynamo's trace rules about `model.forward`, which
    insist on a Python function's source file (a Forward has none) and
    fail.  It is asked about the class's forward instead, and told to trace
    from a frame around model's call (wrap_top_frame): by default dynamo
    runs model.__call__ itself eagerly and traces the first Python frame
    under it, which a C Forward would make the probe's _enter, not the
    model's forward.  Returns the undo, or None when torch has no
    OptimizedModule."""
    ef = getattr(_dynamo_loaded(), "eval_frame", None)
    cls = getattr(ef, "OptimizedModule", None)
    orig = getattr(cls, "_initialize", None)
    if orig is None:
        return None

    def _initialize(self: Any) -> None:
        d = getattr(self._orig_mod, "__dict__", {})
        fwd = d.get("forward")
        if fwd is None or not is_ours(fwd):
            return orig(self)
        del d["forward"]
        try:
            with torch._dynamo.config.patch(wrap_top_frame=True):
                return orig(self)
        finally:
            d["forward"] = fwd

    cls._initialize = _initialize

    def undo() -> None:
        if cls._initialize is _initialize:
            cls._initialize = orig
    return undo


def skip_eager_path(cls: type) -> None:
    """The probe's eager methods, which _hook.c calls from C while compiled
    code runs (a graph break's eager part): dynamo would try to compile
    each as a frame of its own, and fail on ctypes and struct.  They are
    never compiled (the traced path is traced_call and region_call).
    Done once dynamo is imported: before, nothing can trace them."""
    def skip_them() -> None:
        skip = getattr(getattr(_dynamo_loaded(), "eval_frame", None), "skip_code", None)
        if skip is None:
            return
        for name, fn in vars(cls).items():
            code = getattr(fn, "__code__", None)
            if code is not None and name.startswith("_") and not name.startswith("__"):
                skip(code)

    when_dynamo(skip_them)


def unwrap_compiled(module: Any) -> Any:
    """The module torch.compile's OptimizedModule wraps (`_orig_mod`)."""
    # an OptimizedModule exists only once dynamo is imported
    opt = getattr(_dynamo_loaded(), "eval_frame", None)
    cls = getattr(opt, "OptimizedModule", None)
    while cls is not None and isinstance(module, cls):
        module = module._orig_mod
    return module


when_dynamo(_mark_static)
