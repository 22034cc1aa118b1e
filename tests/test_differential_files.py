"""The differential file targets in the normal suite: a few hundred generated files per format.

The long run is ``python -m tests.fuzz --target diff-tfrecord --target diff-ffrecord --cases 1000000``.
"""

from __future__ import annotations

import random

import pytest
from conftest import SEED
from fuzz import run_target
from fuzz.differential_files import (
    DifferentialFFRecordTarget,
    DifferentialTFRecordTarget,
    generate_records,
)

CASES = 300


def _run(target):
    summary = run_target(target, CASES, seed=SEED, timeout=60.0)
    assert summary.cases == CASES
    assert not summary.failures, "\n".join(
        [*summary.lines(), *(failure.trace for failure in summary.failures[:3])]
    )
    return summary


@pytest.mark.parametrize("target", [DifferentialTFRecordTarget, DifferentialFFRecordTarget])
def test_generated_files_read_the_same_every_way(target):
    summary = _run(target())
    assert summary.outcomes["ok"] > 0
    assert sum(n for name, n in summary.outcomes.items() if name.endswith("Error")) > 0


@pytest.mark.interop
def test_tensorflow_reads_the_same_records():
    pytest.importorskip("tensorflow")
    summary = _run(DifferentialTFRecordTarget())
    assert summary.outcomes["compared with TensorFlow"] == CASES


@pytest.mark.interop
def test_the_cpp_ffrecord_reads_and_writes_the_same_samples():
    pytest.importorskip("ffrecord")
    summary = _run(DifferentialFFRecordTarget())
    assert summary.outcomes["compared with C++ ffrecord"] > 0


def test_generated_records_cover_the_edge_cases():
    rng = random.Random(SEED)
    batches = [generate_records(rng) for _ in range(400)]
    sizes = {len(record) for batch in batches for record in batch}
    assert {0, 1, 12, 16, 4096} <= sizes
    assert max(sizes) > 8192
    assert any(not batch for batch in batches)
    assert max(map(len, batches)) > 30
    assert all(sum(map(len, batch)) <= (1 << 18) + 64 * 50 for batch in batches)
