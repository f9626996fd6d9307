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


# ---------------------------------------------------------------- the launchers' waits, end to end
# Real servers with the quiet spell set to zero, so a start of any length shows (a start slower than
# usual cannot be ordered on a shared machine); stderr is what a terminal would show.


def test_an_embedded_server_shows_its_start_and_is_silent_when_asked(monkeypatch, capsys):
    from openenv_lab import progress
    from openenv_lab.launch import EmbeddedServer

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    with EmbeddedServer("echo", progress=True):
        pass
    assert "Waiting for the embedded echo server to start" in capsys.readouterr().err
    with EmbeddedServer("echo", progress=False):
        pass
    assert capsys.readouterr().err == ""


def test_a_local_fleet_shows_one_wait_for_all_its_replicas(monkeypatch, capsys):
    import openenv_lab
    from openenv_lab import progress

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    with openenv_lab.serve("echo", replicas=2, progress=True) as fleet:
        assert len(fleet.urls) == 2
    shown = capsys.readouterr().err
    assert "Waiting for 2 echo servers to start" in shown
    assert "embedded echo server" not in shown, "the replicas' own waits are the fleet's one line"
    with openenv_lab.serve("echo", replicas=2, progress=False):
        pass
    assert capsys.readouterr().err == ""


def test_an_image_download_shows_its_wait(monkeypatch, capsys):
    """The Docker SDK's pull gives no news while it runs: the wait around it shows (a stand-in engine
    whose pull takes half a second: the tests reach no registry)."""
    import time

    from openenv_lab import progress
    from openenv_lab.launch import DockerServer

    class Images:
        def pull(self, repository: str, tag: str, auth_config: object) -> None:
            time.sleep(0.5)

    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.0)
    DockerServer(image="someone/env:1", progress=True)._pull(types.SimpleNamespace(images=Images()))
    shown = capsys.readouterr().err
    assert "Waiting for the image someone/env:1 to download" in shown
