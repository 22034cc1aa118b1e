"""The long fuzz run: ``python -m tests.fuzz --cases 100000`` from the repository root.

Exit status 0 when no case failed, 1 otherwise. Failing inputs are written to ``--save`` (one file per
distinct failure, named after the target and case number) and can be replayed with ``--replay N``.
``--jobs N`` runs the targets in N worker processes (one target per process at a time).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from .runner import Summary, replay, run_job
from .targets import TARGETS, all_targets


def _report(summary: Summary, save: str, total: int, failed: int) -> tuple[int, int]:
    """Print a target's summary, save one input per distinct failure; return the running totals."""
    print("\n".join(summary.lines()), flush=True)
    for members in summary.distinct.values():
        first = members[0]
        os.makedirs(save, exist_ok=True)
        stem = os.path.join(save, f"{first.target}-{first.number}")
        with open(stem + ".bin", "wb") as file:
            file.write(first.data)
        with open(stem + ".txt", "w", encoding="utf-8") as file:
            file.write(f"{first.description}\n\n{first.trace}")
    return total + summary.cases, failed + len(summary.failures)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the targets, print a report; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument(
        "--cases", type=int, default=10_000, help="cases per target (default 10000)"
    )
    parser.add_argument(
        "--target", action="append", choices=TARGETS, help="run only this target (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--start", type=int, default=0, help="number of the first case")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds allowed per case (default 60)"
    )
    parser.add_argument(
        "--memory-limit",
        type=int,
        default=1024,
        help="MiB of address space allowed above the start (default 1024)",
    )
    parser.add_argument("--save", default="fuzz-failures", help="folder for failing inputs")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes, each running whole targets (default 1)",
    )
    parser.add_argument(
        "--replay", type=int, metavar="N", help="run case N of one --target and show its traceback"
    )
    args = parser.parse_args(argv)
    names = args.target or list(TARGETS)
    if args.replay is not None:
        if len(names) != 1:
            parser.error("--replay needs exactly one --target")
        replay(all_targets()[names[0]], args.replay, seed=args.seed)
        print("no failure")
        return 0
    failed = 0
    total = 0
    began = time.perf_counter()
    jobs = [(name, args) for name in names]
    if args.jobs > 1:
        # spawn, not fork: a target may have started a peer's threads (TensorFlow) in this process.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            futures = {pool.submit(run_job, job): job[0] for job in jobs}
            for future in as_completed(futures):
                try:
                    summary = future.result()
                except BrokenProcessPool:
                    # A crash in native code (a peer's parser) ends the worker, not the run's report.
                    print(f"{futures[future]}: a worker process died; rerun it alone", flush=True)
                    failed += 1
                    continue
                total, failed = _report(summary, args.save, total, failed)
    else:
        for job in jobs:
            total, failed = _report(run_job(job), args.save, total, failed)
    elapsed = time.perf_counter() - began
    print(
        f"total: {total} cases, {failed} failures (uncaught exceptions, hangs, wrong data), {elapsed:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
