"""The one time bound of a trace, an estimate, a fit or a measured run: one sentence, nothing
left running.

``with TimeBound(seconds, what, hint):`` stops the block once ``seconds`` have passed and raises
:class:`TimedOut` (a :class:`~profiling.errors.ProfilingError`): "*what* did not finish within
N s; it was stopped — *hint*". The block is stopped in two ways:

- **at a checkpoint** (:func:`checkpoint`), where stopping is safe: the trace passes one at
  every torch call (``profiling.trace.bounded.Checkpoints``), the fit at every candidate. An
  exception there is like a failing torch call: every ``with`` and ``finally`` around it runs,
  so the process (the MCP server's, a test's) is left as it was;
- **wherever it is**, when no checkpoint came ``grace`` seconds after the deadline (one
  ``torch.chunk`` of a parameter into a million shards runs for minutes in one call): on the
  main thread by ``SIGALRM`` (``setitimer``), on any other thread (the MCP server's and the
  runtime's tool calls) by a timer that raises the stop in that thread
  (``PyThreadState_SetAsyncExc``, CPython's way to stop a thread, through the stdlib's
  ``ctypes``). A stop raised where Python ignores exceptions (a weakref callback, ``__del__``)
  is lost, so it is raised again every second until the block has ended. Never inside an
  import, though: a module stopped half-imported (torch) would stay broken for the whole
  process, so the stop waits for the import to end.

The stop raised inside the block is a ``BaseException`` (:class:`_Stop`): a user's factory or
torch catching ``Exception`` cannot swallow it; it becomes the one :class:`TimedOut` at the
block's end. Bounds nest: an inner block that would end after its outer one is the outer
one's (a fit's bound covers the traces it runs). :func:`remaining` tells code that can predict
its own cost how much time it has (the FSDP trace refuses a world size it cannot shard in time
before it starts).

Standard library only; light to import.
"""

from __future__ import annotations

import contextvars
import threading
import time
from types import FrameType, TracebackType

from profiling.errors import ProfilingError

DEFAULT_TIMEOUT_S = 600.0  # the CLI's --timeout for estimate, trace and fit
MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: longer is a mistake (and `inf` overflows the timer)
_AGAIN_S = 1.0  # a stop Python ignored is raised again after this long


class TimedOut(ProfilingError):
    """A bounded block ran out of time; its message is the one sentence to show."""


class _Stop(BaseException):
    """Raised inside the bounded block when its time is up; never escapes a :class:`TimeBound`."""


_CURRENT: contextvars.ContextVar[TimeBound | None] = contextvars.ContextVar(
    "profiling_time_bound", default=None
)


def remaining() -> float | None:
    """Seconds left to the innermost bound around the caller (None when unbounded)."""
    bound = _CURRENT.get()
    return None if bound is None else max(0.0, bound.deadline - time.monotonic())


def bounded() -> bool:
    """Whether the caller runs within a time bound (checkpoints are worth passing)."""
    return _CURRENT.get() is not None


def checkpoint() -> None:
    """Stop here if the bound around the caller has run out (a safe place to stop)."""
    bound = _CURRENT.get()
    if bound is not None and time.monotonic() >= bound.deadline:
        raise _Stop()


def grace_for(seconds: float) -> float:
    """How long after the deadline a block that passes no checkpoint is stopped wherever it is."""
    return min(max(2.0, seconds * 0.05), 30.0)


class TimeBound:
    """Stop the block after ``seconds`` (None: no bound) with one sentence (see the module)."""

    def __init__(self, seconds: float | None, what: str, hint: str) -> None:
        self.seconds = seconds
        self.what = what
        self.hint = hint
        self.deadline = float("inf")
        self._lock = threading.Lock()
        self._armed = False  # the block runs: a stop may be raised in it
        self._fired = False
        self._token: contextvars.Token[TimeBound | None] | None = None
        self._timer: threading.Timer | None = None
        self._previous_handler: object = None
        self._outer_alarm = 0.0
        self._entered = 0.0
        self._ident = 0

    def message(self) -> str:
        return f"{self.what} did not finish within {self.seconds:g} s; it was stopped — {self.hint}"

    def __enter__(self) -> TimeBound:
        if self.seconds is None:
            return self
        if not self.seconds > 0:
            raise ProfilingError(f"the time bound must be more than 0 s (got {self.seconds:g})")
        outer = _CURRENT.get()
        self.seconds = min(self.seconds, MAX_TIMEOUT_S)
        self.deadline = time.monotonic() + self.seconds
        if outer is not None and outer.deadline <= self.deadline:
            return outer  # the outer bound ends first: it stops the block, and says so
        self._token = _CURRENT.set(self)
        self._armed = True
        self._arm(self.deadline - time.monotonic() + grace_for(self.seconds))
        return self

    def _arm(self, delay: float) -> None:
        import signal

        self._ident = threading.get_ident()
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            self._previous_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            self._entered = time.monotonic()
            self._outer_alarm = signal.setitimer(signal.ITIMER_REAL, max(delay, 1e-3), _AGAIN_S)[0]
            return
        self._timer = threading.Timer(max(delay, 0.0), self._stop_thread)
        self._timer.daemon = True
        self._timer.start()

    def _on_alarm(self, _signum: int, frame: FrameType | None) -> None:
        if self._armed and not _importing(frame):  # (the alarm repeats: it comes again)
            self._fired = True
            raise _Stop()

    def _stop_thread(self) -> None:
        import sys

        with self._lock:
            if not self._armed:
                return
            if not _importing(sys._current_frames().get(self._ident)):
                self._fired = True
                _async_raise(self._ident, _Stop)
            # Again later: in case it was lost, or the thread was importing.
            self._timer = threading.Timer(_AGAIN_S, self._stop_thread)
            self._timer.daemon = True
            self._timer.start()

    def _disarm(self) -> None:
        import signal

        with self._lock:
            self._armed = False
            if self._timer is not None:
                self._timer.cancel()
                if self._fired:
                    _async_raise(self._ident, None)  # a stop still pending is dropped
        if self._previous_handler is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous_handler)  # type: ignore[arg-type]  # what signal.signal returned
            self._previous_handler = None
            if self._outer_alarm:  # an alarm of someone else's was running: give it its rest
                spent = time.monotonic() - self._entered
                signal.setitimer(signal.ITIMER_REAL, max(self._outer_alarm - spent, 1e-3))

    def __exit__(
        self,
        _type: type[BaseException] | None,
        exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self._token is None:  # no bound, or an outer one's
            return
        try:
            self._disarm()
        except _Stop:  # the alarm fired as the block ended: it is disarmed now
            self._disarm()
        _CURRENT.reset(self._token)
        if isinstance(exc, _Stop):
            raise TimedOut(self.message()) from None


def _importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside an import: a module stopped half-imported stays broken for
    the whole process (``partially initialized module 'torch'``), so the stop waits for it."""
    depth = 0
    while frame is not None and depth < 500:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def _async_raise(ident: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in the thread ``ident`` at its next bytecode (None: cancel a pending one)."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exc) if exc is not None else None
    )


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "TimeBound",
    "TimedOut",
    "bounded",
    "checkpoint",
    "remaining",
]
