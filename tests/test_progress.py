"""`openenv_lab.progress.Waiting`: a wait that lasts shows what is awaited, the time so far and the limit;
a short one prints nothing; nobody watching (no terminal, no notebook, or ``progress=False``) prints
nothing either."""

from __future__ import annotations

import io
import sys
import types

from openenv_lab.progress import Waiting, progress_wanted


def test_a_short_wait_prints_nothing():
    out = io.StringIO()
    with Waiting("a server", 60, progress=True, stream=out, bar=False) as waiting:
        waiting.tick("starting")  # well under the quiet two seconds
    assert out.getvalue() == ""


def test_a_long_wait_prints_a_line_then_how_long_it_took():
    out = io.StringIO()
    with Waiting("the Space a/b to wake up", 300, progress=True, stream=out, quiet_for=0.0, bar=False) as w:
        w.tick("HTTP 503")
        w.tick("HTTP 503")  # within five seconds of the first line: not repeated
    lines = out.getvalue().splitlines()
    assert lines[0] == "Waiting for the Space a/b to wake up: 0 s of 300 s (HTTP 503)"
    assert len(lines) == 2 and lines[1].startswith("Done waiting for the Space a/b to wake up after ")


def test_with_tqdm_a_long_wait_is_a_bar_that_closes():
    out = io.StringIO()
    with Waiting("an image to build", 120, progress=True, stream=out, quiet_for=0.0, bar=True) as waiting:
        waiting.tick("step 3/9")
        assert waiting._bar is not None
    assert waiting._bar is None
    shown = out.getvalue()
    assert "Waiting for an image to build: 0 s of 120 s" in shown and "step 3/9" in shown


def test_asked_not_to_it_never_prints():
    out = io.StringIO()
    with Waiting("a server", 60, progress=False, stream=out, quiet_for=0.0) as waiting:
        waiting.tick()
    assert out.getvalue() == ""


def test_by_default_it_shows_where_someone_watches(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("OPENENV_LAB_PROGRESS", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert progress_wanted(None, Terminal()) is True
    assert progress_wanted(None, io.StringIO()) is False  # a file, a pipe, a test's capture
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))  # a Jupyter kernel
    assert progress_wanted(None, io.StringIO()) is True
    monkeypatch.setenv("OPENENV_LAB_PROGRESS", "0")
    assert progress_wanted(None, Terminal()) is False


def test_a_blocking_call_waited_for_gives_its_result_or_its_error():
    from openenv_lab.progress import wait_for_call

    assert wait_for_call("a value", lambda: 42, progress=False) == 42

    def fails() -> None:
        raise LookupError("no such image")

    try:
        wait_for_call("an image", fails, progress=False)
    except LookupError as exc:
        assert str(exc) == "no such image"
    else:
        raise AssertionError("the call's error was lost")
