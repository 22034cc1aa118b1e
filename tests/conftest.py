"""Shared fixtures: where the golden files are, and a header line with the random seed in use."""

from __future__ import annotations

import gc
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Timings never decide a test: Hypothesis's per-example deadline is a timing check, and a loaded CI machine
# trips it on tests that are correct, so it is off for every property test.
settings.register_profile("recordkit", deadline=None)
settings.load_profile("recordkit")

TESTS_DIR = Path(__file__).resolve().parent
GOLDEN_DIR = TESTS_DIR / "data" / "golden"
# Reference files that may not be copied into the repository (the OneFlow datasets) are read from a
# ``shared`` folder beside the checkout; RECORDKIT_SHARED overrides where it is.
SHARED_DIR = Path(os.environ.get("RECORDKIT_SHARED", TESTS_DIR.parent.parent / "shared"))
SEED = int(os.environ.get("RECORDKIT_TEST_SEED", "0")) or random.randrange(1, 2**31)


@pytest.fixture(autouse=True)
def _collector_sees_this_test_only():
    """Keep what exists before a test (earlier tests' objects, and TensorFlow, torch and Ray once imported)
    out of the cycle collector's reach while it runs: a test's ``gc.collect()`` then visits the objects the
    test made, in milliseconds, instead of the whole heap of those libraries, in seconds."""
    gc.freeze()
    yield
    gc.unfreeze()


def pytest_report_header() -> str:
    """Print the seed so a failing randomized run can be repeated with RECORDKIT_TEST_SEED."""
    return f"recordkit test seed: {SEED} (set RECORDKIT_TEST_SEED to repeat)"


def load_manifest(fmt: str) -> dict[str, Any]:
    """Return the MANIFEST.json of the golden files of format ``fmt`` (``tfrecord`` or ``ffrecord``)."""
    with open(GOLDEN_DIR / fmt / "MANIFEST.json", encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """The folder holding ``tfrecord/`` and ``ffrecord/`` golden files copied into the repository."""
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def tfrecord_manifest() -> dict[str, Any]:
    """The TFRecord golden MANIFEST.json (written by TensorFlow 2.21)."""
    return load_manifest("tfrecord")


@pytest.fixture(scope="session")
def ffrecord_manifest() -> dict[str, Any]:
    """The FFRecord golden MANIFEST.json (written by HFAiLab's C++ ffrecord)."""
    return load_manifest("ffrecord")


@pytest.fixture(scope="session")
def ofrecord_golden() -> Path:
    """The OneFlow golden folder in the shared reference material; the test skips when it is absent."""
    folder = SHARED_DIR / "golden" / "ofrecord"
    if not (folder / "MANIFEST.json").is_file():
        pytest.skip(f"OneFlow reference files not found in {folder} (they are not redistributable)")
    return folder


@pytest.fixture(scope="session")
def ofrecord_manifest(ofrecord_golden: Path) -> dict[str, Any]:
    """The OneFlow golden MANIFEST.json; the test skips when the shared folder is absent."""
    with open(ofrecord_golden / "MANIFEST.json", encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    return manifest


@pytest.fixture
def rng() -> random.Random:
    """A random generator seeded from the session seed."""
    return random.Random(SEED)
