"""What a user who cites, trusts or upgrades the package reads: LICENSE, CITATION.cff, CHANGELOG.md.

(That the wheel and sdist carry them is `tests/test_package.py`'s, which builds both.)
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Keep a Changelog's kinds of change (https://keepachangelog.com/en/1.1.0/).
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def project() -> dict:
    """pyproject.toml's ``[project]`` fields this file reads (tomllib is Python 3.11's, and the suite
    runs on 3.10 too)."""
    text = (ROOT / "pyproject.toml").read_text()
    fields = {key: value for key, value in re.findall(r'^([\w-]+) = "(.*)"$', text, re.M)}
    fields["license-files"] = re.findall(r'"([^"]+)"', re.search(r"^license-files = (.*)$", text, re.M)[1])
    fields["urls"] = {"Source": re.search(r'^Source = "(.*)"$', text, re.M)[1]}
    return fields


def test_the_license_file_is_the_license_the_metadata_declares():
    text = (ROOT / "LICENSE").read_text()
    assert project()["license"] == "BSD-3-Clause" and text.startswith("BSD 3-Clause License")
    assert "Neither the name of the copyright holder" in text  # the third clause, which BSD-2 lacks
    assert project()["license-files"] == ["LICENSE"]


def test_the_citation_names_the_package_version_and_license():
    text = (ROOT / "CITATION.cff").read_text()
    fields = dict(re.findall(r"^([\w-]+): (.*)$", text, re.M))
    assert fields["cff-version"] == "1.2.0"
    assert fields["version"].strip('"') == project()["version"], "CITATION.cff's version lags the package's"
    assert fields["license"] == project()["license"]
    assert fields["repository-code"].strip('"') == project()["urls"]["Source"]


def test_the_changelog_keeps_a_changelog_and_its_newest_heading_is_the_package_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[(.+?)\] - (\d{4}-\d{2}-\d{2}|Unreleased)$", text, re.M)
    headings = re.findall(r"^## .*$", text, re.M)
    assert versions and len(versions) == len(headings), f"a version heading is malformed: {headings}"
    assert versions[0][0] == project()["version"], "the newest heading must name pyproject.toml's version"
    assert all(date != "Unreleased" for _, date in versions[1:]), "only the newest may be unreleased"
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    assert kinds <= KINDS, f"not a kind of change of Keep a Changelog: {kinds - KINDS}"
