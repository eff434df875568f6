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

ENV_LISTEN = "TENSORMORPH_LISTEN"
ENV_WAIT = "TENSORMORPH_WAIT"
ENV_LEVEL = "TENSORMORPH_LEVEL"
ENV_RECORD = "TENSORMORPH_RECORD"
ENV_PAUSE = "TENSORMORPH_SERVING_PAUSE"
ENV_STRICT = "TENSORMORPH_SERVING_STRICT"

REQUEST_HISTORY = 4096              # steps kept in memory for requests_at()


def _say(msg: str) -> None:
    print(f"tensormorph-probe: {msg}", file=sys.stderr, flush=True)


def requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for a serving probe at all."""
    env = os.environ if env is None else env
    return env.get(ENV_LISTEN, "0") not in ("", "0") or bool(env.get(ENV_RECORD))


_registered: set[str] = set()


def register_plugin(framework: str, module: str, install: Callable[[Any], None]) -> None:
    """The body of a framework's plugin entry point: once per process
    (frameworks load plugins in many processes, vLLM possibly more than
    once in one), nothing at all unless the environment asks for a probe,
    and a framework without the module it hooks says so instead of failing
    its own start.  install gets the imported module."""
    if framework in _registered:
        return
    _registered.add(framework)
    if not requested():
        return
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        _say(f"{framework} plugin: cannot import {module} ({exc}); no probe will be attached")
        return
    install(mod)


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


@dataclass
class Worker:
    """What a plugin found out about the worker it runs in."""
    framework: str                   # "vllm" | "sglang"
    model: torch.nn.Module
    rank: int                        # global rank of this worker
    world_size: int                  # workers in the server (tp * pp * dp)
    tp_rank: int = 0
    tp_size: int = 1
    # reasons the model does not run eagerly (empty: eager)
    not_eager: list[str] = field(default_factory=list)
    # the request ids of the batch about to run, from the root forward's
    # arguments; None where the framework does not expose them
    request_ids: Callable[[tuple[Any, ...], dict[str, Any]], Sequence[str] | None] | None = None
    extra: dict[str, str] = field(default_factory=dict)


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
        leaf = _first_leaf(worker.model)
        if leaf is not None:
            self._handles.append(leaf.register_forward_pre_hook(self._leaf_pre))

    # --------------------------------------------------------- per forward

    def _root_pre(self, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> None:
        ids: Sequence[str] | None = None
        fn = self.worker.request_ids
        if fn is not None:
            try:
                ids = fn(args, kwargs or {})
            except Exception as exc:         # never break the server for a log line
                ids = None
                if self.forwards == 0:
                    _say(f"rank {self.worker.rank}: cannot read request ids: {exc}")
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
            if self._log is None and self.requests_path:
                self._log = open(self.requests_path, "a", encoding="utf-8")  # noqa: SIM115
            if self._log is not None:
                self._log.write(json.dumps({"step": step, "requests": kept, "count": n}) + "\n")
                self._log.flush()

    def _leaf_pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        self._inner_calls += 1

    def _root_post(self, module: torch.nn.Module, args: tuple[Any, ...], out: Any) -> None:
        self.forwards += 1
        if not self._warned_hooks and self._inner_calls == 0:
            # The root was called but none of its modules: the body ran as a
            # compiled graph.  Recording root calls only is not what anyone asked.
            self._warned_hooks = True
            _say(f"WARNING: rank {self.worker.rank}: the model's forward ran but none of "
                 "its modules was called: it runs compiled (torch.compile / CUDA graphs), "
                 "so module breakpoints and traces see nothing.  Restart the server in "
                 "eager mode (see doc/serving.md).")

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


def _first_leaf(model: torch.nn.Module) -> torch.nn.Module | None:
    """The first module without children inside model (not model itself)."""
    for _, m in model.named_modules():
        if m is not model and next(iter(m.children()), None) is None:
            return m
    return None


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

        if worker.not_eager:
            msg = (f"WARNING: {who}: the model does not run eagerly ("
                   + "; ".join(worker.not_eager) + "): the probe records inside "
                   "torch.compile'd code but not inside CUDA graph replays, so breakpoints "
                   "and traces would see nothing.  Restart without CUDA graphs "
                   "(doc/serving.md).")
            if env.get(ENV_STRICT, "0") not in ("", "0"):
                raise ProbeError(msg.replace("WARNING: ", "") + f" ({ENV_STRICT} is set)")
            _say(msg)

        pairs = [("serving", worker.framework), ("serving.rank", str(worker.rank)),
                 ("serving.world_size", str(worker.world_size)),
                 ("serving.tp_rank", str(worker.tp_rank)),
                 ("serving.tp_size", str(worker.tp_size)),
                 ("serving.pid", str(os.getpid())),
                 ("serving.eager", "yes" if not worker.not_eager
                  else "no: " + "; ".join(worker.not_eager)),
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
