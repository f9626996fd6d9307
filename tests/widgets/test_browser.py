"""The viewer in a real browser: JupyterLab on loopback, Debian's Chromium driven by Playwright.

A notebook records a short chess game and shows the viewer; the test runs it, moves the slider with the
keyboard and presses Play, and checks through the page that the board changed. A static comparison page
(``compare(...).to_html``, no kernel) is opened from disk and scrubbed the same way. Screenshots go to
``test-artifacts/``. Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); skipped, saying so, without.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
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


@contextlib.contextmanager
def jupyter_lab(root: Path, notebook_name: str, cells: list[str]) -> Iterator[str]:
    """JupyterLab on loopback serving ``root``, with a notebook of ``cells`` written there; yields its URL."""
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
    settings = Path(tempfile.mkdtemp())
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    port = free_port()
    environment = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=tempfile.mkdtemp(),
        JUPYTER_RUNTIME_DIR=tempfile.mkdtemp(),
        PYTHONPATH=str(Path(__file__).parent.parent.parent),
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--LabApp.user_settings_dir={settings}",
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
        assert wait_for(up, timeout=60), "JupyterLab did not start"
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def lab(tmp_path):
    with jupyter_lab(tmp_path, "viewer.ipynb", NOTEBOOK_CELLS) as url:
        yield url


def run_all_cells(page: Any, url: str, notebook_name: str, cells: list[str]) -> None:
    """Open the notebook in JupyterLab and run its cells with Shift+Enter, once the kernel is idle."""
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


def test_the_viewer_plays_in_jupyterlab(lab):
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        run_all_cells(page, lab, "viewer.ipynb", NOTEBOOK_CELLS)
        slider = page.locator(".widget-slider .noUi-handle").first
        try:
            slider.wait_for(timeout=120_000)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "viewer-failed.png"))  # what the notebook showed
            raise
        board = page.locator(".widget-html-content svg").first
        board.wait_for(timeout=60_000)
        before = board.inner_html()
        page.screenshot(path=str(ARTIFACTS / "viewer-step-0.png"))

        slider.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "before => document.querySelector('.widget-html-content svg').innerHTML !== before",
            arg=before,
            timeout=30_000,
        )
        assert page.locator(".widget-readout").first.inner_text() == "3"
        after_slider = board.inner_html()
        page.screenshot(path=str(ARTIFACTS / "viewer-step-3.png"))

        page.locator(".widget-play button").first.click()  # Play: the kernel-side link moves the slider
        time.sleep(1.5)
        page.wait_for_function(
            "() => Number(document.querySelector('.widget-readout').innerText) > 3", timeout=30_000
        )
        page.screenshot(path=str(ARTIFACTS / "viewer-playing.png"))
        assert before != after_slider != page.locator(".widget-html-content svg").first.inner_html()


COMPARISON_CELLS = [
    "import openenv_lab\n"
    'hello = openenv_lab.evaluate(lambda obs: "hello", "openenv/echo", episodes=6, n_envs=3, max_steps=2)\n'
    'hi = openenv_lab.evaluate(lambda obs: "hi", "openenv/echo", episodes=6, n_envs=3, max_steps=2)\n'
    'comparison = openenv_lab.compare(hello, hi, labels=("hello", "hi"))',
    "comparison",
]


def _image_width(page: Any, selector: str) -> int:
    return page.eval_on_selector(selector, "img => img.complete ? img.naturalWidth : 0")


def test_an_evaluation_comparison_shows_in_jupyterlab_and_as_a_static_page(tmp_path):
    with jupyter_lab(tmp_path, "comparison.ipynb", COMPARISON_CELLS) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        run_all_cells(page, url, "comparison.ipynb", COMPARISON_CELLS)
        verdict = page.locator(".widget-html-content b", has_text="hello beats hi by 0.6")
        try:
            verdict.wait_for(timeout=120_000)  # 0.1 per character: 2 x 0.5 against 2 x 0.2, on every seed
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "comparison-widget-failed.png"))
            raise
        assert "over 6 paired seeds" in verdict.inner_text()
        page.wait_for_function(
            "() => { const i = document.querySelector('.widget-image');"
            " return i && i.complete && i.naturalWidth > 0; }",
            timeout=30_000,
        )
        assert _image_width(page, ".widget-image") > 500  # the PNG decoded, three panels wide or two
        page.screenshot(path=str(ARTIFACTS / "comparison-widget.png"))

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
