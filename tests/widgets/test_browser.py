"""The widgets in a real browser: Debian's Chromium driven by Playwright, on both widget stacks.

- ``lab``: JupyterLab 4 with ipywidgets 8, from the test suite's own environment;
- ``classic``: the classic Notebook 6.5 with ipywidgets 7.7.1 and widgetsnbextension 3.6, the widget
  protocol Colab's front end speaks, from the venv of Colab's versions that ``scripts/colab_tier.py``
  builds (``OPENENV_LAB_COLAB_PYTHON``; ``.ci/run`` sets it); skipped, saying so, without it.

A notebook records a short chess game and shows the viewer; the test runs it, moves the slider with the
keyboard and presses Play, and checks through the page that the board changed. The reward curve and an
evaluation comparison are shown the same way. A static comparison page (``compare(...).to_html``, no
kernel) is opened from disk and scrubbed. Screenshots go to ``test-artifacts/``. Needs
``/usr/bin/chromium`` (``.ci/run`` installs it); skipped, saying so, without.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import wait_for

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason="Chromium is not installed (apt install chromium)"
    ),
]

NOTEBOOK_CELLS = [
    "import gymnasium as gym, numpy as np, openenv_lab\n"
    'env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", agent_color="white", max_moves=40))\n'
    "obs, _ = env.reset(seed=0)\n"
    "for _ in range(8):\n"
    '    obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))',
    "viewer = openenv_lab.show(env)\nviewer",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


STACKS = ["lab", "classic"]
COLAB_PYTHON = os.environ.get("OPENENV_LAB_COLAB_PYTHON")


def _front_end(stack: str) -> list[str]:
    """The command that serves notebooks on ``stack`` (the options common to both come after it)."""
    if stack == "lab":
        return [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    if not COLAB_PYTHON:
        pytest.skip("no venv of Colab's versions: run scripts/colab_tier.py and set OPENENV_LAB_COLAB_PYTHON")
    return [COLAB_PYTHON, "-m", "notebook", "--NotebookApp.token=", "--NotebookApp.password="]


@contextlib.contextmanager
def notebook_server(stack: str, work: Path, notebook_name: str, cells: list[str]) -> Iterator[str]:
    """A notebook server of ``stack`` on loopback serving a folder in ``work``, with a notebook of
    ``cells`` written there; yields its URL. Its settings, config and runtime files go in ``work`` too,
    so nothing is left behind in the system's temporary folder."""
    root, settings = work / "served", work / "settings"
    root.mkdir()
    notebook = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
            for source in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / notebook_name).write_text(json.dumps(notebook))
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    port = free_port()
    environment = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(work / "config"),
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        PYTHONPATH=str(Path(__file__).parent.parent.parent),
    )
    if stack == "lab":
        extra = [f"--LabApp.user_settings_dir={settings}"]
    else:  # the classic Notebook's own names for the same settings
        extra = [f"--NotebookApp.notebook_dir={root}", "--NotebookApp.disable_check_xsrf=True"]
    process = subprocess.Popen(
        [
            *_front_end(stack),
            *extra,
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    try:
        assert wait_for(up, timeout=60), f"the notebook server ({stack}) did not start"
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def run_all_cells(page: Any, stack: str, url: str, notebook_name: str, cells: list[str]) -> None:
    """Open the notebook and run its cells, once the kernel is ready: in JupyterLab with Shift+Enter, in
    the classic Notebook through its page's own ``Jupyter.notebook`` (what Cell > Run All calls)."""
    if stack == "classic":
        page.goto(f"{url}/notebooks/{notebook_name}", wait_until="domcontentloaded")
        page.wait_for_function(
            "() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel"
            " && Jupyter.notebook.kernel.is_connected()",
            timeout=90_000,
        )
        time.sleep(2)  # the widget manager loads with the page's extensions
        page.evaluate("() => Jupyter.notebook.execute_all_cells()")
        return
    page.goto(f"{url}/lab/tree/{notebook_name}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
    time.sleep(2)  # the indicator says idle a moment before the kernel takes requests
    page.locator(".jp-Cell").first.click()
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs a cell and selects the next
    for _ in cells:
        page.keyboard.press("Shift+Enter")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


def test_a_static_comparison_page_replays_without_a_kernel(chess_url, tmp_path):
    import gymnasium as gym
    import numpy as np

    import openenv_lab

    env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", base_url=chess_url, max_moves=12))
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        for _ in range(4):
            obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[seed]))
    pair = openenv_lab.compare(
        env.trajectory.episode(0), env.trajectory.episode(1), labels=("first", "second")
    )
    env.close()
    pair.to_html(tmp_path / "pair.html")

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto((tmp_path / "pair.html").as_uri())
        labels, boards = page.locator(".label"), page.locator(".main svg")
        assert labels.all_inner_texts() == ["step 0", "step 0"]
        assert page.locator("text=first · openenv/chess · episode 0").count() == 1
        first_before, second_before = boards.nth(0).inner_html(), boards.nth(1).inner_html()
        page.locator(".scrub").first.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        assert labels.all_inner_texts() == ["step 3", "step 0"]  # the first replay moved, alone
        assert boards.nth(0).inner_html() != first_before and boards.nth(1).inner_html() == second_before
        page.locator(".play").nth(1).click()  # the second one plays by itself
        page.wait_for_function("() => document.querySelectorAll('.label')[1].textContent !== 'step 0'")
        page.screenshot(path=str(ARTIFACTS / "comparison-static.png"))


#: The slider's handle: noUiSlider's in ipywidgets 8, jQuery UI's in 7.
HANDLE = ".widget-slider .noUi-handle, .widget-slider .ui-slider-handle"


@pytest.mark.parametrize("stack", STACKS)
def test_the_viewer_plays(stack, tmp_path):
    with notebook_server(stack, tmp_path, "viewer.ipynb", NOTEBOOK_CELLS) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        run_all_cells(page, stack, url, "viewer.ipynb", NOTEBOOK_CELLS)
        slider = page.locator(HANDLE).first
        try:
            slider.wait_for(timeout=120_000)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"viewer-{stack}-failed.png"))  # what the notebook showed
            raise
        board = page.locator(".widget-html-content svg").first
        board.wait_for(timeout=60_000)
        before = board.inner_html()
        page.screenshot(path=str(ARTIFACTS / f"viewer-{stack}-step-0.png"))

        slider.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "before => document.querySelector('.widget-html-content svg').innerHTML !== before",
            arg=before,
            timeout=30_000,
        )
        assert page.locator(".widget-readout").first.inner_text().strip() == "3"
        after_slider = board.inner_html()
        page.screenshot(path=str(ARTIFACTS / f"viewer-{stack}-step-3.png"))

        page.locator(".widget-play button").first.click()  # Play: the kernel-side link moves the slider
        time.sleep(1.5)
        page.wait_for_function(
            "() => Number(document.querySelector('.widget-readout').innerText) > 3", timeout=30_000
        )
        page.screenshot(path=str(ARTIFACTS / f"viewer-{stack}-playing.png"))
        assert before != after_slider != page.locator(".widget-html-content svg").first.inner_html()


CURVE_CELLS = [
    "import openenv_lab\ncurve = openenv_lab.RewardCurve(window=3, redraw_every=0)\ncurve",
    "for episode_return in [1.0, 0.0, 2.0, 3.0, 2.5]:\n    curve.add_episode(episode_return, length=10)",
]


@pytest.mark.parametrize("stack", STACKS)
def test_the_reward_curve_draws_as_episodes_come_in(stack, tmp_path):
    with notebook_server(stack, tmp_path, "curve.ipynb", CURVE_CELLS) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        run_all_cells(page, stack, url, "curve.ipynb", CURVE_CELLS)
        caption = page.locator(".widget-html-content", has_text="5 episodes, 50 steps")
        try:
            caption.first.wait_for(timeout=120_000)  # the caption follows the episodes as they come
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"curve-{stack}-failed.png"))
            raise
        page.wait_for_function(
            "() => { const i = document.querySelector('.widget-image');"
            " return i && i.complete && i.naturalWidth > 0; }",
            timeout=30_000,
        )
        assert _image_width(page, ".widget-image") > 300
        page.screenshot(path=str(ARTIFACTS / f"curve-{stack}.png"))


COMPARISON_CELLS = [
    "import openenv_lab\n"
    'hello = openenv_lab.evaluate(lambda obs: "hello", "openenv/echo", episodes=6, n_envs=3, max_steps=2)\n'
    'hi = openenv_lab.evaluate(lambda obs: "hi", "openenv/echo", episodes=6, n_envs=3, max_steps=2)\n'
    'comparison = openenv_lab.compare(hello, hi, labels=("hello", "hi"))',
    "comparison",
]


def _image_width(page: Any, selector: str) -> int:
    return page.eval_on_selector(selector, "img => img.complete ? img.naturalWidth : 0")


@pytest.mark.parametrize("stack", STACKS)
def test_an_evaluation_comparison_shows_as_a_widget(stack, tmp_path):
    with (
        notebook_server(stack, tmp_path, "comparison.ipynb", COMPARISON_CELLS) as url,
        chromium() as browser,
    ):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        run_all_cells(page, stack, url, "comparison.ipynb", COMPARISON_CELLS)
        verdict = page.locator(".widget-html-content b", has_text="hello beats hi by 0.6")
        try:
            verdict.wait_for(timeout=120_000)  # 0.1 per character: 2 x 0.5 against 2 x 0.2, on every seed
        except Exception:
            page.screenshot(path=str(ARTIFACTS / f"comparison-widget-{stack}-failed.png"))
            raise
        assert "over 6 paired seeds" in verdict.inner_text()
        page.wait_for_function(
            "() => { const i = document.querySelector('.widget-image');"
            " return i && i.complete && i.naturalWidth > 0; }",
            timeout=30_000,
        )
        assert _image_width(page, ".widget-image") > 500  # the PNG decoded, three panels wide or two
        page.screenshot(path=str(ARTIFACTS / f"comparison-widget-{stack}.png"))


def test_an_evaluation_comparison_is_a_static_page_too(tmp_path):
    import openenv_lab

    hello = openenv_lab.evaluate(
        lambda obs: "hello", "openenv/echo", episodes=6, n_envs=3, max_steps=2, progress=False
    )
    hi = openenv_lab.evaluate(
        lambda obs: "hi", "openenv/echo", episodes=6, n_envs=3, max_steps=2, progress=False
    )
    openenv_lab.compare(hello, hi, labels=("hello", "hi")).to_html(tmp_path / "report.html")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto((tmp_path / "report.html").as_uri())
        assert page.locator("b.verdict").inner_text().startswith("hello beats hi by 0.6")
        rows = page.locator("table tr").all_inner_texts()
        assert len(rows) == 4 and rows[1].startswith("hello") and rows[3].startswith("hello − hi")
        assert _image_width(page, ".openenv-lab-comparison img") > 500  # with no kernel, no network
        page.screenshot(path=str(ARTIFACTS / "comparison-report-static.png"))
