"""The release's metadata agrees with itself: one version everywhere, a changelog section for it, the
licence the package declares, and the Python versions it claims."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest brings tomli, the same parser
    import tomli as tomllib

import recordkit

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$")


def test_one_version_everywhere():
    """recordkit.__version__, the installed metadata and `recordkit --version` say the same version."""
    version = recordkit.__version__
    assert SEMVER.match(version), version
    assert importlib.metadata.version("recordkit") == version
    command = [sys.executable, "-m", "recordkit", "--version"]  # what the console script runs
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert (result.returncode, result.stdout) == (0, f"recordkit {version}\n")


def test_the_changelog_has_this_release_and_keeps_a_changelogs_shape():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE)
    assert releases, "no '## [X.Y.Z] - YYYY-MM-DD' sections"
    assert releases[0][0] == recordkit.__version__, "the newest section is not this release"
    versions = [tuple(int(n) for n in v.split(".")) for v, _ in releases]
    assert versions == sorted(versions, reverse=True), "sections are not newest first"
    headings = set(re.findall(r"^### (\w+)$", text, re.MULTILINE))
    assert headings <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, headings


def test_the_licence_file_is_the_one_declared():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_classifiers_name_each_claimed_python_from_the_floor():
    floor = PYPROJECT["project"]["requires-python"]
    assert floor == ">=3.10"
    claimed = {
        c.rsplit(" ", 1)[-1]
        for c in PYPROJECT["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert claimed == {"3.10", "3.11", "3.12", "3.13"}
    assert {"Changelog", "Documentation", "Source"} <= PYPROJECT["project"]["urls"].keys()
