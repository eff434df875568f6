"""What the vLLM and SGLang plugins share: one tensormorph_probe.Probe per
worker (tensor-parallel rank), its socket, its run metadata, the eager-mode
check, the request ids of each step and the pause policy (doc/serving.md).

A server is not a training script: it runs for days, answers other people's
requests, and its model is compiled and replayed through CUDA graphs unless
told otherwise.  So a serving probe
  - is started only on request (TENSORMORPH_LISTEN or TENSORMORPH_RECORD),
    once per process whatever the number of plugin loads;
  - says loudly, at attach and again after the first forward, when the
    model does not run eagerly: module hooks then record nothing;
  - keeps one step per model forward (a batch of requests), and the ids of
    the requests of each step, since requests are the time axis of a server;
  - does not let a debugger pause the server unless the user asked for it:
    by default a breakpoint records and notifies (tmdb shows the stop and
    reads on, the server keeps answering); with
    TENSORMORPH_SERVING_PAUSE=SECONDS a stop holds the model for at most that
    long, and libtensormorph's server then resumes it by itself.

Everything that observes the model is tensormorph_probe.Probe; this module
only decides when and how to start it.
"""

from __future__ import annotations

import collections
import functools
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..probe import Probe, ProbeError, rank_socket_path
from . import touchpoints

ENV_LISTEN = "TENSORMORPH_LISTEN"
ENV_WAIT = "TENSORMORPH_WAIT"
ENV_LEVEL = "TENSORMORPH_LEVEL"
ENV_RECORD = "TENSORMORPH_RECORD"
ENV_PAUSE = "TENSORMORPH_SERVING_PAUSE"
ENV_STRICT = "TENSORMORPH_SERVING_STRICT"
ENV_ROWS = "TENSORMORPH_SERVING_ROWS"

REQUEST_HISTORY = 4096              # steps kept in memory for requests_at()


def _say(msg: str) -> None:
    print(f"tensormorph-probe: {msg}", file=sys.stderr, flush=True)


class Refused(ProbeError):
    """TENSORMORPH_SERVING_STRICT refused a worker the probe would not see:
    the one error the plugins let reach the framework, because the user
    asked for it."""


_said: set[str] = set()


def say_once(key: str, msg: str) -> None:
    """msg, the first time key is said in this process."""
    if key not in _said:
        _said.add(key)
        _say(msg)


def guarded(where: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), or None when it raises: a debugging aid must
    never take a server down.  The first failure at `where` is said with
    its traceback, later ones not at all; Refused (strict mode) passes."""
    try:
        return fn(*args, **kwargs)
    except Refused:
        raise
    except Exception as exc:
        report(where, exc)
        return None


def report(where: str, exc: BaseException) -> None:
    """Says, once per where, that the plugin failed there and the server
    runs on."""
    import traceback
    say_once("failed:" + where,
             f"{where} failed ({type(exc).__name__}: {exc}); the server runs on.\n"
             + "".join(traceback.format_exception(exc)).rstrip())


def requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for a serving probe at all."""
    env = os.environ if env is None else env
    return env.get(ENV_LISTEN, "0") not in ("", "0") or bool(env.get(ENV_RECORD))


_registered: set[str] = set()


def installed_version(framework: str) -> str | None:
    """The installed distribution's version, from its metadata (importing
    the framework is not needed, nor wanted in every process)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(framework)
    except PackageNotFoundError:
        return None


def register_plugin(framework: str, module: str, install: Callable[[Any], None]) -> None:
    """The body of a framework's plugin entry point: once per process
    (frameworks load plugins in many processes, vLLM possibly more than
    once in one), nothing at all unless the environment asks for a probe,
    a warning naming the framework's version when it is outside the
    supported range (touchpoints.SUPPORTED), and never an exception: vLLM
    calls its plugins unguarded, so anything raised here would stop the
    server.  install gets the imported module."""
    try:
        if framework in _registered:
            return
        _registered.add(framework)
        if not requested():
            return
        note = touchpoints.version_note(framework, installed_version(framework))
        if note is not None:
            _say(f"WARNING: {framework} plugin: {note}")
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            _say(f"{framework} plugin: cannot import {module} ({exc}); no probe will be "
                 "attached")
            return
        install(mod)
    except Exception as exc:
        report(f"{framework} plugin registration", exc)


def pause_timeout(env: Mapping[str, str] | None = None) -> float | None:
    """TENSORMORPH_SERVING_PAUSE: None when real pauses were not asked for
    (stops record and notify), else the most seconds one stop may hold the
    server (> 0)."""
    env = os.environ if env is None else env
    v = env.get(ENV_PAUSE, "")
    if v in ("", "0"):
        return None
    try:
        t = float(v)
    except ValueError:
        raise ValueError(f"{ENV_PAUSE} must be a number of seconds, got {v!r}") from None
    if not t > 0 or t != t or t == float("inf"):
        raise ValueError(f"{ENV_PAUSE} must be a finite number of seconds > 0, got {v!r}")
    return t


@dataclass(frozen=True)
class Execution:
    """How a worker's model forward runs, as its framework RESOLVED it
    (vLLM's compilation config after VllmConfig.__post_init__, SGLang's
    resolved exec namespace), not as flags asked for it."""
    compiled: tuple[str, ...] = ()   # what torch.compile's the model (empty: nothing)
    graphs: tuple[str, ...] = ()     # what replays CUDA graphs (empty: nothing)
    source: str = ""                 # where the decision was read

    @property
    def eager(self) -> bool:
        return not self.compiled and not self.graphs

    def describe(self) -> str:
        if self.eager:
            return "eager"
        return "; ".join(self.compiled + self.graphs)


def unobserved(ex: Execution) -> list[str]:
    """THE decision of the plugins: why the probe would not see this
    worker's forwards (empty: it sees them).  torch.compile'd code it sees:
    dynamo traces the probe's own path into the graphs (doc/manual.md,
    "Compiled models"), so a resolved torch.compile is observed.  A CUDA
    graph replay runs no Python, and the frameworks capture their graphs
    themselves (vLLM's piecewise graphs, SGLang's), not split where the
    probe's host operators are: CUDA graphs are not observed, nor is a
    decision the probe could not read (unresolved)."""
    compiled = [c for c in ex.compiled if not c.startswith("torch.compile")]
    return compiled + list(ex.graphs)


@dataclass
class Worker:
    """What a plugin found out about the worker it runs in."""
    framework: str                   # "vllm" | "sglang"
    model: torch.nn.Module
    rank: int                        # global rank of this worker
    world_size: int                  # workers in the server (tp * pp * dp)
    tp_rank: int = 0
    tp_size: int = 1
    execution: Execution = field(default_factory=Execution)
    # the request ids of the batch about to run, from the root forward's
    # arguments; None where the framework does not expose them
    request_ids: Callable[[tuple[Any, ...], dict[str, Any]], Sequence[str] | None] | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # the rows of each of those requests in the batch's [num_tokens, ...]
    # tensors: (spans, sizes), spans[j] = (start, end) of request j along
    # the leading dimension, sizes the leading sizes that are num_tokens
    # (padded or not); None where the framework does not tell
    request_rows: Callable[[tuple[Any, ...], dict[str, Any]],
                           tuple[Sequence[tuple[int, int]], Sequence[int]] | None] | None = None

    @property
    def not_eager(self) -> list[str]:
        """Why the probe would not see this worker's forwards (empty: it does)."""
        return unobserved(self.execution)


class ServingProbe(Probe):
    """A tensormorph_probe.Probe of one serving worker: its run metadata
    names the framework and the worker's rank (tmdb's `info probe`:
    "Recorded by: vllm probe, ..., rank 1 of 2"; the pairs `serving.*` say
    the rest), and a tensor-parallel server records one trace per rank plus
    the manifest that replays them together, as any distributed job."""

    def __init__(self, worker: Worker, pairs: Sequence[tuple[str, str]], *args: Any,
                 **kwargs: Any) -> None:
        self._worker = worker
        # servers do not set RANK/WORLD_SIZE for their workers
        super().__init__(worker.model, *args, rank=worker.rank,
                         world_size=worker.world_size, probe_kind=worker.framework,
                         meta=list(pairs), **kwargs)


class Session:
    """The serving probe of one worker: the Probe, its socket and the
    request log."""

    def __init__(self, worker: Worker, probe: Probe, requests_path: str | None,
                 pause: float | None) -> None:
        self.worker = worker
        self.probe = probe
        self.address: str | None = None
        self.requests_path = requests_path
        self.pause = pause
        self.forwards = 0
        self._history: collections.deque[tuple[int, list[str], int]] = collections.deque(
            maxlen=REQUEST_HISTORY)
        self._log = None
        self._inner_calls = 0
        self._warned_hooks = False
        m = worker.model
        # inside the probe's root hook: step_count is this forward's step,
        # and the annotation goes before the forward's first event
        probe.on_root_call = self._root_pre
        self._handles = [
            # always_call: a forward that raises still leaves the forward
            m.register_forward_hook(self._root_post, always_call=True),
        ]
        # Whether a forward's body ran as modules: the leaves that own
        # weights.  Not the first leaf: on a pipeline rank after the first,
        # that is a placeholder (vLLM's and SGLang's PPMissingLayer, no
        # weights) that never runs.  A module with a hook leaves torch's
        # fast call path, so they stay only until it is known: removed
        # after the first forward of requests that ran them (whether a
        # framework compiles is decided once, for its warm-up and capture
        # runs already), or after a forward that ran none of them.
        self._leaf_handles = [leaf.register_forward_pre_hook(self._leaf_pre)
                              for leaf in _weighted_leaves(m)]
        self._traffic = False           # the running forward has requests
        # each request's rows of a batch's tensors (TENSORMORPH_SERVING_ROWS)
        self.rows = True

    # --------------------------------------------------------- per forward

    def _root_pre(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        # runs inside the probe's hook of the model's forward
        guarded(f"rank {self.worker.rank}: reading the step's requests", self._requests,
                args, kwargs)

    def _requests(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        self._inner_calls = 0
        self._traffic = True            # until known otherwise
        self.probe.set_rows(None)
        fn = self.worker.request_ids
        ids = fn(args, kwargs or {}) if fn is not None else None
        # unknown ids (None): a framework that does not tell; count it as traffic
        self._traffic = ids is None or len(ids) > 0
        if ids is not None:
            n = len(ids)
            step = self.probe.step_count
            try:
                # the trace's and the debugger's (TQL `request`); the log
                # and requests_at() keep the same ids, cut as the trace
                # cuts them
                kept = self.probe.annotate("request", ids, count=n)
            except Exception as exc:
                kept = []
                if self.forwards == 0:
                    _say(f"rank {self.worker.rank}: cannot annotate step {step}: {exc}")
            self._history.append((step, kept, n))
            if n > 1 and self.rows and self.worker.request_rows is not None:
                # a stat of a batched tensor mixes its requests: each
                # request's rows get stats of their own (set_rows)
                rows = guarded(f"rank {self.worker.rank}: reading the requests' rows",
                               self.worker.request_rows, args, kwargs or {})
                if rows is not None and len(rows[0]) == n == len(kept):
                    self.probe.set_rows(rows[0], rows[1])
            if self._log is None and self.requests_path:
                self._log = open(self.requests_path, "a", encoding="utf-8")  # noqa: SIM115
            if self._log is not None:
                self._log.write(json.dumps({"step": step, "requests": kept, "count": n}) + "\n")
                self._log.flush()

    def _leaf_pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        self._inner_calls += 1

    def _root_post(self, module: torch.nn.Module, args: tuple[Any, ...], out: Any) -> None:
        self.forwards += 1
        self.probe.set_rows(None)
        if not self._leaf_handles:
            return
        # a compiled forward the probe observed: its region ended in it
        if self._inner_calls > 0 or self.probe._compiled_step == self.probe.step_count:
            if self._traffic:
                self._drop_leaf_hooks()
            return
        # The root was called but none of its weighted modules: the body ran
        # as a compiled graph.  Said once, for any forward (a profiling run
        # may run eagerly, the compiled warm-up after it).
        self._drop_leaf_hooks()
        if not self._warned_hooks:
            self._warned_hooks = True
            _say(f"WARNING: {self.worker.framework} rank {self.worker.rank}: forward "
                 f"{self.forwards} of the model ran but none of its modules was called: "
                 "it runs compiled (torch.compile / CUDA graphs), so module breakpoints "
                 "and traces see nothing there (doc/serving.md, \"Eager mode\").")

    def _drop_leaf_hooks(self) -> None:
        for h in self._leaf_handles:
            h.remove()
        self._leaf_handles.clear()

    @property
    def checking_compiled(self) -> bool:
        """Whether the hooks that tell a compiled forward are still on."""
        return bool(self._leaf_handles)

    def requests_at(self, step: int) -> list[str] | None:
        """The request ids of step (one model forward), while still kept."""
        for s, ids, _ in reversed(self._history):
            if s == step:
                return list(ids)
        return None

    @property
    def released(self) -> int:
        """Stops the pause timeout ended (the server resumed by itself)."""
        return self.probe.server_stats().get("timed_out", 0)

    # --------------------------------------------------------- end

    def close(self) -> None:
        self.probe.on_root_call = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._drop_leaf_hooks()
        try:
            self.probe.close()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None


def route_forward_through_hooks(model: torch.nn.Module) -> None:
    """Makes model.forward(...) called from outside (SGLang's runners do
    that, bypassing Module.__call__) run as model(...), so that the root's
    hooks fire: the probe's ENTER/EXIT of `model`, its step counting (one
    step per root call) and the session's request ids.  Inside the call,
    forward is the class's own; inspect.signature still sees it."""
    if getattr(model.forward, "_tensormorph", False):
        return
    orig = model.forward
    inside = threading.local()

    @functools.wraps(orig)
    def forward(*args: Any, **kwargs: Any) -> Any:
        if getattr(inside, "on", False):
            return orig(*args, **kwargs)
        inside.on = True
        try:
            return model(*args, **kwargs)
        finally:
            inside.on = False

    forward._tensormorph = True             # type: ignore[attr-defined]
    model.forward = forward                 # type: ignore[method-assign]


def _weighted_leaves(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules without children inside model (not model itself) that
    own a parameter or buffer: the ones a forward of the model runs."""
    out = []
    for m in model.modules():
        if m is model or next(iter(m.children()), None) is not None:
            continue
        if (next(iter(m.parameters(recurse=False)), None) is not None
                or next(iter(m.buffers(recurse=False)), None) is not None):
            out.append(m)
    return out


def _listen_path(value: str, worker: Worker) -> str | None:
    """TENSORMORPH_LISTEN: "1" is the default socket (PID.sock in the
    private socket directory, one per worker process); an existing directory
    gets FRAMEWORK-rankR-PID.sock in it; a path is used as is by a server of
    one worker and is the rank's own otherwise (tm_server_rank_path:
    "dbg.sock" -> "dbg.rank1.sock", as for any distributed job)."""
    if value == "1":
        return None
    if os.path.isdir(value):
        return os.path.join(value, f"{worker.framework}-rank{worker.rank}-{os.getpid()}.sock")
    if worker.world_size > 1:
        return rank_socket_path(value, worker.rank)
    return value


_sessions: dict[int, Session] = {}
_lock = threading.Lock()


def session_of(model: torch.nn.Module) -> Session | None:
    return _sessions.get(id(model))


def start(worker: Worker, env: Mapping[str, str] | None = None, *,
          level: int | None = None, record: str | None = None, listen: str | None = None,
          pause: float | None = None) -> Session | None:
    """Starts the serving probe of this worker as the environment (or the
    arguments, which win) asks; returns None when nothing was asked.  A
    second call for the same model returns the first session."""
    env = os.environ if env is None else env
    with _lock:
        old = _sessions.get(id(worker.model))
        if old is not None:
            return old
        listen = listen if listen is not None else env.get(ENV_LISTEN, "0")
        if listen in ("", "0"):
            listen = None
        record = record if record is not None else (env.get(ENV_RECORD) or None)
        if listen is None and record is None:
            return None
        if level is None:
            lv = env.get(ENV_LEVEL, "1")
            if lv not in ("0", "1", "2", "3"):
                raise ValueError(f"{ENV_LEVEL} must be 0..3, got {lv!r}")
            level = int(lv)
        if pause is None:
            pause = pause_timeout(env)
        who = f"{worker.framework} rank {worker.rank} of {worker.world_size}"

        ex = worker.execution
        blind = unobserved(ex)
        src = f" (read from {ex.source})" if ex.source else ""
        if blind:
            msg = (f"WARNING: {who}: runs {ex.describe()}{src}: the probe's hooks do not "
                   "see " + "; ".join(blind) + ", so breakpoints and traces see nothing "
                   "there.  Restart without them (doc/serving.md, \"Eager mode\").")
            if env.get(ENV_STRICT, "0") not in ("", "0"):
                raise Refused(msg.replace("WARNING: ", "") + f" ({ENV_STRICT} is set)")
            _say(msg)
        else:
            _say(f"{who}: runs {ex.describe()}{src}: the probe sees every module call")

        pairs = [("serving", worker.framework), ("serving.rank", str(worker.rank)),
                 ("serving.world_size", str(worker.world_size)),
                 ("serving.tp_rank", str(worker.tp_rank)),
                 ("serving.tp_size", str(worker.tp_size)),
                 ("serving.pid", str(os.getpid())),
                 ("serving.eager", "yes" if ex.eager else "no: " + ex.describe()),
                 ("serving.observed", "yes" if not blind else "no: " + "; ".join(blind)),
                 ("serving.pause", "record and notify" if pause is None
                  else f"at most {pause:g} s"),
                 ("serving.step", "one model forward")]
        pairs += [(f"serving.{k}", v) for k, v in worker.extra.items()]
        probe = ServingProbe(worker, pairs, level, record)
        requests_path = None
        try:
            if probe.path:
                requests_path = os.path.splitext(probe.path)[0] + ".requests.jsonl"
            s = Session(worker, probe, None, pause)
            s.rows = env.get(ENV_ROWS, "1") not in ("", "0")
            if listen is not None:
                wait = env.get(ENV_WAIT)
                try:
                    seconds = float(wait) if wait else None
                except ValueError:
                    raise ValueError(f"{ENV_WAIT} must be a number of seconds, "
                                     f"got {wait!r}") from None
                if pause is None:
                    _say(f"{who}: breakpoints record and notify: tmdb shows each stop, "
                         f"the server keeps answering ({ENV_PAUSE}=SECONDS lets a stop "
                         "hold it that long)")
                else:
                    _say(f"{who}: breakpoints will pause the server for at most {pause:g} s "
                         "each")
                # the probe's banner names the socket before any wait
                s.address = probe.listen(_listen_path(listen, worker), seconds,
                                         pause=0 if pause is None else pause)
                if requests_path is None:
                    requests_path = os.path.splitext(s.address)[0] + ".requests.jsonl"
            s.requests_path = requests_path if worker.request_ids is not None else None
        except BaseException:
            probe.close()
            raise
        _sessions[id(worker.model)] = s
        return s


def stop(model: torch.nn.Module) -> bool:
    with _lock:
        s = _sessions.pop(id(model), None)
    if s is None:
        return False
    s.close()
    return True
