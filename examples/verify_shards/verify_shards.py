# /// script
# requires-python = ">=3.10"
# dependencies = ["recordkit", "numpy"]
# ///
"""Check a directory of shards with ``recordkit verify``, find the damaged record, and rescue the rest.

A dataset is written as 4 TFRecord shards; one byte of one shard is then flipped, as a bad disk or an
interrupted copy would. ``recordkit verify`` names the shard, the record and the byte offset, and exits 1.
``recordkit.recover.salvage`` then copies every intact record of the shard, those after the damage too,
into a new file.

Run: ``python examples/verify_shards/verify_shards.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import recordkit as rk
from recordkit.recover import salvage


def recordkit(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the `recordkit` command (as `python -m recordkit`, which works without the console script)."""
    command = [sys.executable, "-m", "recordkit", *args]
    print("$ recordkit", " ".join(args))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    print(result.stdout + result.stderr, end="")
    print(f"(exit status {result.returncode})\n")
    return result


def main(folder: Path) -> None:
    """Run the example in ``folder``; the intact records of the damaged shard go to rescued.tfrecord."""
    shards = folder / "shards"
    source = folder / "all.tfrecord"
    rng = np.random.default_rng(0)
    with rk.open(source, "w") as writer:
        for i in range(400):
            writer.write(rk.encode_example({"id": i, "vector": rng.random(16, dtype=np.float32)}))
    assert (
        recordkit("convert", "--quiet", str(source), str(shards), "--shards", "4").returncode == 0
    )
    assert recordkit("verify", str(shards)).returncode == 0

    # Damage one byte in the middle of the third shard.
    victim = sorted(shards.glob("*.tfrecord"))[2]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x40
    victim.write_bytes(bytes(data))

    result = recordkit("verify", str(shards))
    assert result.returncode == 1

    # The library raises the same error, with the location as attributes.
    try:
        with rk.open(victim) as reader:
            for _ in reader:
                pass
    except rk.CorruptRecordError as exc:
        print(
            f"{type(exc).__name__}: path={Path(exc.path).name} index={exc.index} offset={exc.offset}"
        )
    else:
        raise AssertionError("the damage went unnoticed")

    # Keep every intact record, before and after the damage; the report says what was skipped.
    rescued = folder / "rescued.tfrecord"
    report = salvage(victim, rescued, warn=False)
    print(report.summary().replace(str(victim), victim.name))
    for skipped in report.skipped:
        print(f"  skipped bytes {skipped.start} to {skipped.end} ({skipped.reason})")
    with rk.open(rescued) as reader:
        print(f"{rescued.name} holds {sum(1 for _ in reader)} records")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
