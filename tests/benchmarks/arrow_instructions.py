"""Count the instructions of parsing to Arrow and to numpy under callgrind: a figure machine load cannot move.

Wall-clock ratios on a shared machine swing by 20% from run to run; instruction counts repeat exactly.
Each contender runs in a process of its own under ``valgrind --tool=callgrind``: the benchmark's records are
loaded, both parsers warmed up, then one contender parses every record (``--batch`` per call; 0: all in one
call). A process that stops before parsing is the baseline subtracted from both.

Run: ``python tests/benchmarks/arrow_instructions.py [--records 100000] [--batch 0 1024]`` (needs valgrind
and pyarrow; several minutes, since callgrind runs Python about 50 times slower).
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile

import bench_arrow

CHILD = """
import pickle, sys
import recordkit as rk
import bench_arrow
records = pickle.load(open(sys.argv[1], "rb"))
to, size = sys.argv[2], int(sys.argv[3]) or len(records)
for warm in ("numpy", "arrow"):
    rk.parse_examples(records[:50], bench_arrow.SPEC, to=warm)
if to != "none":
    for i in range(0, len(records), size):
        rk.parse_examples(records[i : i + size], bench_arrow.SPEC, to=to)
"""


def instructions(data: str, to: str, size: int) -> int:
    """Instructions callgrind counts for one child process."""
    with tempfile.TemporaryDirectory() as scratch:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out"]
        result = subprocess.run(
            [*valgrind, sys.executable, "-c", CHILD, data, to, str(size)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    found = re.search(r"Collected : (\d+)", result.stderr)
    assert found, result.stderr[-2000:]
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[0, 1024])
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".pkl") as data:
        pickle.dump(bench_arrow.make_records(args.records), data)
        data.flush()
        base = instructions(data.name, "none", 0)
        for size in args.batch:
            numpy, arrow = (instructions(data.name, to, size) - base for to in ("numpy", "arrow"))
            per_call = f"{size or args.records:,} per call"
            print(f"parse {args.records:,} Examples, {per_call}: instructions (callgrind)")
            print(f"  parse_examples to numpy  {numpy:>16,}")
            print(f"  parse_examples to Arrow  {arrow:>16,}")
            print(f"  Arrow / numpy            {arrow / numpy:16.3f}")


if __name__ == "__main__":
    main()
