"""The PyTorch probe: module calls in, batches of events out to libtensormorph.

Each observed module's forward is wrapped (Probe._wrap says why not torch's
module hooks); a call gives an ENTER event (inputs: none at level 0, stats from
level 1) and an EXIT event (outputs: shapes and dtypes at level 0, stats from level 1).
The wrapper is _hook.c's Forward, a C function that records the common call
by itself -- a node at level 0, or one whose only argument is a tensor;
host tensors; gradient hooks -- and hands everything else (roots,
containers, kwargs, device tensors) to _enter and _exit here; without the
extension a Python function calls those for every call.
At level >= 2 gradient hooks on the call's output and input tensors give BWD
events (grad_out.N, grad_in.N), and parameters give PARAM events: a
gradient when the backward that accumulated it ends (post-accumulate-grad
hooks; read after DDP's averaging), a value after each optimizer step that
changed it.  Tensor hooks are used rather than full module backward
hooks because those wrap outputs in a custom Function that in-place ops
(ReLU(inplace=True)) then refuse: the probe must never change what runs.

A step is one training iteration (doc/manual.md, "Steps"; Probe._root_enter
decides it at each root call, _loop.py watches the optimizers, GradScaler
and the frameworks' evaluation scopes): micro-batches are the root's call
numbers, inference calls are steps of their own.  The model is the module
given, or the outermost module holding the first one called (a
LightningModule, whose step methods are then its root calls).

Events are packed into a batch buffer laid out as libtensormorph's
struct tm_rec_event / tm_rec_tensor and handed over once per step or when
the buffer fills.  CPU tensor stats are computed in C at the hook (one pass,
GIL released), because the tensor may change in place afterwards; device
tensors are reduced on their device and copied to the host once per batch.
Whether a node is observed, and at what level, is decided once per node.

Under torch.compile dynamo cannot trace that wrapper; it traces
_compiled.py's path instead (_hook.c shows it dynamo as Forward.__call__),
which computes the stats inside the graph and hands each compiled region's
events over when the region ends, numbered as _enter and _exit number them.
torch.compile's OptimizedModule is looked through as a data-parallel
wrapper is.

Hooks run on the thread that runs the model (autograd's CPU backward too);
a probe is not meant to be fed from several Python threads at once.

Live debugging (listen()): libtensormorph's wire server runs in a thread of
this process and the recorder forwards every event to it.  While a debugger
is subscribed -- one bit of a word the server shares, read per event -- each
event is handed to C as soon as it is packed, so that a breakpoint the
server evaluates pauses the model inside this very hook (the ctypes call
releases the GIL while it waits).  Without a debugger the probe batches as
when it only records.  The rest of that word counts the debugger's level and
capture requests; when it moves, node levels are looked up again.

Operation events (ops="PATTERN", _ops.py): the aten operations inside the
forwards of the modules the pattern selects, and of `main` (the code outside
every module call); off, and installing nothing, without a pattern.

Under torch.distributed (torchrun sets RANK and WORLD_SIZE; else an
initialised process group) each rank records its own trace, named by
libtensormorph from the record path ("run.tmrun" -> "run.rank1.tmrun"), and
rank 0 also writes the run manifest naming them all ("run.manifest"), so that
tmdb replays the job as one program.  A DistributedDataParallel (or
DataParallel) wrapper is looked through: `model` is the module it wraps.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import linecache
import os
import socket
import struct
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.optim.optimizer as torch_optimizer

from . import _compiled, _flight, _lib, _loop
from . import _ops as _ops_mod
from ._devstats import device_stats, sync_allowed as _sync_allowed
from ._flatten import FLATTEN_RULE, flatten, flatten_call

L1_MASK = (1 << 10) - 1
L2_MASK = (1 << 12) - 1
_COUNTS_MASK = 0b100000011111       # numel, nan, inf, posinf, neginf, zero_count
_HAVE_OFF = _lib.OFF_HAVE
_HAVE_HIST_OFF = _lib.OFF_HAVE_HIST
_EVENT_PACK = _lib.EVENT_STRUCT.pack_into
_TENSOR_PACK = [p.pack_into for p in _lib.TENSOR_PACK]
_STRIDED = torch.strided
_SLOT_PACK = struct.Struct("<H").pack_into
# elements, by level: below this, reading the data again is cheaper than
# looking the tensor up in the batch's table (_seen).  A lookup costs about
# a microsecond in _hook.c (several tensor attributes, a table entry on a
# miss) and 2-3 us in Python, hit or miss.  At level 2 most inputs and
# grad_in are hits; at level 1 a hit saves about 1.4 us at 8192 f32
# elements (testsuite/perf/stats-bench), less than the two lookups it takes.
_REUSE_MIN = (1 << 62, 1 << 16, 1024, 1024)
# elements: from here _hook.c first tries the last tensor it summarised,
# held, by identity (the same object, unchanged): in a chain of modules
# each output is the next one's input.  About three attribute reads on a
# hit, one on each summary it remembers.  A chain of leaf modules on 4x32x64
# f32, no grad, one thread, thread CPU time, level 1: 4.6 us a call without
# reuse, 3.8 with table lookups from 8192 elements, 2.9 with this alone;
# level 2: 8.3, 5.8 (table), 4.8 (this and the table).
_LAST_MIN = 4096
_now = time.monotonic_ns
_Tensor = torch.Tensor
_TSIZE = _lib.TENSOR_SIZE
# Counts for the undeclared stats call, made once: passed as c_size_t they
# match the C prototype exactly instead of relying on how libffi widens an
# int (at most TM_MAX_TENSORS tensors in an event).
_SIZES = tuple(ctypes.c_size_t(i) for i in range(65))
_MAX_RANK = _lib.TM_MAX_RANK
_MAX_TENSORS = _lib.TM_MAX_TENSORS
_EV_ENTER, _EV_EXIT, _EV_BWD, _EV_PARAM = _lib.EV_ENTER, _lib.EV_EXIT, _lib.EV_BWD, _lib.EV_PARAM
_EV_RAISE = _lib.EV_RAISE
_FWD, _BWD = _lib.PHASE_FWD, _lib.PHASE_BWD
_grad_enabled = torch.is_grad_enabled
_queue_callback = torch.autograd.Variable._execution_engine.queue_callback
_partial = functools.partial
_wref = weakref.ref


class ProbeError(RuntimeError):
    """The recorder refused something (bad path, closed, writer failure)."""


# The C fast path (_hook.c): the common module call, one-tensor event and
# gradient hook are handled there, the rest by the Python methods below,
# both on the state of these two base classes.  Without it (no compiler when pip
# installed the probe) the same fields are plain attributes and every call
# takes the Python path.
_hook = _lib.load_hook()
if _hook is not None:
    _hook.setup(torch.Tensor, torch.strided, torch.is_grad_enabled)
    # what dynamo traces in place of a Forward's C call (_compiled.py)
    _hook.set_trace_call(_compiled.traced_call)
    _hook.set_discover_trace_call(_compiled.traced_discover)
    _ProbeBase: Any = _hook.ProbeBase
    _NodeBase: Any = _hook.NodeBase
else:
    class _ProbeBase:       # noqa: B903 -- fields as in _hook.c, set by Probe
        pass

    class _NodeBase:
        __slots__ = ("id", "level", "observed", "is_root", "ops", "depth", "epoch", "count")


class _Node(_NodeBase):
    """A module node and what was decided about it once.  Its id, level,
    observed and is_root, and the call counters (depth: calls in flight;
    count: calls in step `epoch`) are _NodeBase's."""

    # pid, mid and fn are what dynamo reads of a node when it traces its
    # call (_compiled.traced_call): ints and a function, not the probe and
    # the module, which reached through every node would each cost an
    # aliasing guard (a Python lambda) per node, evaluated on every call
    __slots__ = ("address", "module", "base", "params", "own", "wrapped", "pid", "mid", "fn")

    def __init__(self, address: str, module: torch.nn.Module, level: int,
                 observed: bool) -> None:
        self.address = address
        self.module = module
        self.level = level
        self.base = level               # level the probe was configured with
        self.observed = observed
        self.id = _lib.TM_NODE_NONE
        self.is_root = False
        self.ops = False                # an op recorder follows its calls
        self.params = False             # parameter nodes registered
        self.depth = 0
        self.epoch = -1
        self.count = 0
        self.own: Any = None            # an instance forward found when wrapping
        self.wrapped: Any = None        # the probe's forward, while it is set
        self.pid = 0                    # the probe's id for compiled regions
        self.mid = id(module)
        self.fn: Any = None             # the class's forward that the wrapper calls


def _update_wrapper(wrapper: Any, fn: Any) -> None:
    """functools.update_wrapper for a wrapper that may have no __dict__
    attribute (_hook.c's Forward: see forward_getset there), though it
    keeps attributes: fn's own attributes are set one by one."""
    functools.update_wrapper(wrapper, fn, updated=())
    for k, v in getattr(fn, "__dict__", {}).items():
        setattr(wrapper, k, v)


class _PyForward:
    """Without the extension: _hook.c's Forward as a module's forward
    attribute (not bound: see forward_call there), in Python."""

    _tm_bound = 0

    def __init__(self, probe: Any, node: _Node, module: torch.nn.Module, inner: Any) -> None:
        self._tm_probe = probe
        self._tm_node: Any = node
        self._tm_module: Any = module
        self._tm_inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            # traced by dynamo: as _hook.c's Forward (_compiled.py)
            return _compiled.forward_traced(self, args, kwargs)
        probe, node = self._tm_probe, self._tm_node
        if probe is None or probe._closed or node.wrapped is None:
            return self._tm_inner(*args, **kwargs)      # released
        # looked up per call: an op recorder replaces them
        start, call = probe._enter(node, args, kwargs)
        try:
            out = self._tm_inner(*args, **kwargs)
        except BaseException as exc:
            probe._raise(node, start, call, exc)        # the call still ends
            raise
        probe._exit(node, start, call, out)
        return out

    @property
    def _tm_mode(self) -> int:
        """As _hook.c's Forward: level << 1 | observed, -1 once released."""
        node = self._tm_node
        if self._tm_probe is None or node is None:
            return -1
        return node.level * 2 + (1 if node.observed else 0)

    def release(self) -> None:
        self._tm_probe = self._tm_node = self._tm_module = None

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        import copy
        return copy.deepcopy(self._tm_inner, memo)

    def __reduce__(self) -> Any:
        # as a bound method pickles: unpickled, the class's forward
        owner = self._tm_module if self._tm_module is not None else self._tm_inner.__self__
        return getattr, (owner, "forward")


def _annot_values(values: Any, count: int | None) -> tuple[list[bytes], Any, int, int]:
    """An annotation's values as libtensormorph takes them: (kept, their
    C array, how many, the count)."""
    # cut by bytes, then back to whole characters: a cut through a UTF-8
    # sequence drops that character, not the id
    kept = [str(v).encode("utf-8", "replace")[:_lib.TM_ANNOT_MAX_VALUE - 1]
            .decode("utf-8", "ignore").encode()
            for v in list(values)[:_lib.TM_ANNOT_MAX_VALUES]]
    n = len(kept)
    total = max(n, len(values) if count is None else int(count))
    return kept, (ctypes.c_char_p * max(n, 1))(*kept), n, min(total, 0xFFFFFFFF)


def _exc_message(exc: BaseException) -> str:
    """The exception's message as its traceback's last line shows it."""
    try:
        return str(exc)
    except Exception:   # noqa: BLE001 -- a __str__ that raises
        return ""


def _check(err: int, what: str) -> None:
    if err:
        raise ProbeError(f"{what}: {_lib.strerror(err)}")


def _dist_rank() -> tuple[int, int]:
    """(rank, world_size) of this process: RANK/WORLD_SIZE as torchrun (and
    the other launchers) set them before the script starts, else an
    initialised torch.distributed process group, else (-1, 0)."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and world is not None:
        try:
            return int(rank), int(world)
        except ValueError:
            pass
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    return -1, 0


def rank_socket_path(path: str | os.PathLike[str], rank: int) -> str:
    """The socket rank `rank` of a distributed job listens on for an explicit
    TENSORMORPH_LISTEN path: "dbg.sock" -> "dbg.rank1.sock", "dbg" ->
    "dbg.rank1" (libtensormorph's tm_server_rank_path, as tmdb expects)."""
    try:
        return _lib.server_rank_path(path, rank)
    except OSError as exc:
        raise ProbeError(str(exc)) from None


def _unwrap(module: torch.nn.Module) -> torch.nn.Module:
    """The module a data-parallel wrapper (DDP, DataParallel, FSDP) or
    torch.compile's OptimizedModule holds: its forward only scatters,
    shards, syncs or runs compiled code and calls that module, whose tree is
    the user's model (`model.fc`, never `model._orig_mod.fc`)."""
    par = torch.nn.parallel
    while True:
        inner = _compiled.unwrap_compiled(module)
        if isinstance(inner, (par.DistributedDataParallel, par.DataParallel)):
            inner = inner.module
        else:
            fsdp = sys.modules.get("torch.distributed.fsdp")
            cls = getattr(fsdp, "FullyShardedDataParallel", None) if fsdp is not None else None
            if cls is not None and isinstance(inner, cls):
                inner = inner.module
        if inner is module:
            return module
        module = inner


def _user_model(module: torch.nn.Module) -> torch.nn.Module:
    """The model a module called first belongs to: the outermost module
    holding it (a LightningModule whose training_step calls self.net, a
    wrapper holding the net and its loss), short of a data-parallel
    wrapper and of torch.compile's OptimizedModule."""
    top = module
    for _ in range(64):
        up = _loop.owner(top)
        if up is None or _unwrap(up) is not up:
            break
        top = up
    return top


def _forward_source(module: torch.nn.Module) -> tuple[str | None, int]:
    """File and first line of the class's forward (unwrapping decorators)."""
    fn: Any = type(module).forward
    for _ in range(8):
        nxt = getattr(fn, "__wrapped__", None)
        if nxt is None:
            break
        fn = nxt
    code = getattr(fn, "__code__", None)
    if code is None:
        return None, 0
    return os.path.abspath(code.co_filename), _def_line(code)


def _def_line(code: types.CodeType) -> int:
    """The `def` line of a function: a decorated one's co_firstlineno is
    its first decorator's line (`@deprecate_kwarg(...)` in transformers),
    which is not where `bt` and `frame` should point."""
    line = code.co_firstlineno
    for i in range(line, line + 64):
        text = linecache.getline(code.co_filename, i)
        if not text:
            break                       # past the end of the file
        if text.lstrip().startswith(("def ", "async def ")):
            return i
    return line


class _LeafGrad:
    """The Python path's gradient hook of a leaf tensor (see _hook.c's
    GradHook): the calls that want its gradient, since its last backward
    and of one step."""

    __slots__ = ("probe", "calls", "step")

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.calls: list[tuple[_Node, int, int, int]] = []
        self.step = probe.step_count

    def add(self, node: _Node, call: int, slot_kind: int, index: int) -> None:
        if self.step != self.probe.step_count:
            self.step = self.probe.step_count
            self.calls.clear()      # a forward with no backward: nothing wants them
        self.calls.append((node, call, slot_kind, index))

    def __call__(self, grad: torch.Tensor) -> None:
        calls, self.calls = self.calls, []
        for c in calls:
            self.probe._on_grad(*c, grad)


class Probe(_ProbeBase):
    """A recording probe attached to one model (or to the first root called).

    path: the trace this process writes (None when not recording); in a
    distributed job rank R's own file (tm_manifest_rank_path of `record`).
    manifest: on rank 0 of a distributed job the run manifest written next to
    the traces, else None.  rank, world_size: -1 and 0 when not distributed;
    taken from RANK/WORLD_SIZE or torch.distributed unless given (a serving
    framework's worker knows its own).  probe_kind and meta (key, value
    pairs) go into the run metadata (tmdb's `info probe`).
    """

    def __init__(self, model: torch.nn.Module | None = None, level: int = 1,
                 record: str | os.PathLike[str] | None = "run.tmrun",
                 nodes: str | Iterable[str] = "model.**",
                 levels: Mapping[str, int] | None = None, lossless: bool = False, *,
                 root_name: str = "model", ring_events: int = 65536,
                 ring_payload_bytes: int = 64 << 20, batch_events: int = 4096,
                 device_stats_on_cpu: bool = False, crash_handler: bool = True,
                 rank: int | None = None, world_size: int | None = None,
                 probe_kind: str = "pytorch",
                 meta: Iterable[tuple[str, str]] | Mapping[str, str] | None = None,
                 ops: str | None = None,
                 flight: int | None = None, flight_budget: int | str | None = None,
                 triggers: Iterable[str] = (), on_trigger: str = "continue",
                 trigger_wait: float | None = None) -> None:
        if not 0 <= level <= 3:
            raise ValueError(f"level must be 0..3, got {level}")
        triggers = list(triggers)
        if triggers and not flight:
            raise ValueError("triggers need flight mode (flight=N)")
        if flight and on_trigger not in _flight.ON_TRIGGER:
            raise ValueError(f"on_trigger must be one of {', '.join(_flight.ON_TRIGGER)}, "
                             f"got {on_trigger!r}")
        self._lib = lib = _lib.load()
        if (rank is None) != (world_size is None):
            raise ValueError("rank and world_size go together")
        if rank is not None and world_size is not None:
            self.rank, self.world_size = int(rank), int(world_size)
        else:
            self.rank, self.world_size = _dist_rank()
        self.probe_kind = probe_kind
        extra = meta.items() if isinstance(meta, Mapping) else (meta or ())
        self._meta_pairs = [(str(k), str(v)) for k, v in extra]
        # None: nothing is written (a live session's debugger keeps the history)
        self.path = os.fspath(record) if record is not None else None
        self._record_arg = os.fspath(record) if record is not None else None
        self.manifest: str | None = None
        distributed = self.world_size > 1
        if self.path is not None and distributed:
            if not 0 <= self.rank < self.world_size:
                raise ProbeError(f"rank {self.rank} is not below world size {self.world_size}")
            try:
                self.path = _lib.manifest_rank_path(record, self.rank)
            except OSError as exc:
                raise ProbeError(str(exc)) from None
        self.level = level
        self._patterns = [nodes] if isinstance(nodes, str) else list(nodes)
        self._levels = dict(levels or {})
        for pat in [*self._patterns, *self._levels]:
            if lib.tm_path_glob(pat.encode(), b"model") < 0:
                raise ValueError(f"bad node pattern {pat!r}")
        for pat, lv in self._levels.items():
            if not 0 <= int(lv) <= 3:
                raise ValueError(f"level for {pat!r} must be 0..3, got {lv}")
        self._root_name = root_name
        self._force_dev = bool(device_stats_on_cpu)
        # the running forward's requests' rows (set_rows), None: none
        self._rows: tuple[tuple[tuple[int, int], ...], frozenset[int]] | None = None
        self._rows_on = False       # _hook.c leaves one-tensor events to Python
        self._ops: Any = None           # _ops.OpRecorder while ops are on
        self._ops_patterns = _ops_mod.split_patterns(ops)
        self._ops_own = ",".join(self._ops_patterns)  # as configured (not by a debugger)
        self._ops_want: str | None = None   # a debugger's change, due at the root's exit
        for pat in self._ops_patterns:
            if lib.tm_path_glob(pat.encode(), b"model") < 0:
                raise ValueError(f"bad op pattern {pat!r}")

        opts = _lib.RecorderOpts()
        lib.tm_recorder_opts_default(ctypes.byref(opts))
        opts.ring_events = ring_events
        opts.ring_payload_bytes = ring_payload_bytes
        opts.lossless = int(lossless)
        handle = ctypes.c_void_p()
        if flight:
            # flight mode (_flight.py): the window stays in memory
            if self.path is None:
                raise ValueError("flight mode needs a record path to write the window to")
            try:
                handle.value = _flight.open_recorder(
                    lib, self.path, opts, int(flight),
                    _flight.parse_size(flight_budget) if flight_budget else None,
                    _flight.rendezvous_path(os.fspath(record)) if distributed else None)
            except OSError as exc:
                raise ProbeError(str(exc)) from None
        else:
            _check(lib.tm_recorder_open(self.path.encode() if self.path else None,
                                        ctypes.byref(opts), ctypes.byref(handle)),
                   f"cannot record to {self.path}")
        self._rec: int | None = handle.value
        self._recvp = ctypes.c_void_p(self._rec)
        self._t0 = time.monotonic_ns()
        try:
            self._write_meta()
            if self.path is not None and distributed and self.rank == 0:
                self._write_manifest(os.fspath(record))
        except ProbeError:
            lib.tm_recorder_close(self._rec)
            raise

        # the batch buffer, laid out as tm_rec_event[] and tm_rec_tensor[]
        self._bev = batch_events
        self._bt = batch_events * 4
        # bytearrays: pack_into on them is cheaper than on ctypes arrays
        self._evbuf = bytearray(_lib.EVENT_STRUCT.size * self._bev)
        self._tbuf = bytearray(_lib.TENSOR_SIZE * self._bt)
        self._evaddr = ctypes.addressof((ctypes.c_char * len(self._evbuf)).from_buffer(
            self._evbuf))
        self._taddr = ctypes.addressof((ctypes.c_char * len(self._tbuf)).from_buffer(
            self._tbuf))
        self._nev = 0
        self._nt = 0
        self._evvp = ctypes.c_void_p(self._evaddr)
        self._tvp = ctypes.c_void_p(self._taddr)
        # The pending batch as the fatal-signal handler sees it: nev is kept
        # current per event, so a crash loses none of the events before it.
        self._batch = _lib.RecBatch(self._evaddr, self._taddr, 0, 0)
        self._bnev = ctypes.c_uint32.from_buffer(self._batch, _lib.RecBatch.nev.offset)
        self._bnev_addr = ctypes.addressof(self._bnev)
        _check(lib.tm_recorder_watch_batch(self._rec, ctypes.byref(self._batch)), "batch")
        self._crash = False
        if crash_handler:
            _check(lib.tm_recorder_crash_install(self._rec), "fatal-signal handler")
            self._crash = True
        self._flight: _flight.Flight | None = None
        if flight:
            try:
                self._flight = _flight.Flight(self, triggers, on_trigger, trigger_wait)
            except ValueError:
                lib.tm_recorder_close(self._rec)
                raise
        # live debugging (listen): the server and its state word
        self._srv: int | None = None
        self._live: ctypes.c_uint32 | None = None
        self._live_addr = 0             # _live's address, for the C fast path
        self._gen = 0
        self.address: str | None = None
        self._submit_raw = lib.tm_recorder_submit_raw
        self._stats = lib.tm_recorder_stats_raw
        self._stats_addr = ctypes.cast(lib.tm_recorder_stats, ctypes.c_void_p).value or 0
        self._reuse_min1, self._reuse_min2 = _REUSE_MIN[1], _REUSE_MIN[2]
        self._last_min = _LAST_MIN
        self._vp = ctypes.c_void_p(0)
        self._hold: list[torch.Tensor] = []
        self._dev_pending: list[tuple[int, torch.Tensor, int]] = []
        self._dev_capture: list[tuple[int, torch.Tensor]] = []
        self._keep: list[torch.Tensor] = []
        # the library's code of every torch dtype, the table compiled regions use
        self._dtypes: dict[torch.dtype, int] = _compiled._DTYPES
        # id(tensor) -> (index, weak ref, version, address, shape, dtype, level, strides)
        self._seen: dict[int, tuple[Any, ...]] = {}
        self.reused = 0                 # tensor summaries copied, not recomputed
        self._by_id: dict[int, _Node] = {}  # node id -> observed node (compiled regions)
        self._discovering = model is None
        self._compiled_step = -1        # step annotated "compiled" (_compiled.py)
        self._compiled_regions: list[tuple[str, str]] = []     # its regions, levels
        self._compiled_enc: Any = None  # (regions, their annotations' values, encoded)
        # region token -> (node, call, level) of its events, for its backward
        self._region_calls: dict[int, list[tuple[int, int, int]]] = {}
        self._cid = _compiled.register(self)
        # the eager re-run of a compiled region (_compiled.py, tmdb's rerun):
        # snapshots at the regions' entries while a debugger may ask for it
        self._rerun_snap = False
        self._snaps: dict[int, Any] = {}
        self._reruns = 0
        self._rerunning = False

        self.step_count = 0
        # called with the root's (args, kwargs) as each root call starts, its
        # step already moved, before its events: where a serving probe
        # annotates the step with the batch's request ids
        self.on_root_call: Callable[[tuple[Any, ...], dict[str, Any] | None], None] | None = None
        self._manual_step = False
        # the training loop (_loop.py; doc/manual.md "Steps")
        self._step_calls = 0            # root calls begun in this step
        self._attempted = False         # an optimizer step was attempted in it
        self._step_plain = False        # its last root call was an inference call
        self._root_depth = 0            # root calls in flight
        self._micro = 0                 # the current root call's number (#N)
        self._eval_depth = 0            # evaluation scopes in flight
        self._scaler_watch = False      # a GradScaler runs: _grad_check each gradient
        self._opt_steps = 0             # optimizer.step calls that returned
        self._optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        self._scaler: weakref.ref[Any] | None = None   # the GradScaler in use
        self._scale_noted = -1          # step whose scaler.scale is annotated
        self._skip_noted = -1           # step annotated scaler.skipped
        self._exc_noted: tuple[int, int] | None = None  # (id, step) of the exception annotated
        # PARAM grad events of the backward in flight (pid -> (pid, node, param))
        self._grad_pending: dict[int, tuple[int, _Node, torch.Tensor]] = {}
        # optimizer -> (its parameter groups' sizes, len(_params), its
        # (pid, node, param) entries): PARAM value events after its step
        self._opt_entries: weakref.WeakKeyDictionary[Any, tuple[Any, int, list[Any]]] = \
            weakref.WeakKeyDictionary()
        self._grad_queued = False
        self._watched: set[int] = set()  # id(param) with a gradient hook
        self._fw: dict[str, bool] = {}  # frameworks patched
        self._fw_done = False
        self._active = 0                # hooked calls in flight
        self._nodes: dict[int, _Node] = {}  # id(module) -> node (observed or not)
        self._addresses: set[str] = set()   # every address given out
        self._params: list[tuple[int, torch.nn.Parameter, _Node]] = []
        self._params_step = -1          # step whose PARAM events were written
        self._handles: list[Any] = []
        self._undo: list[Callable[[], None]] = []
        self.model: torch.nn.Module | None = None
        self._closed = False

        opt = torch_optimizer
        self._handles.append(opt.register_optimizer_step_post_hook(self._opt_post))
        _loop.install(self)
        self._wrappers: set[int] = set()  # data-parallel wrappers looked through
        self._root_methods: list[tuple[torch.nn.Module, str, Any]] = []
        undo = _compiled.patch_optimized_module(self._is_wrapper)
        if undo is not None:
            self._undo.append(undo)
        if model is not None:
            self._adopt(_unwrap(model), root_name)
        else:
            self._discover_calls()
        if self._ops_patterns:
            self.set_ops(",".join(self._ops_patterns))
        ref = weakref.ref(self)
        self._atexit = functools.partial(_close_ref, ref)
        atexit.register(self._atexit)
        os.register_at_fork(after_in_child=functools.partial(_forked_ref, ref))

    # ------------------------------------------------------------ setup

    def _write_meta(self) -> None:
        meta = _lib.RunMeta()
        meta.probe_kind = self.probe_kind.encode()
        meta.default_level = self.level
        meta.torch_version = torch.__version__.encode()
        meta.host = socket.gethostname().encode()
        meta.start_unix_ns = time.time_ns()
        meta.rank = self.rank
        meta.world_size = self.world_size
        meta.command = " ".join(sys.argv).encode()
        pairs = [("nodes", ",".join(self._patterns)), ("flatten", FLATTEN_RULE)]
        pairs += [(f"level:{p}", str(lv)) for p, lv in self._levels.items()]
        if self._ops_patterns:
            pairs.append(("ops", ",".join(self._ops_patterns)))
        pairs += self._meta_pairs
        keep = [(k.encode(), v.encode()) for k, v in pairs[: _lib.TM_META_MAX_PAIRS]]
        meta.npairs = len(keep)
        for i, (k, v) in enumerate(keep):    # keep: alive until the call returns
            meta.keys[i] = k
            meta.values[i] = v
        _check(self._lib.tm_recorder_meta(self._rec, ctypes.byref(meta)), "run metadata")

    def _write_manifest(self, record: str) -> None:
        """Rank 0: the manifest naming every rank's trace, relative to its
        own directory, written now so that it exists however the job ends."""
        try:
            manifest = _lib.manifest_path(record)
            where = os.path.dirname(os.path.abspath(manifest))
            files = [os.path.relpath(os.path.abspath(_lib.manifest_rank_path(record, r)), where)
                     for r in range(self.world_size)]
            _lib.manifest_write(manifest, files)
        except OSError as exc:
            raise ProbeError(str(exc)) from None
        self.manifest = manifest

    def _segment(self, name: str) -> str:
        """A module or parameter name as an address segment (ModuleDict keys
        may hold any character; libtensormorph decides which can stand)."""
        raw = name.encode()
        buf = ctypes.create_string_buffer(len(raw) + 2)
        if not self._lib.tm_path_segment(raw, buf, len(buf)):
            return "_"
        return buf.value.decode(errors="replace")

    def _address(self, parent: str, name: str) -> str:
        """parent's address + name's segment, made unique: two names that
        map to the same segment ("conv-1" and "conv_1") get a suffix."""
        address = f"{parent}.{self._segment(name)}"
        base, n = address, 1
        while address in self._addresses:
            n += 1
            address = f"{base}_{n}"
        return address

    def _match(self, pattern: str, address: str) -> bool:
        return self._lib.tm_path_glob(pattern.encode(), address.encode()) == 1

    def _register(self, address: str, type_name: str, file: str | None, line: int,
                  parent: int, kind: int) -> int:
        nid = ctypes.c_uint32()
        _check(self._lib.tm_recorder_node2(
            self._rec, address.encode(), type_name.encode(),
            file.encode() if file else None, line, parent, address.count("."), kind,
            ctypes.byref(nid)), f"node {address}")
        return nid.value

    def _adopt(self, root: torch.nn.Module, name: str) -> _Node:
        """Decides, once per module of root's tree, whether and how deeply it
        is observed, registers the observed ones and hooks them."""
        first: _Node | None = None
        ids: dict[str, int] = {}
        subaddr: dict[str, str] = {}    # named_modules() name -> address
        for sub, mod in root.named_modules():
            if id(mod) in self._nodes:
                subaddr[sub] = self._nodes[id(mod)].address
                continue
            if sub:
                head, _, last = sub.rpartition(".")
                address = self._address(subaddr.get(head, name) if head else name, last)
            else:
                address = name
            subaddr[sub] = address
            self._addresses.add(address)
            observed = any(self._match(p, address) for p in self._patterns)
            level = self.level
            for pat, lv in self._levels.items():
                if self._match(pat, address):
                    level = int(lv)
            node = _Node(address, mod, level, observed)
            node.pid = self._cid
            self._nodes[id(mod)] = node
            if first is None:
                first = node
                # only the model's root counts steps; ext.* roots do not
                node.is_root = self.model is None
            if not observed and not node.is_root:
                continue
            if observed:
                parent = _lib.TM_NODE_NONE
                head = address
                while "." in head:
                    head = head.rsplit(".", 1)[0]
                    if head in ids:
                        parent = ids[head]
                        break
                file, line = _forward_source(mod)
                node.id = self._register(address, type(mod).__name__, file, line, parent,
                                         _lib.NODE_MODULE)
                self._by_id[node.id] = node
                ids[address] = node.id
                if level >= 2:
                    self._add_params(node)
            self._wrap(node)
            if self._ops is not None:
                self._ops.adopt(node)
        assert first is not None
        if self.model is None:
            self.model = root
        if first.is_root:
            base = _loop.lightning_base(root)
            if base is not None:
                self._wrap_steps(first, base)
        return first

    def _wrap_steps(self, node: _Node, base: type) -> None:
        """A LightningModule root: Lightning calls its training_step (and
        evaluation steps), not its forward.  Each of those the class
        defines is a root call of the model (ENTER: the batch, EXIT: what
        it returns), the evaluation ones in an evaluation scope."""
        mod = node.module
        for name, scope in _loop.LIGHTNING_STEPS:
            fn = getattr(type(mod), name, None)
            if fn is None or fn is getattr(base, name, None) or name in mod.__dict__:
                continue
            inner = getattr(mod, name)
            if _hook is not None:
                w: Any = _hook.Forward(self, node, mod, inner, name, scope=scope)
            else:
                w = self._py_wrapper(node, mod, inner, name, scope)
            _update_wrapper(w, fn)
            bound = types.MethodType(w, mod)
            mod.__dict__[name] = bound
            self._root_methods.append((mod, name, bound))

    def _wrap(self, node: _Node) -> None:
        """Observes node's calls by wrapping its forward, as accelerate's
        hooks do, rather than with torch module hooks: with any hook on a
        module torch takes its general call path, which costs about 2 us a
        call before a hook runs (25 times what one Python call around
        forward costs; testsuite/perf/probe-overhead's empty-hooks row), and
        a pre-hook and a forward hook are two calls where one frame around
        forward keeps the call's start and number in local variables.
        The wrapper is the module's forward attribute, named forward and
        wrapping the class's forward (inspect.signature and
        transformers' argument checks see the real signature); with the C
        path it is not a bound method, so that dynamo, tracing a compiled
        model, does not reach the module a second way and guard on it
        (_hook.c's forward_call).  A deepcopy of the module gets the
        forward it wraps, bound to the copy, which is not observed, and
        pickling saves it as getattr(module, "forward").
        What it sees is the forward's own inputs and outputs: after the
        module's pre-hooks, before its forward hooks.  Unwrapping
        releases the C wrapper, so that copies keep neither probe nor
        module alive."""
        mod = node.module
        own = mod.__dict__.get("forward")
        inner = own if own is not None else types.MethodType(type(mod).forward, mod)
        fwd: Any
        node.own = own
        node.fn = type(mod).forward if own is None else None
        fwd = (_hook.Forward(self, node, mod, inner, bound=False) if _hook is not None
               else _PyForward(self, node, mod, inner))
        _update_wrapper(fwd, type(mod).forward if own is None else own)
        fwd.__wrapped__ = inner         # its signature: the bound forward's
        node.wrapped = mod.forward = fwd
        _compiled.add_module(mod, node.fn)

    def _py_wrapper(self, node: _Node, mod: torch.nn.Module, inner: Any, name: str,
                    scope: bool) -> Any:
        """Without the extension: _hook.c's forward_call in Python."""
        probe = self

        def fwd(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling():
                # traced by dynamo: as _hook.c's Forward (_compiled.py)
                if module is not mod or (name == "forward" and node.wrapped is None):
                    return getattr(type(module), name)(module, *args, **kwargs)
                if probe._closed or not node.observed:
                    return inner(*args, **kwargs)
                return _compiled.region_call(probe, node.id, node.level, inner, args, kwargs)
            if module is not mod or probe._closed or (name == "forward" and node.wrapped is None):
                # a copy (deepcopy rebinds this method), or unwrapped
                return getattr(type(module), name)(module, *args, **kwargs)
            probe._eval_depth += scope
            try:
                # looked up per call: an op recorder replaces them
                start, call = probe._enter(node, args, kwargs)
                try:
                    out = inner(*args, **kwargs)
                except BaseException as exc:
                    probe._raise(node, start, call, exc)    # the call still ends
                    raise
                probe._exit(node, start, call, out)
                return out
            finally:
                probe._eval_depth -= scope
        return fwd

    def _is_wrapper(self, fwd: Any) -> bool:
        """Whether fwd is a forward this probe installed."""
        mod = getattr(fwd, "_tm_module", None) or getattr(fwd, "__self__", None)
        node = self._nodes.get(id(mod)) if mod is not None else None
        return node is not None and node.wrapped is fwd

    def _unwrap_all(self) -> None:
        """Gives every wrapped module its forward back, unless another tool
        wrapped ours since: that one stays, and ours passes calls through."""
        for node in self._nodes.values():
            mine, node.wrapped = node.wrapped, None
            if mine is None:
                continue
            mine.release()                  # copies made meanwhile keep nothing
            _compiled.drop_module(node.mid)
            d = node.module.__dict__
            if d.get("forward") is mine:
                if node.own is not None:
                    d["forward"] = node.own
                else:
                    del d["forward"]
            node.own = None
        for mod, name, bound in self._root_methods:
            if _hook is not None:
                bound.__func__.release()
            if mod.__dict__.get(name) is bound:
                del mod.__dict__[name]
        self._root_methods.clear()

    def _add_params(self, node: _Node) -> None:
        """Parameter nodes of a level >= 2 module (PARAM events)."""
        node.params = True
        for pname, p in node.module.named_parameters(recurse=False):
            paddr = self._address(node.address, pname)
            self._addresses.add(paddr)
            pid = self._register(paddr, "Parameter", None, 0, node.id, _lib.NODE_PARAM)
            self._params.append((pid, p, node))
            self._watched.discard(id(p))     # a scaler's watch becomes an event's
            self._watch(p, pid, node)

    def _ext_name(self, module: torch.nn.Module) -> str:
        name = f"ext.{type(module).__name__}"
        n = 1
        while any(nd.address == name for nd in self._nodes.values()):
            n += 1
            name = f"ext.{type(module).__name__}_{n}"
        return name

    def _discover_calls(self) -> None:
        """model=None: every module call passes _discover first, through
        nn.Module.__call__ (what torch's global pre-hook would do, but that
        would send every module of the process down torch's general hook
        path).  Undone by close, unless another tool replaced it since;
        then it stays and passes calls through."""
        orig = torch.nn.Module.__call__
        ref = weakref.ref(self)
        __call__: Any
        if _hook is not None:
            # no frame of the probe's in the user's tracebacks
            __call__ = _hook.Discover(self, orig)
        else:
            def __call__(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
                if torch.compiler.is_compiling():
                    # a compiled function calls the model: found at trace time
                    _compiled.discover_traced(module)
                    return orig(module, *args, **kwargs)
                p = ref()
                if p is not None and not p._active and not p._closed:
                    p._discover(module)
                return orig(module, *args, **kwargs)

            functools.update_wrapper(__call__, orig)
        torch.nn.Module.__call__ = __call__

        def undo() -> None:
            if torch.nn.Module.__call__ is __call__:
                torch.nn.Module.__call__ = orig
        self._undo.append(undo)

    def _discover(self, module: torch.nn.Module) -> None:
        """A module called with nothing in flight: the first becomes `model`,
        later unknown ones (a loss) become `ext.<Class>` roots.  Known
        modules return at once.  Runs before torch looks up module.forward,
        so that this very call goes through the forward wrapped now."""
        if id(module) in self._nodes or id(module) in self._wrappers:
            return
        inner = _unwrap(module)
        if inner is not module:
            # a data-parallel wrapper: its forward calls the module it holds,
            # whose wrapped forward (from now) sees that very call; the
            # wrapper is no node
            self._wrappers.add(id(module))
            if id(inner) not in self._nodes:
                self._adopt(inner, self._root_name if self.model is None
                            else self._ext_name(inner))
            return
        if self.model is None:
            top = _user_model(module)
            self._adopt(top, self._root_name)
            if top is not module and not self._root_methods:
                # its calls are the model's root calls when the model's own
                # forward is not called (a container of net and loss); a
                # LightningModule's are its step methods, from the next one
                # (this call is inside one already)
                self._nodes[id(module)].is_root = True
            return
        self._adopt(module, self._ext_name(module))

    # ------------------------------------------------------------ batches

    def set_rows(self, spans: Sequence[tuple[int, int]] | None,
                 sizes: Sequence[int] = ()) -> None:
        """The rows of each request of the forward about to run (a serving
        plugin's): spans[j] = (start, end) of request j (its place in the
        step's `request` annotation) along the leading dimension of the
        batch's tensors whose leading dimension, leading 1s aside, is one of
        sizes (num_tokens).  Each such tensor of the forward's ENTER and EXIT
        events gets, after the event's tensors, one tensor per request: the
        stats of its rows, in slot tm_slot_row_of(slot, j) (doc/serving.md,
        "Requests batched together").  None (or one request): none."""
        if spans is None or len(spans) < 2 or not sizes:
            self._rows = None
            self._rows_on = False
            return
        self._rows = (tuple((int(a), int(b)) for a, b in spans[:_lib.SLOT_ROW_MAX]),
                      frozenset(int(n) for n in sizes))
        self._rows_on = True

    def _row_tensors(self, tensors: Sequence[Any], slot_base: int) -> list[tuple[Any, int]]:
        """(rows of one request, its slot index) for the batch tensors
        whose leading dimension is the forward's tokens, as many as fit in
        one event."""
        spans, sizes = self._rows      # type: ignore[misc]
        room = _MAX_TENSORS - len(tensors)
        out: list[tuple[Any, int]] = []
        for j, x in enumerate(tensors):
            idx = slot_base + j
            if type(x) is not _Tensor or idx >= _lib.SLOT_ROW_INDEX_MAX:
                continue
            shape = x.shape
            d = 0
            while d < len(shape) - 1 and shape[d] == 1:
                d += 1
            if not shape or shape[d] not in sizes:
                continue
            for r, (a, b) in enumerate(spans):
                if len(out) >= room:
                    return out
                if 0 <= a < b <= shape[d]:
                    out.append((x.narrow(d, a, b - a), _lib.SLOT_ROWS | r << 8 | idx))
        return out

    def _event(self, kind: int, phase: int, node: int, call: int, t: int, start: int,
               end: int, tensors: list[torch.Tensor], slot_kind: int, level: int,
               slot_base: int = 0) -> None:
        rows = (self._row_tensors(tensors, slot_base)
                if self._rows is not None and kind <= _EV_EXIT and level else ())
        n = len(tensors) + len(rows)
        if self._nev >= self._bev or self._nt + n > self._bt:
            self._submit()
        base = self._nt
        need = 0
        put = self._put_tensor
        for j, x in enumerate(tensors):
            need |= put(base + j, x, slot_kind, slot_base + j, level)
        # a request's rows: stats only (no level-3 copy of them), and never
        # a summary reused from another tensor
        for j, (x, idx) in enumerate(rows, len(tensors)):
            need |= put(base + j, x, slot_kind, idx, min(level, 2), False)
        _EVENT_PACK(self._evbuf, self._nev * 48, self.step_count, t, start, end, node, call, n,
                    kind, phase, level, 0)
        if need:
            self._stats_now(base, n)
        self._nt = base + n
        self._nev = nev = self._nev + 1
        self._bnev.value = nev
        if self._live is not None and self._live.value & 1:
            self._submit_live()

    def _event1_py(self, kind: int, phase: int, node: int, call: int, t: int, start: int,
                   end: int, x: torch.Tensor, slot_kind: int, level: int,
                   slot_index: int) -> None:
        """_event for one tensor, as _hook.c's ProbeBase._event1 does it for
        host tensors; that one calls this for the rest (device tensors,
        shapes of over 8 dimensions, a dtype not in the table, a forward with
        requests' rows), and without the extension every one-tensor event
        comes here."""
        if self._rows is not None and kind <= _EV_EXIT:
            self._event(kind, phase, node, call, t, start, end, [x], slot_kind, level,
                        slot_index)
            return
        if self._nev >= self._bev or self._nt >= self._bt:
            self._submit()
        idx = self._nt
        # a parameter or its gradient is seldom a module's input or output:
        # looking it up for reuse would almost always miss
        need = self._put_tensor(idx, x, slot_kind, slot_index, level, kind != _EV_PARAM)
        _EVENT_PACK(self._evbuf, self._nev * 48, self.step_count, t, start, end, node, call, 1,
                    kind, phase, level, 0)
        if need:
            self._stats_now(idx, 1)
        self._nt = idx + 1
        self._nev = nev = self._nev + 1
        self._bnev.value = nev
        if self._live is not None and self._live.value & 1:
            self._submit_live()

    if _hook is None:
        _event1 = _event1_py

    def _stats_now(self, base: int, n: int) -> None:
        """CPU stats now: the tensor may be changed in place after the hook.
        The undeclared entry point with a reused pointer object costs about
        half of a declared ctypes call."""
        vp = self._vp
        vp.value = self._taddr + base * _TSIZE
        self._stats(None, vp, _SIZES[n] if n < len(_SIZES) else ctypes.c_size_t(n))
        if self._hold:
            self._hold.clear()      # contiguous copies, read now

    def _put_tensor(self, idx: int, x: torch.Tensor, slot_kind: int, slot_index: int,
                    level: int, reuse: bool = True) -> int:
        """Packs x's summary at idx; returns 1 when its stats are still to be
        computed from host memory (_stats_now), else 0.  reuse: x may be
        looked up among the batch's summaries (_reuse)."""
        shape = x.shape
        rank = len(shape)
        if rank > _MAX_RANK:
            shape = (*shape[:7], -1)
            rank = _MAX_RANK
        dt = x.dtype
        dtype = self._dtypes.get(dt, 0)
        data = clevel = capture = devtype = devidx = 0
        numel = x.numel()
        if x.is_cpu and not self._force_dev:
            if level and x.layout is _STRIDED:
                # a large tensor seen before in this batch (an input that is
                # the last output, a container's output that is its last
                # child's): copy its summary rather than read it again
                if reuse and numel >= _REUSE_MIN[level] and self._reuse(
                        idx, x, x.data_ptr(), shape, dt, slot_kind, slot_index, level):
                    return 0
                # no detach: only the address is read, and only now
                if x.is_contiguous():
                    y = x
                else:
                    y = x.detach().contiguous()
                    self._hold.append(y)
                if level >= 3:
                    y = y.detach().clone()
                    capture = 1
                    self._keep.append(y)
                data = y.data_ptr()
                clevel = 2 if level >= 2 else 1
        else:
            if not x.is_cpu:
                dev = x.device
                devtype = 1 if dev.type == "cuda" else 2
                devidx = dev.index or 0
            if level and x.layout is _STRIDED and not x.is_meta:
                y = x.detach()
                self._dev_pending.append((idx, device_stats(y, level), level))
                if level >= 3:
                    self._dev_capture.append((idx, y.clone()))
        _TENSOR_PACK[rank](self._tbuf, idx * _TSIZE, data, numel, 0,
                           slot_index, devidx, slot_kind, dtype, rank, devtype, clevel, capture,
                           0, 0, *shape)
        return 1 if clevel else 0      # (an empty tensor: no address, its counts)

    def _reuse(self, idx: int, x: torch.Tensor, data: int, shape: Any, dt: torch.dtype,
               slot_kind: int, slot_index: int, level: int) -> bool:
        """At level >= 2 most inputs are the previous call's output and most
        grad_in are the next call's grad_out; at any level a container's
        output is its last child's: the same tensor object, unchanged (same
        version counter).  Their summary is copied within the batch instead
        of reading the data again.  Tensors are looked up by id(): the weak
        reference makes sure it is still the same object, and address,
        shape, strides, dtype and level are compared on a hit (`x.data = y`
        keeps the object and its version); a view of the same data is
        another object and is read again, with the same result."""
        if x.is_inference():
            return False    # no version counter: an in-place change is invisible
        seen = self._seen
        key = id(x)
        hit = seen.get(key)
        version = x._version
        if (hit is None or hit[1]() is not x or hit[2] != version or hit[3] != data
                or hit[4] != shape or hit[5] is not dt or hit[6] != level
                or hit[7] != x.stride()):
            seen[key] = (idx, _wref(x), version, data, shape, dt, level, x.stride())
            return False
        tbuf = self._tbuf
        off = idx * _TSIZE
        src = hit[0] * _TSIZE
        tbuf[off:off + _TSIZE] = tbuf[src:src + _TSIZE]
        _SLOT_PACK(tbuf, off + _lib.OFF_SLOT, slot_index)
        tbuf[off + _lib.OFF_SLOT_KIND] = slot_kind
        self.reused += 1
        return True

    def _pack_stats(self, idx: int, row: list[float], level: int) -> None:
        """Stats reduced away from the hook (_devstats.py's vector), into
        the summary at idx."""
        off = idx * _lib.TENSOR_SIZE
        hist = [int(h) for h in row[14:]]
        _lib.TENSOR_STATS.pack_into(self._tbuf, off + _lib.TENSOR_STATS_OFF, *row[:14], *hist)
        have = L2_MASK if level >= 2 else L1_MASK
        finite = row[1] + row[2] < row[0]
        if not finite:      # as in C: only the counts are known
            have &= _COUNTS_MASK
        ctypes.c_uint32.from_buffer(self._tbuf, off + _HAVE_OFF).value = have
        ctypes.c_uint8.from_buffer(self._tbuf, off + _HAVE_HIST_OFF).value = \
            _lib.HIST_LOG2 if level >= 2 and finite else 0

    def _put_capture(self, idx: int, h: torch.Tensor) -> None:
        """A level-3 copy in host memory, kept until submitted."""
        self._keep.append(h)
        off = idx * _lib.TENSOR_SIZE
        ctypes.c_uint64.from_buffer(self._tbuf, off).value = h.data_ptr()
        ctypes.c_uint8.from_buffer(self._tbuf, off + _lib.OFF_CAPTURE).value = 1

    def _compiled_flush(self, stats: torch.Tensor, table: list[int],
                        captures: list[torch.Tensor], token: torch.Tensor | None,
                        hrecs: list[torch.Tensor], plan: int = 0) -> None:
        """A compiled region ran (_compiled.py's tensormorph::flush)."""
        _compiled.run_flush(self, stats, table, captures, token, hrecs, plan)

    def _submit(self) -> None:
        """Hands the batch to libtensormorph: one host copy of the device
        stats, one call."""
        if self._dev_pending:
            # stacked on the first one's device (a model on two GPUs has
            # vectors on both), MPS's float32 on the host
            first = self._dev_pending[0][1].device
            dev = torch.device("cpu") if first.type == "mps" else first
            with _sync_allowed():
                vecs = torch.stack([v.to(dev, torch.float64) for _, v, _ in self._dev_pending]
                                   ).to("cpu", torch.float64)
            for (idx, _, level), row in zip(self._dev_pending, vecs.tolist(), strict=True):
                self._pack_stats(idx, row, level)
            self._dev_pending.clear()
        if self._dev_capture:
            with _sync_allowed():
                for idx, y in self._dev_capture:
                    self._put_capture(idx, y.to("cpu").contiguous())
        self._dev_capture.clear()
        nev, self._nev = self._nev, 0
        self._bnev.value = 0
        if nev and self._rec:
            err = self._lib.tm_recorder_submit(self._rec, self._evaddr, nev,
                                               self._taddr, self._nt, None)
            _check(err, "submitting events")
        self._nt = 0
        self._keep.clear()
        self._seen.clear()
        self._last = None
        if self._live is not None and self._live.value >> 1 != self._gen:
            self._refresh()
        fl = self._flight
        if fl is not None and not self._closed:
            if fl.sync and not fl.word.value:
                # stop/wait: act at the end of the triggering step, so the
                # ring is encoded (and triggers run) now, not a drain later
                self._lib.tm_recorder_flush(self._rec)
            if fl.word.value != fl.seen:
                fl.after(self)

    def _submit_live(self) -> None:
        """A debugger is subscribed: the event goes to C now, where the
        server may pause this thread at it until the debugger resumes."""
        if self._nev != 1 or self._dev_pending or self._dev_capture or self._nt >= len(_SIZES):
            self._submit()      # device stats to copy, or what was batched before
            return
        err = self._submit_raw(self._recvp, self._evvp, _SIZES[1], self._tvp,
                               _SIZES[self._nt], None)
        self._nev = self._nt = 0
        self._bnev.value = 0
        if self._keep:
            self._keep.clear()
        if self._seen:
            self._seen.clear()      # summaries are reused within a batch only
        self._last = None
        if err:
            _check(err, "submitting events")
        if self._live is not None and self._live.value >> 1 != self._gen:
            self._refresh()

    def _refresh(self) -> None:
        """The debugger changed its level or capture requests: look up each
        observed node's level again (a capture is a level-3 call)."""
        live, srv, lib = self._live, self._srv, self._lib
        if live is None or not srv:
            return
        self._gen = live.value >> 1
        for node in self._nodes.values():
            if not node.observed or node.id == _lib.TM_NODE_NONE:
                continue
            level = lib.tm_server_level(srv, node.id)
            if level < 0:
                level = node.base
            if lib.tm_server_wants_capture(srv, node.id):
                level = 3
            if level >= 2 and not node.params:
                self._add_params(node)
            node.level = level
        # set probe-flight turned flight mode on: the triggers that live
        # in Python (SIGUSR1, exceptions, exit status)
        if self._flight is None and self._rec and lib.tm_recorder_flight_word(self._rec):
            self._flight = _flight.Flight(self, [], "continue", None)
        # set probe-ops: the debugger's op patterns, else the probe's own
        buf = ctypes.create_string_buffer(4097)
        have = lib.tm_server_ops(srv, buf, len(buf))
        want = buf.value.decode(errors="replace") if have == 1 else self._ops_own
        # applied when the model's current call returns (_exit): a
        # recorder changed in the middle of a forward would lose its stack
        self._ops_want = want if want != self.ops else None

    # ------------------------------------------------------------ hooks

    def _enter(self, node: _Node, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[int, int]:
        """A call of node begins: its ENTER event.  Returns the call's start
        time and number, which its _exit takes."""
        t = _now() - self._t0
        root = node.is_root and self._root_call(args, kwargs)
        node.depth += 1
        step = self.step_count
        if node.epoch != step:
            node.epoch = step
            node.count = 0
        call = node.count = node.count + 1
        if root:
            self._micro = call
        self._active += 1
        if not node.observed:
            return t, call
        level = node.level
        if level < 1:
            # level 0: an ENTER without tensors, packed right here
            if self._nev >= self._bev:
                self._submit()
            _EVENT_PACK(self._evbuf, self._nev * 48, step, t, t, 0, node.id, call, 0,
                        _EV_ENTER, _FWD, level, 0)
            self._nev = nev = self._nev + 1
            self._bnev.value = nev
            if self._live is not None and self._live.value & 1:
                self._submit_live()
            return t, call
        if not kwargs and len(args) == 1 and type(args[0]) is _Tensor:
            x = args[0]         # one positional tensor: no flattening
            if level >= 2:
                self._grad_hook(x, node, call, _lib.SLOT_GRAD_IN, 0)
            self._event1(_EV_ENTER, _FWD, node.id, call, t, t, 0, x, _lib.SLOT_IN, level, 0)
            return t, call
        tensors = flatten_call(args, kwargs, _MAX_TENSORS)
        if level >= 2:
            self._grad_hooks(node, call, tensors, _lib.SLOT_GRAD_IN)
        self._event(_EV_ENTER, _FWD, node.id, call, t, t, 0, tensors, _lib.SLOT_IN, level)
        return t, call

    def _exit(self, node: _Node, start: int, call: int, output: Any,
              returned: bool = True) -> None:
        """The call of node that began at start returned output: its EXIT
        event (returned False: it raised, and _raise made its event)."""
        t = _now() - self._t0
        node.depth -= 1
        self._active -= 1
        if returned and node.observed and not self._closed:
            level = node.level
            if type(output) is _Tensor:
                self._event1(_EV_EXIT, _FWD, node.id, call, t, start, t, output,
                             _lib.SLOT_OUT, level, 0)
                if level >= 2:
                    self._grad_hook(output, node, call, _lib.SLOT_GRAD_OUT, 0)
            else:
                tensors = flatten(output, _MAX_TENSORS)
                self._event(_EV_EXIT, _FWD, node.id, call, t, start, t, tensors,
                            _lib.SLOT_OUT, level)
                if level >= 2:
                    self._grad_hooks(node, call, tensors, _lib.SLOT_GRAD_OUT)
        if node.is_root:
            self._root_depth -= 1
            if not self._root_depth and self._ops_want is not None and not self._closed:
                want, self._ops_want = self._ops_want, None
                try:
                    self._apply_ops(want)
                except ValueError:
                    pass        # the server checked the patterns already

    def _raise(self, node: _Node, start: int, call: int, exc: BaseException) -> None:
        """The call of node that began at start raised exc: its RAISE event,
        after the step's "exception" annotation naming exc (type, message),
        made once for an exception however many calls it leaves."""
        if node.observed and not self._closed:
            try:
                key = (id(exc), self.step_count)
                if self._exc_noted != key:
                    self._exc_noted = key
                    self._annotate("exception", [type(exc).__name__, _exc_message(exc)])
                t = _now() - self._t0
                self._event(_EV_RAISE, _FWD, node.id, call, t, start, t, [], _lib.SLOT_OUT,
                            node.level)
            except Exception:   # noqa: BLE001 -- the model's exception is the one to see
                pass
        self._exit(node, start, call, None, False)

    def _grad_hooks(self, node: _Node, call: int, tensors: list[torch.Tensor],
                    slot_kind: int) -> None:
        if not _grad_enabled():
            return
        for j, x in enumerate(tensors):
            self._grad_hook(x, node, call, slot_kind, j)

    def _grad_hook_py(self, x: torch.Tensor, node: _Node, call: int, slot_kind: int,
                      index: int, grad_off_too: bool = False) -> None:
        """(node, call) wants x's gradient as slot_kind.index (a BWD event),
        if x requires one and autograd records (grad_off_too: whether it
        records now or not).  _hook.c's ProbeBase._grad_hook also lets the calls that
        want one tensor's gradient share a hook."""
        if not (x.requires_grad and (grad_off_too or _grad_enabled())):
            return
        if x.grad_fn is not None:
            x.register_hook(_partial(self._on_grad, node, call, slot_kind, index))
            return
        # a leaf: one hook holding the calls since its last backward, as
        # _hook.c's GradHook (a hook per call would report each again at
        # every later backward)
        hooks = x._backward_hooks
        last = next(reversed(hooks.values())) if hooks else None
        if not (isinstance(last, _LeafGrad) and last.probe is self):
            last = _LeafGrad(self)
            x.register_hook(last)
        last.add(node, call, slot_kind, index)

    if _hook is None:
        _grad_hook = _grad_hook_py

    def _leaf_grad_hook(self, x: torch.Tensor, node: _Node, call: int, slot_kind: int,
                        index: int) -> None:
        """A compiled region's call wants the gradient of x, a leaf it was
        handed (_compiled.leaf_grads): the hook eager mode gives it, though
        the region's forward ran with autograd off."""
        self._grad_hook(x, node, call, slot_kind, index, True)

    def _on_grad(self, node: _Node, call: int, slot_kind: int, index: int,
                 grad: torch.Tensor) -> None:
        if self._closed:
            return
        if self._scaler_watch:
            self._grad_check(grad)
        t = _now() - self._t0
        self._event1(_EV_BWD, _BWD, node.id, call, t, t, t, grad, slot_kind, node.level, index)

    # ------------------------------------------------------------ the loop

    def _training(self) -> bool:
        """Whether this process trains: an optimizer exists or has stepped."""
        return self._opt_steps > 0 or len(self._optimizers) > 0

    def _root_call(self, args: tuple[Any, ...], kwargs: Any) -> bool:
        """A root node's call begins (_enter; a compiled region's, from its
        flush): whether it is the outermost, which may begin a step."""
        root = not self._root_depth
        if root:
            self._root_enter()
        self._root_depth += 1
        if root and self.on_root_call is not None and not self._rerunning:
            self.on_root_call(args, kwargs)     # inside the call: annotates its step
        return root

    def _root_enter(self) -> None:
        """A root call begins: whether it begins a step (doc/manual.md,
        "Steps").  It does after an optimizer step was attempted in the
        current step, and next to an inference call (one made without
        autograd, or with no optimizer in the process) outside an
        evaluation scope; training calls before the optimizer steps are
        micro-batches of one step.  The step moves when the next root call
        starts, so that a backward, the optimizer and logging stay in the
        step of their forward."""
        if self._rerunning:
            return      # a compiled region's eager re-run: the step it re-runs
        if not self._fw_done:
            self._fw_done = _loop.patch_frameworks(self)
        if self._grad_queued:           # a backward that raised: its callbacks never ran
            self._grads_done()
        plain = not (_grad_enabled() and self._training())
        if not self._manual_step and (self._pending() or (
                self._step_calls and not self._eval_depth and plain)):
            self._advance()
        self._step_plain = plain and not self._eval_depth
        self._step_calls += 1
        if self._step_calls == 1:
            self._step_begins()

    def _pending(self) -> bool:
        """Whether the next root call begins a step whatever it is: the
        optimizer stepped, or the step was an inference call."""
        return self._attempted or bool(self._step_calls and not self._eval_depth
                                       and self._step_plain)

    def _step_begins(self) -> None:
        """The first root call of a step: the loss scale it runs with."""
        sc = self._scaler() if self._scaler is not None else None
        if sc is not None and sc.is_enabled():
            self._note_scale(sc)

    def _advance(self) -> None:
        self.step_count += 1
        self._step_calls = 0
        self._attempted = False
        self._step_plain = False
        self._submit()

    def _opt_post(self, opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        """optimizer.step returned: the iteration's optimizer step is done
        (the step moves at the next root call) and the parameters it
        changed have new values."""
        self._opt_steps += 1
        self._optimizers.add(opt)
        self._attempted = True
        if self._params and not self._closed:
            self._param_values(opt, _BWD)

    def _param_values(self, opt: torch.optim.Optimizer | None, phase: int) -> None:
        """PARAM data events of level-2 parameters (those opt holds): the
        optimizer's entries are looked up once, not each step, and their
        events made in one call (_hook.c's ProbeBase._param_events)."""
        if opt is None:
            entries = [(pid, node, p) for pid, p, node in self._params]
        else:
            shape = tuple(len(g["params"]) for g in opt.param_groups)
            hit = self._opt_entries.get(opt)
            if hit is None or hit[0] != shape or hit[1] != len(self._params):
                mine = {id(p) for g in opt.param_groups for p in g["params"]}
                hit = (shape, len(self._params),
                       [(pid, node, p) for pid, p, node in self._params if id(p) in mine])
                self._opt_entries[opt] = hit
            entries = hit[2]
        self._param_events(entries, _lib.SLOT_DATA, phase, max(self._micro, 1),
                           _now() - self._t0, False)

    def _param_events_py(self, entries: Any, slot_kind: int, phase: int, call: int, t: int,
                         grad: bool) -> None:
        """A PARAM event for each (pid, node, param) of entries whose node
        is at level >= 2, of param.grad when grad (as _hook.c does it)."""
        for pid, node, p in entries:
            if self._closed:
                return
            level = node.level
            x = p.grad if grad else p
            if level >= 2 and x is not None:
                self._event1(_EV_PARAM, phase, pid, call, t, t, t, x, slot_kind, level, 0)

    if _hook is None:
        _param_events = _param_events_py

    def _watch(self, p: torch.Tensor, pid: int | None, node: _Node | None) -> None:
        """A gradient hook on parameter p: its PARAM grad event when the
        gradient is accumulated (pid, node: its node), and the scaler's
        check."""
        if id(p) in self._watched or not isinstance(p, _Tensor) or not p.requires_grad \
                or not p.is_leaf:
            return
        self._watched.add(id(p))
        hook: Any
        if _hook is not None:
            hook = _hook.ParamHook(self, pid, node)     # no Python per gradient
        else:
            hook = _partial(self._on_param_grad, pid, node)
        self._handles.append(p.register_post_accumulate_grad_hook(hook))

    def _on_param_grad(self, pid: int | None, node: _Node | None, p: torch.Tensor) -> None:
        """p.grad was accumulated (backward of the current micro-batch): a
        PARAM grad event in the step and phase bwd it belongs to, whether or
        not the optimizer then steps."""
        if self._closed:
            return
        g = p.grad
        if g is None:
            return
        if self._scaler_watch:
            self._grad_check(g)
        if node is not None and node.level >= 2 and pid is not None:
            self._grad_pending[pid] = (pid, node, p)
            if not self._grad_queued:
                self._grads_queue()

    def _grads_queue(self) -> None:
        """The first gradient of a backward to record: its events are made
        when the backward ends, after DDP's averaging."""
        try:
            _queue_callback(self._grads_queue_again)
            self._grad_queued = True
        except RuntimeError:        # not inside autograd's engine
            self._grads_done()

    def _grads_queue_again(self) -> None:
        """Behind the callbacks queued since (DDP's reducer finishes the
        averaged gradients in one): autograd runs those queued while its
        callbacks run, in order."""
        try:
            _queue_callback(self._grads_done)
        except RuntimeError:
            self._grads_done()

    def _grads_done(self) -> None:
        """The backward of the current micro-batch ended: PARAM grad events
        of the parameters it accumulated into, as the optimizer will read
        them."""
        self._grad_queued = False
        pending, self._grad_pending = self._grad_pending, {}
        if self._closed or not pending:
            return
        self._param_events(list(pending.values()), _lib.SLOT_GRAD, _BWD, max(self._micro, 1),
                           _now() - self._t0, True)

    def _grad_check(self, g: torch.Tensor) -> None:
        """A gradient of the backward while a GradScaler runs: one that is
        not all finite means the scaler skips this step's optimizer step
        (it checks the parameters' gradients, which follow from it), known
        from here on, before this gradient's own event."""
        if self._skip_noted != self.step_count and isinstance(g, _Tensor) and \
                not bool(torch.isfinite(g).all()):
            self._note_skipped()

    def _scaler_seen(self, scaler: Any) -> None:
        """GradScaler.scale or .step of an enabled scaler."""
        if self._scaler is None or self._scaler() is not scaler:
            self._scaler = weakref.ref(scaler)
            self._scaler_watch = True
            if self.model is not None:
                for p in self.model.parameters():
                    self._watch(p, None, None)
        if self._scale_noted != self.step_count:
            self._note_scale(scaler)

    def _note_scale(self, scaler: Any) -> None:
        self._scale_noted = self.step_count
        try:
            scale = float(scaler.get_scale())
        except Exception:       # noqa: BLE001 -- a scaler we cannot read
            return
        self._annotate("scaler.scale", [f"{scale:.17g}"])

    def _scaler_stepped(self, skipped: bool) -> None:
        """GradScaler.step returned: an optimizer step attempted, which the
        scaler skipped when optimizer.step did not run."""
        self._attempted = True
        if skipped:
            self._note_skipped()

    def _note_skipped(self) -> None:
        if self._skip_noted != self.step_count:
            self._skip_noted = self.step_count
            self._annotate("scaler.skipped", ["true"])

    @contextlib.contextmanager
    def evaluation(self) -> Iterator[None]:
        """Root calls inside are an evaluation within training: they join
        the current step (as further calls, #N) rather than being steps of
        their own.  HF Trainer.evaluate/predict and Lightning's evaluation
        steps are such scopes by themselves."""
        self._eval_depth += 1
        try:
            yield
        finally:
            self._eval_depth -= 1

    # ------------------------------------------------------------ API

    def step(self) -> None:
        """Ends the current step by hand (overrides optimizer and root counting)."""
        self._manual_step = True
        self._advance()

    def annotate(self, key: str, values: Any, count: int | None = None) -> list[str]:
        """Annotates the current step: TQL `annot.KEY` (doc/tql.md) tests
        its values, e.g. annotate("phase_name", "warmup"); key "request" is
        the ids of the requests a serving step runs (TQL `request`).  The
        probe itself writes scaler.scale and scaler.skipped.  A condition
        at an event sees the annotations made before it.  The
        record goes after the events before this call and before those
        after it; at most TM_ANNOT_MAX_VALUES values are kept, each as text
        cut to 255 bytes, and count (default len(values)) says how many
        there were.  Returns the values kept, as the trace has them."""
        if self._closed:
            return []
        if not self._manual_step and not self._root_depth and self._pending():
            self._advance()         # between iterations: about the next one
        return self._annotate(key, values, count)

    def _annotate(self, key: str, values: Any, count: int | None = None) -> list[str]:
        if self._closed:
            return []
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            values = [values]       # annotate("phase_name", "warmup")
        self._submit()
        kept, arr, n, total = _annot_values(values, count)
        _check(self._lib.tm_recorder_annotate(self._rec, self.step_count, _now() - self._t0,
                                              key.encode(), arr, n, total), "annotate")
        return [b.decode() for b in kept]

    def _annotate_regions(self, regs: list[tuple[str, str]]) -> None:
        """The step's "compiled" and "compiled-levels" annotations
        (_compiled.run_flush), as two annotate() calls make them, with one
        submit; their values encoded once while the step's regions are
        those of the last (a model compiled as one region: every step)."""
        if self._closed:
            return
        if not self._manual_step and not self._root_depth and self._pending():
            self._advance()         # as annotate() does
        key = tuple(regs)
        enc = self._compiled_enc
        if enc is None or enc[0] != key:
            enc = self._compiled_enc = (
                key, _annot_values([a for a, _ in regs], None)[1:],
                _annot_values([lv for _, lv in regs], None)[1:])
        self._submit()
        t = _now() - self._t0
        for name, (arr, n, total) in ((b"compiled", enc[1]), (b"compiled-levels", enc[2])):
            _check(self._lib.tm_recorder_annotate(self._rec, self.step_count, t, name, arr, n,
                                                  total), "annotate")

    def set_ops(self, ops: str | None) -> None:
        """Records op events (_ops.py) for the nodes matching ops, a
        comma-separated list of address patterns (`main`: the code outside
        every module call); None or "" stops and uninstalls everything.
        Call it on the thread that runs the model: its dispatch mode is that
        thread's."""
        self._apply_ops(ops)
        self._ops_own = self.ops

    def _apply_ops(self, ops: str | None) -> None:
        pats = _ops_mod.split_patterns(ops)
        for pat in pats:
            if self._lib.tm_path_glob(pat.encode(), b"model") < 0:
                raise ValueError(f"bad op pattern {pat!r}")
        if self._closed:
            return
        if self._ops is not None:
            self._ops.uninstall()
            self._ops = None
        self._ops_patterns = pats
        if pats:
            rec = _ops_mod.OpRecorder(self, pats)
            self._ops = rec
            rec.install()

    @property
    def ops(self) -> str:
        """The op patterns in effect, comma-separated ("" when off)."""
        return ",".join(self._ops_patterns) if self._ops is not None else ""

    def dump(self, reason: str = "dump()") -> bool:
        """Flight mode: writes the window now (the events so far) to
        probe.path and records normally from then on.  Returns False when
        not in flight mode or closed; a second dump only flushes."""
        if self._flight is None or self._closed or not self._rec:
            return False
        self._submit()
        return self._flight_dump_now(reason)

    def _flight_dump_now(self, reason: str) -> bool:
        """The window as handed over so far (safe in a signal handler)."""
        if self._flight is None or self._closed or not self._rec:
            return False
        err = self._lib.tm_recorder_flight_dump(self._rec, reason.encode(errors="replace"),
                                                self._trigger_step())
        if err:
            detail = self._lib.tm_recorder_detail(self._rec).decode(errors="replace")
            print(f"tensormorph-probe: {detail or _lib.strerror(err)}", file=sys.stderr,
                  flush=True)
            return False
        return True

    def _trigger_step(self) -> int:
        """The step a trigger outside the model belongs to: between an
        optimizer step and the next forward the iteration is over, and the
        trigger is in the next one (doc/manual.md, "Steps"), so the window
        holds the step that just ended among its complete steps."""
        if not self._manual_step and not self._root_depth and self._pending():
            return self.step_count + 1
        return self.step_count

    def flight_info(self) -> dict[str, Any]:
        """Flight mode: steps configured and held, bytes, dumps, the
        trigger's reason ({} when not in flight mode)."""
        return self._flight.info(self) if self._flight is not None else {}

    def flush(self) -> None:
        """Hands over pending events and waits until they are written."""
        self._submit()
        if self._rec:
            _check(self._lib.tm_recorder_flush(self._rec), "flush")

    def listen(self, path: str | os.PathLike[str] | None = None, wait: float | None = None,
               quiet: bool = False, pause: float | None = None) -> str:
        """Lets tmdb attach to this process (`tmdb -ex "attach PID"`): starts
        libtensormorph's wire server on a Unix socket (default: PID.sock in
        $XDG_RUNTIME_DIR/tensormorph or /tmp/tensormorph-UID, a 0700
        directory).  With wait, blocks up to that many seconds until a
        debugger subscribes; the model then pauses at its next module event
        so that the debugger's breakpoints apply from the start.  pause: how
        long a stop may hold the model -- None until the debugger resumes it,
        0 never (record and notify: tmdb shows the stop and reads on while
        the model runs, as a server must), S seconds at most.  Returns the
        socket path; calling it again returns the same one."""
        if self._closed:
            raise ProbeError("listen: the probe is closed")
        if self._srv:
            assert self.address is not None
            return self.address
        lib = self._lib
        opts = _lib.ServerOpts()
        lib.tm_server_opts_default(ctypes.byref(opts))
        if path is not None:
            opts.path = os.fsencode(path)
        opts.probe_kind = self.probe_kind.encode()
        opts.caps |= _lib.CAP_OPS
        # absolute: tmdb reads a flight window from it, from its own cwd
        opts.trace = os.path.abspath(self.path).encode() if self.path else None
        if pause is not None:
            if pause < 0:
                raise ValueError(f"pause must be >= 0 seconds, got {pause}")
            opts.no_pause = int(pause == 0)
            opts.pause_ms = max(1, int(pause * 1000)) if pause > 0 else 0
        handle = ctypes.c_void_p()
        err = lib.tm_server_start(ctypes.byref(opts), ctypes.byref(handle))
        if err:
            where = os.fspath(path) if path is not None else "the default socket"
            why = (lib.tm_server_start_error() or b"").decode(errors="replace")
            raise ProbeError(f"cannot listen on {where}: {why or _lib.strerror(err)}")
        self._srv = handle.value
        err = lib.tm_recorder_serve(self._rec, self._srv)
        if err:
            lib.tm_server_stop(self._srv)
            self._srv = None
            _check(err, "serving the debugger")
        if _hook is not None:
            # a stop is a stop: an interrupt between events holds the
            # program at its next bytecode (_hook.c pause_entry)
            hold = ctypes.cast(lib.tm_server_hold, ctypes.c_void_p).value
            lib.tm_server_pause_handler(
                self._srv, _hook.pause_entry(hold, self._srv, self._after_hold), None)
        self.address = lib.tm_server_path(self._srv).decode()
        self._live_addr = lib.tm_server_state(self._srv)
        self._live = ctypes.c_uint32.from_address(self._live_addr)
        self._gen = self._live.value >> 1
        self._rerun_snap = hasattr(lib, "tm_server_rerun")
        token_path = lib.tm_server_token_path(self._srv).decode()
        if token_path:
            # TCP: tmdb on this host reads the token from the file; elsewhere
            # (through an SSH tunnel) it is given with --token
            token = lib.tm_server_token(self._srv).decode()
            hostport = self.address[len("tcp://"):]
            print(f"tensormorph-probe: listening on {self.address}, token {token} "
                  f"(also in {token_path}; tmdb -ex 'target remote {hostport}')",
                  file=sys.stderr, flush=True)
        elif not quiet:
            print(f"tensormorph-probe: listening on {self.address} "
                  f"(tmdb -ex 'attach {os.getpid()}')", file=sys.stderr, flush=True)
        if wait is not None and wait != 0:
            ms = -1 if wait < 0 else max(1, int(wait * 1000))
            err = lib.tm_server_wait_client(self._srv, ms)
            if err == _lib.TM_ERR_AGAIN:
                print(f"tensormorph-probe: no debugger attached within {wait:g} s; "
                      "running on", file=sys.stderr, flush=True)
        return self.address

    def _after_hold(self) -> None:
        """The program was held between events (_hook.c run_hold): if the
        debugger killed it meanwhile, it ends here, its trace finished
        (the recorder dies of SIGKILL), before any more of it runs."""
        if self._srv and self._lib.tm_server_killed(self._srv):
            self._submit()
            self._lib.tm_recorder_submit(self._rec, None, 0, None, 0, None)

    @property
    def debugger_attached(self) -> bool:
        """Whether a debugger is subscribed to this probe right now."""
        return bool(self._srv and self._live is not None and self._live.value & 1)

    def drop_debugger(self) -> bool:
        """Disconnects the attached debugger, if any, as if it had gone
        away: a paused model resumes and a debugger may attach again."""
        if not self.debugger_attached:
            return False
        self._lib.tm_server_drop(self._srv)
        return True

    def server_stats(self) -> dict[str, int]:
        """The debugger server's counters ({} when not listening)."""
        if not self._srv:
            return {}
        s = _lib.ServerStats()
        self._lib.tm_server_get_stats(self._srv, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _lib.ServerStats._fields_}

    def stats(self) -> dict[str, int]:
        s = _lib.RecorderStats()
        if self._rec:
            self._lib.tm_recorder_get_stats(self._rec, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _lib.RecorderStats._fields_}

    def _unhook(self) -> None:
        """Takes the probe out of the model and of torch."""
        if self._ops is not None:
            self._ops.uninstall()
            self._ops = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._unwrap_all()
        for undo in self._undo:
            undo()
        self._undo.clear()

    def close(self, at_exit: bool = False) -> None:
        """Removes every hook, writes what is pending and closes the trace.
        at_exit (the interpreter is ending): a flight window not written
        yet waits for the exit status, which triggers when it is not 0."""
        if self._closed:
            return
        self._unhook()
        if self._flight is not None:
            self._flight.uninstall()
        _compiled.unregister(self._cid)
        try:
            self._submit()
            if self._flight is not None and self._rec:
                self._flight.closing(self)
        finally:
            self._closed = True
            rec, self._rec = self._rec, None
            atexit.unregister(self._atexit)
            if self._srv:
                # every event went out; the debugger gets BYE and the model
                # is not paused again
                self._lib.tm_recorder_serve(rec, None)
                self._rerun_snap = False
                self._snaps.clear()
                self._live = None
                self._live_addr = 0
                self._lib.tm_server_pause_handler(self._srv, None, None)
                if _hook is not None:
                    _hook.pause_entry(0, 0, None)   # a hold still queued does nothing
                self._lib.tm_server_stop(self._srv)
                self._srv = None
            # in flight mode (the C side knows: set probe-flight turns it
            # on and off) the exit status may still trigger
            if (at_exit and self._flight is not None and
                    self._lib.tm_recorder_close_at_exit(rec, self._trigger_step()) == 0):
                return
            err = self._lib.tm_recorder_close(rec)
            _check(err, f"closing {self.path or 'the probe'}")

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_compiled.skip_eager_path(Probe)


def _close_ref(ref: weakref.ref[Probe]) -> None:
    p = ref()
    if p is not None:
        p.close(at_exit=True)


def _forked_ref(ref: weakref.ref[Probe]) -> None:
    """In a child of fork() (DataLoader workers): the recorder, its writer
    thread, the trace file and the debugger's socket are the parent's.  The
    child's copy of the probe lets go of all of them without a C call: its
    hooks come off and it records nothing."""
    p = ref()
    if p is None or p._closed:
        return
    p._unhook()
    p._closed = True
    p._rec = None
    p._srv = None
    p._live = None
    p._live_addr = 0
    atexit.unregister(p._atexit)


_active: weakref.ref[Probe] | None = None


def active() -> Probe | None:
    """The probe attached last in this process, if it is still open."""
    p = _active() if _active is not None else None
    return None if p is None or p._closed else p


@contextlib.contextmanager
def evaluation() -> Iterator[None]:
    """`with tensormorph_probe.evaluation(): ...` around a hand-written
    evaluation inside training: its root calls join the current step
    (Probe.evaluation) instead of being steps of their own.  Without an
    active probe it does nothing, so a script may keep it."""
    p = active()
    if p is None:
        yield
        return
    with p.evaluation():
        yield


def _env_listen() -> tuple[str | None, float | None]:
    """TENSORMORPH_LISTEN (1 or a socket path) and TENSORMORPH_WAIT (seconds)."""
    listen = os.environ.get("TENSORMORPH_LISTEN", "")
    if not listen or listen == "0":
        return None, None
    wait = os.environ.get("TENSORMORPH_WAIT")
    try:
        seconds = float(wait) if wait else None
    except ValueError:
        raise ValueError(f"TENSORMORPH_WAIT must be a number of seconds, got {wait!r}") from None
    return listen, seconds


def attach(model: torch.nn.Module | None = None, level: int = 1,
           record: str | os.PathLike[str] | None = "run.tmrun",
           nodes: str | Iterable[str] = "model.**", levels: Mapping[str, int] | None = None,
           lossless: bool = False, **options: Any) -> Probe:
    """Starts recording (record=None: observe without a file, for a live
    debugger).  With model=None the first root module called becomes
    `model` (torch's global module hooks), so an unmodified script can be
    recorded.  With TENSORMORPH_LISTEN=1 in the environment the probe also
    listens for tmdb (see Probe.listen; TENSORMORPH_WAIT=S waits for it);
    TENSORMORPH_LISTEN=PATH listens on PATH, in a distributed job on
    rank_socket_path(PATH, rank).  In a distributed job `record` names the
    job's recording: each rank writes its own trace (probe.path) and rank 0
    the manifest (probe.manifest).  flight=N (or TENSORMORPH_FLIGHT=N) keeps
    only the last N steps in memory and writes `record` at a trigger
    (triggers=[TQL...], a crash, SIGUSR1, dump(), an uncaught exception,
    sys.exit(N != 0); on_trigger, flight_budget: see _flight.py).
    Returns the probe; also usable as a context manager."""
    global _active
    if options.get("ops") is None and os.environ.get("TENSORMORPH_OPS"):
        options["ops"] = os.environ["TENSORMORPH_OPS"]
    if "flight" not in options:
        steps, budget = _flight.env_flight()
        if steps:
            options["flight"] = steps
            options.setdefault("flight_budget", budget)
    probe = Probe(model, level, record, nodes, levels, lossless, **options)
    _active = weakref.ref(probe)
    where, wait = _env_listen()
    if where is not None:
        path = None if where == "1" else where
        try:
            if path is not None and probe.world_size > 1:
                # every rank of the job sees the same variable
                path = rank_socket_path(path, probe.rank)
            # a debugger that launched us waits for the socket: no banner
            probe.listen(path, wait, quiet=wait is not None)
        except ProbeError as e:
            # the environment asked for a listener, the program did not:
            # it runs on (and records) without one
            print(f"tensormorph-probe: {e}; running on without a listener",
                  file=sys.stderr, flush=True)
        except BaseException:
            probe.close()
            raise
    return probe


def listen(model: torch.nn.Module | None = None, path: str | os.PathLike[str] | None = None,
           wait: float | None = None, **options: Any) -> Probe:
    """Makes this process debuggable by tmdb: serves the active probe, or
    attaches a new one (record=None unless given) and serves it.  Returns
    the probe."""
    probe = active()
    if probe is None:
        options.setdefault("record", None)
        probe = attach(model, **options)
    probe.listen(path, wait)
    return probe


def dump(reason: str = "dump()") -> bool:
    """Flight mode: writes the active probe's window now (see Probe.dump)."""
    p = active()
    return p.dump(reason) if p is not None else False
