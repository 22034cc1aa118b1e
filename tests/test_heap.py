"""Batches of large records dropped in a loop reuse the heap instead of page-faulting it in again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "confstr")
    or "CS_GNU_LIBC_VERSION" not in os.confstr_names
    or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="the trim threshold is glibc's",
)

# Counts the page faults of a loop that reads batches of 64 records of 100 KiB and drops each at once. A
# batch is 1,600 pages; heap reused from one batch to the next faults in almost none of them.
SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import recordkit as rk
    from recordkit.compat.ffrecord import FileReader

    path, api = sys.argv[1], sys.argv[2]
    if api == "open":
        read = rk.open(path).read
    else:
        read = FileReader(path).read
    batches = [list(range(i, i + 64)) for i in range(0, 640, 64)]
    for group in batches[:2]:
        read(group)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for group in batches[2:]:
        read(group)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    print(json.dumps({"faults_per_batch": (after - before) / len(batches[2:])}))
    """
)


@pytest.fixture(scope="module")
def large_records(tmp_path_factory):
    import recordkit as rk

    path = tmp_path_factory.mktemp("heap") / "large.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many(bytes([i % 251]) * (100 << 10) for i in range(640))
    return path


def _faults_per_batch(path, api, **environment):
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")
    } | environment
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), api],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    import json

    return json.loads(done.stdout)["faults_per_batch"]


@pytest.mark.parametrize("api", ["open", "drop-in"])
def test_dropped_batches_are_not_faulted_in_again(large_records, api):
    assert _faults_per_batch(large_records, api) < 160


def test_the_faults_this_prevents_are_real(large_records):
    # glibc's own default, pinned by the environment (which the raise never overrides), faults each batch in.
    pinned = _faults_per_batch(large_records, "open", MALLOC_TRIM_THRESHOLD_=str(128 << 10))
    assert pinned > 1000
