# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit", "numpy"]
# ///
"""Convert a TFRecord file to FFRecord, then read records at random from both.

TFRecord has no index: random access first scans the record headers (or loads a sidecar ``.idx`` written by
``recordkit index``). FFRecord keeps every offset and checksum in its header, so random reads start at once.
The conversion copies every record byte for byte.

Run: ``python examples/convert_random_access/convert_random_access.py``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

import recordkit as rk
from recordkit.cli import main as recordkit_cli

N_RECORDS = 5_000


def write_source(path: Path) -> None:
    rng = np.random.default_rng(0)
    with rk.open(path, "w") as writer:
        for i in range(N_RECORDS):
            size = int(rng.integers(100, 2_000))
            writer.write(rk.encode_example({"id": i, "payload": rng.bytes(size)}))


def timed_random_reads(path: Path, indices: list[int]) -> tuple[list[bytes], float]:
    start = time.perf_counter()
    with rk.open(path) as reader:
        records = reader.read(indices)  # one call; neighbouring records are read together
    return records, time.perf_counter() - start


def main(folder: Path) -> None:
    tfrecord, ffrecord = folder / "data.tfrecord", folder / "data.ffr"
    write_source(tfrecord)

    # The command line and the Python API do the same; here, the command line.
    status = recordkit_cli(["convert", "--quiet", str(tfrecord), str(ffrecord)])
    assert status == 0

    indices = np.random.default_rng(1).integers(0, N_RECORDS, size=1_000).tolist()
    from_tf, tf_seconds = timed_random_reads(tfrecord, indices)
    from_ff, ff_seconds = timed_random_reads(ffrecord, indices)
    assert from_tf == from_ff
    assert [rk.decode_example(r)["id"][0] for r in from_ff] == indices
    print(
        f"{len(indices)} random reads: TFRecord {tf_seconds * 1e3:.1f} ms (header scan included), "
        f"FFRecord {ff_seconds * 1e3:.1f} ms"
    )

    # A sidecar index (`recordkit index FILE`) lets later runs skip the TFRecord header scan.
    assert recordkit_cli(["index", "--quiet", str(tfrecord)]) == 0
    from_indexed, _ = timed_random_reads(tfrecord, indices)
    assert from_indexed == from_tf
    print(f"wrote {tfrecord.name}.idx; reads through it give the same records")

    with rk.open(ffrecord) as reader:
        middle = reader[N_RECORDS // 2 : N_RECORDS // 2 + 3]  # slices give lists
        last = reader[-1]
    print(
        f"records {N_RECORDS // 2}..{N_RECORDS // 2 + 2} have ids "
        f"{[int(rk.decode_example(r)['id'][0]) for r in middle]}; the last has id "
        f"{int(rk.decode_example(last)['id'][0])}"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
