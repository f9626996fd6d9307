"""Long waits show themselves: what is awaited, the time so far and the limit.

A Space waking up, an embedded server slow to start: a wait that has lasted more than a couple of seconds
gets a progress bar (tqdm's, which is a widget in a notebook where ipywidgets work) or, without tqdm, a
plain line on stderr now and then. Shorter waits print nothing. By default progress shows where someone
is watching (a terminal, or a Jupyter kernel); ``progress=False`` silences it, ``progress=True`` forces
it, and ``$OPENENV_LAB_PROGRESS=0`` silences it everywhere (the test suite sets it).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

__all__ = ["Waiting", "progress_wanted", "wait_for_call"]

T = TypeVar("T")

#: Waits shorter than this print nothing.
QUIET_SECONDS = 2.0
#: Without tqdm, a plain line at most this often.
LINE_EVERY = 5.0


def progress_wanted(progress: bool | None = None, stream: IO[str] | None = None) -> bool:
    """Whether to show progress: ``progress`` if given, else where someone watches (a terminal or a
    Jupyter kernel), unless ``$OPENENV_LAB_PROGRESS`` is ``0``.

    Example:
        >>> progress_wanted(False), progress_wanted(True)
        (False, True)
    """
    if progress is not None:
        return progress
    if os.environ.get("OPENENV_LAB_PROGRESS", "").strip() == "0":
        return False
    stream = stream if stream is not None else sys.stderr
    if "ipykernel" in sys.modules:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Waiting:
    """A wait that shows itself once it lasts: call `tick` from the waiting loop.

    Args:
        what: what is awaited, e.g. ``"the Space openenv/echo_env to wake up"``.
        limit: the seconds it may take (shown beside the time so far), or None.
        progress: as `progress_wanted`.
        stream: where plain lines go (stderr by default).

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> with Waiting("a server", 10, progress=True, stream=out, quiet_for=0.0, bar=False) as waiting:
        ...     waiting.tick("HTTP 503")
        >>> out.getvalue().splitlines()[0].startswith("Waiting for a server: 0 s of 10 s (HTTP 503)")
        True
    """

    def __init__(
        self,
        what: str,
        limit: float | None = None,
        *,
        progress: bool | None = None,
        stream: IO[str] | None = None,
        quiet_for: float | None = None,
        bar: bool | None = None,
    ) -> None:
        self.what, self.limit, self.stream = what, limit, stream
        self.quiet_for = QUIET_SECONDS if quiet_for is None else quiet_for
        self.shown = progress_wanted(progress, stream)
        self._bar_wanted = bar
        self._bar: Any = None
        self._started = time.monotonic()
        self._last_line: float | None = None

    def __enter__(self) -> Waiting:
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(done=exc[0] is None)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def tick(self, note: str | None = None) -> None:
        """Show the wait if it has lasted, with ``note`` (the last answer, say) beside it."""
        elapsed = self.elapsed
        if not self.shown or elapsed < self.quiet_for:
            return
        if self._bar is None and self._last_line is None and self._use_bar():
            self._bar = self._open_bar()
        if self._bar is not None:
            self._bar.n = min(elapsed, self.limit) if self.limit else elapsed
            self._bar.set_postfix_str(note or "", refresh=False)
            self._bar.refresh()
            return
        if self._last_line is None or elapsed - self._last_line >= LINE_EVERY:
            self._last_line = elapsed
            limit = f" of {self.limit:.0f} s" if self.limit else ""
            self._write(f"Waiting for {self.what}: {elapsed:.0f} s{limit}" + (f" ({note})" if note else ""))

    def close(self, *, done: bool = True) -> None:
        """End the display: the bar closes; a plain line says how long it took."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._last_line is not None and done:
            self._write(f"Done waiting for {self.what} after {self.elapsed:.0f} s")
            self._last_line = None

    def _use_bar(self) -> bool:
        if self._bar_wanted is not None:
            return self._bar_wanted
        try:
            import tqdm  # noqa: F401
        except ImportError:
            return False
        return True

    def _open_bar(self) -> Any:
        from tqdm.auto import tqdm

        return tqdm(
            total=self.limit,
            desc=f"Waiting for {self.what}",
            unit="s",
            bar_format="{desc}: {n:.0f} s of {total:.0f} s |{bar}| {postfix}"
            if self.limit
            else "{desc}: {n:.0f} s {postfix}",
            file=self.stream,
            leave=False,
        )

    def _write(self, line: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        print(line, file=stream, flush=True)


def wait_for_call(
    what: str, call: Callable[[], T], *, limit: float | None = None, progress: bool | None = None
) -> T:
    """``call()``, a blocking call that gives no news while it runs (an image's download, say), run in a
    thread while this one shows the wait once it lasts; its result, or its exception.

    Example:
        >>> wait_for_call("a quick sum", lambda: 1 + 1, progress=False)
        2
    """
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"waiting for {what}", daemon=True)
    with Waiting(what, limit, progress=progress) as waiting:
        worker.start()
        while worker.is_alive():
            worker.join(0.25)
            waiting.tick()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
