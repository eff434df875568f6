"""Flight mode: the last N steps in memory, written at a trigger.

libtensormorph keeps the window (tm_recorder_open_flight: encoded records
per step, within a byte budget) and evaluates `--trigger` conditions on its
writer thread as the probe-side server evaluates breakpoint conditions, so
the model pays only for encoding into memory.  This module adds the
triggers that live in Python -- SIGUSR1, dump(), an uncaught exception (in
any thread), sys.exit with a non-zero status -- and what happens after a
trigger (on_trigger): "continue" records normally from then on (the C side
does that by itself), "stop" ends the program at the next step boundary,
"wait" pauses the model there and listens for tmdb (just-in-time
debugging) for up to `wait` seconds.

In a distributed job every rank polls one rendezvous file next to the
recording (RECORD.trigger): the rank that triggers creates it and the
others dump within 20 ms of noticing, off the model's path (no collective); at the
end of the job each rank waits a quarter of a second for a late one.  A
rendezvous file over a minute old when the probe starts is removed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
import weakref
from typing import Any

from . import _lib

ON_TRIGGER = ("continue", "stop", "wait")
DEFAULT_BUDGET = 64 << 20


def parse_size(text: str | int) -> int:
    """'64M', '512k', '1G', '1048576' -> bytes."""
    if isinstance(text, int):
        return text
    t = str(text).strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:] if t else "", 1)
    num = t[:-1] if mult != 1 else t
    try:
        value = int(float(num) * mult)
    except ValueError:
        raise ValueError(f"expected a size such as 64M, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"the flight budget must be positive, got {text!r}")
    return value


def env_flight() -> tuple[int | None, int | None]:
    """TENSORMORPH_FLIGHT=N and TENSORMORPH_FLIGHT_BUDGET=SIZE."""
    n = os.environ.get("TENSORMORPH_FLIGHT", "")
    if not n or n == "0":
        return None, None
    try:
        steps = int(n)
    except ValueError:
        raise ValueError(f"TENSORMORPH_FLIGHT must be a number of steps, got {n!r}") from None
    budget = os.environ.get("TENSORMORPH_FLIGHT_BUDGET")
    return steps, parse_size(budget) if budget else None


def rendezvous_path(record: str) -> str:
    return os.fspath(record) + ".trigger"


def open_recorder(lib: ctypes.CDLL, path: str, opts: Any, steps: int, budget: int | None,
                  rendezvous: str | None) -> int:
    if steps < 1:
        raise ValueError(f"flight must be at least 1 step, got {steps}")
    if rendezvous and os.path.exists(rendezvous):
        # a previous job's: this one starts clean
        try:
            if os.path.getmtime(rendezvous) < time.time() - 60:
                os.unlink(rendezvous)
        except OSError:
            pass
    fo = _lib.FlightOpts()
    fo.steps = steps
    fo.budget_bytes = budget or DEFAULT_BUDGET
    fo.path = os.fsencode(path)
    fo.rendezvous = os.fsencode(rendezvous) if rendezvous else None
    handle = ctypes.c_void_p()
    err = lib.tm_recorder_open_flight(ctypes.byref(opts), ctypes.byref(fo), ctypes.byref(handle))
    if err:
        raise OSError(f"cannot keep a flight window for {path}: {_lib.strerror(err)}")
    return handle.value or 0


_PKG = os.path.dirname(os.path.abspath(__file__))


def _in_probe(frame: Any) -> bool:
    """Whether a signal interrupted the probe's own Python code (a hook
    filling the batch), on the interrupted thread's stack."""
    while frame is not None:
        if os.path.dirname(frame.f_code.co_filename) == _PKG:
            return True
        frame = frame.f_back
    return False


class Flight:
    """The Python half of flight mode, owned by a Probe."""

    def __init__(self, probe: Any, triggers: list[str], on_trigger: str,
                 wait: float | None) -> None:
        if on_trigger not in ON_TRIGGER:
            raise ValueError(f"on_trigger must be one of {', '.join(ON_TRIGGER)}, "
                             f"got {on_trigger!r}")
        self._probe = weakref.ref(probe)
        self.on_trigger = on_trigger
        self.wait = wait
        lib = probe._lib
        for t in triggers:
            if lib.tm_recorder_flight_trigger(probe._rec, t.encode()):
                detail = lib.tm_recorder_detail(probe._rec).decode(errors="replace")
                raise ValueError(f"bad trigger {t!r}: {detail}")
        addr = lib.tm_recorder_flight_word(probe._rec)
        self.word = ctypes.c_uint32.from_address(addr)
        self.seen = 0
        self.sync = on_trigger != "continue"
        self.rendezvous = (rendezvous_path(probe._record_arg)
                           if probe.world_size > 1 else None)
        self._undo: list[Any] = []
        self._install()

    # ------------------------------------------------------------ triggers

    def _install(self) -> None:
        ref = self._probe

        prev_exc = sys.excepthook

        def excepthook(tp: Any, value: Any, tb: Any) -> None:
            p = ref()
            if p is not None:
                p.dump(f"uncaught exception: {tp.__name__}: {value}"[:180])
            prev_exc(tp, value, tb)

        sys.excepthook = excepthook
        self._undo.append(lambda: setattr(sys, "excepthook", prev_exc)
                          if sys.excepthook is excepthook else None)

        prev_thr = threading.excepthook

        def thread_hook(args: Any) -> None:
            p = ref()
            if p is not None and args.exc_type is not SystemExit:
                name = args.thread.name if args.thread is not None else "?"
                p.dump(f"uncaught exception in thread {name}: "
                       f"{args.exc_type.__name__}: {args.exc_value}"[:180])
            prev_thr(args)

        threading.excepthook = thread_hook
        self._undo.append(lambda: setattr(threading, "excepthook", prev_thr)
                          if threading.excepthook is thread_hook else None)

        prev_exit = sys.exit

        def exit_(status: Any = None) -> Any:
            p = ref()
            if p is not None and status not in (None, 0):
                p.dump(f"exit status {status}"[:180])
            return prev_exit(status)

        sys.exit = exit_
        self._undo.append(lambda: setattr(sys, "exit", prev_exit)
                          if sys.exit is exit_ else None)


        if threading.current_thread() is threading.main_thread():
            prev_sig = signal.getsignal(signal.SIGUSR1)

            def on_usr1(signo: int, frame: Any) -> None:
                p = ref()
                if p is not None:
                    # outside the probe's own code the batch is whole and
                    # goes too; inside a hook filling it, what was handed
                    # over so far
                    if not _in_probe(frame):
                        p._submit()
                    p._flight_dump_now("SIGUSR1")
                if callable(prev_sig):
                    prev_sig(signo, frame)

            signal.signal(signal.SIGUSR1, on_usr1)

            def undo_sig() -> None:
                if signal.getsignal(signal.SIGUSR1) is on_usr1:
                    signal.signal(signal.SIGUSR1, prev_sig)

            self._undo.append(undo_sig)

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            try:
                undo()
            except (ValueError, TypeError):
                pass        # signal.signal off the main thread
        self._undo.clear()

    # ------------------------------------------------------------ after

    def info(self, probe: Any) -> dict[str, Any]:
        fi = _lib.FlightInfo()
        if probe._rec:
            probe._lib.tm_recorder_flight_info(probe._rec, ctypes.byref(fi))
        out = {name: getattr(fi, name) for name, _ in _lib.FlightInfo._fields_
               if name != "reserved"}
        out["reason"] = fi.reason.decode(errors="replace")
        return out

    def closing(self, probe: Any) -> None:
        """Before the recorder closes: run the triggers on what is left, and
        in a job give a trigger on another rank in its last moments a
        quarter of a second to reach us (ranks end together)."""
        lib = probe._lib
        lib.tm_recorder_flush(probe._rec)
        if not self.word.value and self.rendezvous:
            end = time.monotonic() + 0.25
            while not self.word.value and time.monotonic() < end:
                if os.path.exists(self.rendezvous):
                    try:
                        with open(self.rendezvous, errors="replace") as f:
                            why = f.read(160)
                    except OSError:
                        why = "?"
                    probe._flight_dump_now(f"another rank: {why}")
                    break
                time.sleep(0.02)
        if self.word.value != self.seen:
            self.seen = self.word.value
            self._report(probe)

    def _report(self, probe: Any) -> None:
        info = self.info(probe)
        print(f"tensormorph-probe: {info['reason']}: wrote the last "
              f"{info['steps_held']} steps to {probe.path}", file=sys.stderr, flush=True)

    def after(self, probe: Any) -> None:
        """At a step boundary once the window was written: what on_trigger says."""
        self.seen = self.word.value
        self._report(probe)
        where = probe.path
        if self.on_trigger == "stop":
            probe.close()
            print("tensormorph-probe: stopping the program (--on-trigger stop)",
                  file=sys.stderr, flush=True)
            raise SystemExit(3)
        if self.on_trigger == "wait":
            # the trace on disk up to here: tmdb reads the window from it
            # as the history before it attached
            probe.flush()
            pid = os.getpid()
            print(f"tensormorph-probe: waiting for a debugger: tmdb -ex 'attach {pid}' "
                  f"(or replay the window: tmdb {where})", file=sys.stderr, flush=True)
            probe.listen(None, self.wait if self.wait is not None else 300.0, quiet=True)
