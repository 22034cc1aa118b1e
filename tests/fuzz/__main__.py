"""The long fuzz run: ``python -m tests.fuzz --cases 100000`` from the repository root.

Exit status 0 when no case failed, 1 otherwise. Failing inputs are written to ``--save`` (one file per
distinct failure, named after the target and case number) and can be replayed with ``--replay N``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from .runner import Summary, replay, run_target
from .targets import TARGETS, all_targets


def _limit_memory(extra: int) -> None:
    """Cap the address space at what the process uses now plus ``extra`` bytes."""
    with open("/proc/self/statm") as file:
        pages = int(file.read().split()[0])
    current = pages * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = current + extra
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


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
        "--replay", type=int, metavar="N", help="run case N of one --target and show its traceback"
    )
    args = parser.parse_args(argv)
    targets = all_targets()
    names = args.target or list(TARGETS)
    if args.replay is not None:
        if len(names) != 1:
            parser.error("--replay needs exactly one --target")
        replay(targets[names[0]], args.replay, seed=args.seed)
        print("no failure")
        return 0
    for name in names:
        _ = targets[name].seeds  # build the seeds before capping memory
    if args.memory_limit > 0:
        _limit_memory(args.memory_limit << 20)

    def progress(summary: Summary) -> None:
        print(
            f"  {summary.target}: {summary.cases} cases, {len(summary.failures)} failures, "
            f"{summary.seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    failed = 0
    total = 0
    began = time.perf_counter()
    for name in names:
        summary = run_target(
            targets[name],
            args.cases,
            seed=args.seed,
            timeout=args.timeout,
            start=args.start,
            progress=progress,
        )
        total += summary.cases
        failed += len(summary.failures)
        print("\n".join(summary.lines()), flush=True)
        for members in summary.distinct.values():
            first = members[0]
            os.makedirs(args.save, exist_ok=True)
            stem = os.path.join(args.save, f"{first.target}-{first.number}")
            with open(stem + ".bin", "wb") as file:
                file.write(first.data)
            with open(stem + ".txt", "w", encoding="utf-8") as file:
                file.write(f"{first.description}\n\n{first.trace}")
    elapsed = time.perf_counter() - began
    print(
        f"total: {total} cases, {failed} failures (uncaught exceptions, hangs, wrong data), {elapsed:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
