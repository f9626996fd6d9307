"""The documentation site, built as its users' one command builds it, then read in a real browser.

``scripts/build_docs.py`` builds it (any warning fails the build; every notebook runs in smoke mode, every
public name needs its API entry); the site is then served on 127.0.0.1 and opened in Chromium with
Playwright: search finds the API entry of a name, a tutorial page shows its picture, and every page in the
navigation loads without a console error. Screenshots go to ``test-artifacts/site-*.png``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.widgets.test_browser import ARTIFACTS, CHROMIUM, chromium

ROOT = Path(__file__).parent.parent
SITE = ROOT / "build" / "site"

pytestmark = pytest.mark.slow

#: The hosts the site's pages load from besides their own: the badges, MathJax.
EXPECTED_HOSTS = {"colab.research.google.com", "mybinder.org", "cdn.jsdelivr.net"}
CONTENT_TYPES = {"image": "image/svg+xml", "script": "text/javascript", "stylesheet": "text/css"}


@pytest.fixture(scope="module")
def site() -> Path:
    pytest.importorskip("myst_nb", reason='the docs extra is not installed: pip install -e ".[docs]"')
    command = [sys.executable, "scripts/build_docs.py", "--out", str(SITE)]
    # .ci/run's Colab tier has run every notebook: the site shows those runs where the code is the same.
    if os.environ.get("OPENENV_LAB_EXECUTED_NOTEBOOKS"):
        command += ["--seed", os.environ["OPENENV_LAB_EXECUTED_NOTEBOOKS"]]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return SITE


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            thread.join(timeout=10)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_every_public_name_has_an_api_entry(site):
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_docs

    assert build_docs.undocumented(site) == []
    ids = build_docs.documented_ids(site)
    assert {"openenv_lab.OpenEnvVectorEnv", "openenv_lab.sb3.make_vec_env", "openenv_lab.Session"} <= ids


def test_the_guide_keeps_every_section_the_readme_had(site):
    # Each of them is a page of the site now, with its examples (tests/test_readme.py runs them).
    for page in ("chess", "atari", "finrl", "vector", "recording", "evaluation", "servers", "docker"):
        assert (site / "docs" / "guide" / f"{page}.html").exists(), page
    for page in ("any-server", "trl", "package", "performance", "notebooks"):
        assert (site / "docs" / "guide" / f"{page}.html").exists(), page


def test_notebook_pages_carry_their_outputs(site):
    page = (site / "notebooks" / "01_chess.html").read_text()
    assert "cell_output" in page and "data:image/png;base64," in page


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Chromium is not installed (apt install chromium)")
def test_the_site_in_a_browser(site):
    with served(site) as url, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # Nothing leaves this machine: what a page asks of other hosts (the Colab and Binder badges,
        # MathJax's CDN) gets an empty answer, and is listed, so that a new host is noticed.
        elsewhere: set[str] = set()

        def answer_locally(route: Any) -> None:
            host = urllib.parse.urlsplit(route.request.url).hostname
            if host == "127.0.0.1":
                route.continue_()
            else:
                elsewhere.add(str(host))
                route.fulfill(
                    status=200, body=b"", content_type=CONTENT_TYPES.get(route.request.resource_type)
                )

        page.route("**/*", answer_locally)
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))

        # Search (Sphinx's own, in the browser) finds the API entry.
        page.goto(f"{url}/search.html?q=make_vec")
        results = page.locator("#search-results li a")
        results.first.wait_for(timeout=30_000)
        hrefs = [results.nth(i).get_attribute("href") or "" for i in range(results.count())]
        page.screenshot(path=str(ARTIFACTS / "site-search.png"), full_page=True)
        assert any("api/sb3.html#openenv_lab.sb3.make_vec_env" in href for href in hrefs), hrefs

        # A tutorial page shows its picture: an image that loaded, not a broken one.
        page.goto(f"{url}/tutorials/08_evaluation_and_report_cards.html")
        images = page.locator(".cell_output img")
        images.first.wait_for(timeout=30_000)
        loaded = images.first.evaluate("img => img.complete && img.naturalWidth > 0")
        page.screenshot(path=str(ARTIFACTS / "site-tutorial.png"), full_page=True)
        assert loaded, "the tutorial's picture did not load"

        # Every page the navigation names loads without a console error.
        page.goto(f"{url}/docs/index.html")
        links = page.locator(".sidebar-tree a.reference.internal")
        pages = sorted(
            {(links.nth(i).get_attribute("href") or "").split("#")[0] for i in range(links.count())}
        )
        assert len(pages) > 40, pages
        for index, href in enumerate(pages):
            errors.clear()
            response = page.goto(f"{url}/docs/{href}")
            assert response is not None and response.ok, href
            assert page.title(), href
            if index == 0:
                page.screenshot(path=str(ARTIFACTS / "site-front.png"))
            assert not errors, f"{href}: {errors}"
        assert elsewhere <= EXPECTED_HOSTS, elsewhere - EXPECTED_HOSTS


# Bad input: the site's settings on a small site whose pages each hold one mistake a contributor makes,
# and a module whose docstring example no longer holds.

PAGES = {
    "index.md": "# Front\n\n```{toctree}\nmoved\nlesson\n```\n",
    "moved.md": "# A page\n\nSee [the old page](old_page.md) for more.\n",
    "lesson.md": (
        "---\nfile_format: mystnb\nkernelspec:\n  name: python3\n  display_name: Python 3\n---\n"
        "# A lesson\n\n```{code-cell} python\nprint('fine')\n```\n\n```{code-cell} python\n1 / 0\n```\n"
    ),
}
STALE_MODULE = '''def double(x):
    """Twice ``x``.

    Example:
        >>> double(2)
        5
    """
    return 2 * x
'''


@pytest.fixture
def small_site(tmp_path) -> Path:
    pytest.importorskip("myst_nb", reason='the docs extra is not installed: pip install -e ".[docs]"')
    source = tmp_path / "source"
    source.mkdir()
    for name, text in PAGES.items():
        (source / name).write_text(text)
    (tmp_path / "stale_module.py").write_text(STALE_MODULE)
    sys.path.insert(0, str(ROOT / "scripts"))
    return source


def build_small(source: Path, page: str, builder: str = "html") -> subprocess.CompletedProcess[str]:
    """The small site's front page and ``page``, with the site's settings (and a cache of its own)."""
    import build_docs

    settings = {
        "root_doc": "index",
        "include_patterns": f"index.md,{page}",
        "nb_execution_cache_path": str(source.parent / "cache"),
    }
    return build_docs.sphinx(builder, source.parent / builder, True, source, **settings)


def test_a_link_to_a_page_that_moved_fails_the_build_naming_page_and_line(small_site):
    done = build_small(small_site, "moved.md")
    assert done.returncode != 0
    assert re.search(r"moved\.md:3: WARNING: .*old_page\.md", done.stderr), done.stderr[-3000:]


def test_a_notebook_cell_that_raises_fails_the_build_naming_the_notebook(small_site):
    done = build_small(small_site, "lesson.md")
    assert done.returncode != 0
    assert "lesson.md" in done.stderr and "ZeroDivisionError" in done.stderr, done.stderr[-3000:]


def test_a_docstring_example_that_no_longer_runs_fails_the_doctest_build(small_site):
    import build_docs

    done = build_docs.doctests([small_site.parent / "stale_module.py"])
    assert done.returncode != 0
    assert "stale_module.py:5: DocTestFailure" in done.stdout, done.stdout
    assert "Expected:\n    5\nGot:\n    4" in done.stdout, done.stdout
