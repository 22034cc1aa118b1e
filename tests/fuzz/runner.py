"""Run fuzz cases with a per-case time limit and collect the failures.

Every case gets its own ``random.Random`` seeded from ``(seed, target, case number)``, so any failure can
be replayed alone with :func:`replay`.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import resource
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from recordkit.errors import RecordKitError, RecordKitWarning

from .targets import OUTCOMES, Case, Target, all_targets

__all__ = ["CaseTimeout", "Failure", "Summary", "replay", "run_job", "run_target", "time_limit"]


class CaseTimeout(BaseException):
    """A case ran longer than its time limit (a ``BaseException`` so no ``except Exception`` hides it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the main thread after ``seconds`` (no limit where SIGALRM is missing)."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise CaseTimeout(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Failure:
    """A case that ended in something other than a result or a recordkit error."""

    target: str
    number: int
    seed: str
    description: str
    error: str
    where: str
    trace: str
    data: bytes

    @property
    def key(self) -> tuple[str, str, str]:
        """Failures with the same target, exception type and raising line are one bug."""
        return self.target, self.error.split(":", 1)[0], self.where


@dataclass
class Summary:
    """The outcome of running one target."""

    target: str
    cases: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def distinct(self) -> dict[tuple[str, str, str], list[Failure]]:
        """The failures grouped by :attr:`Failure.key`."""
        groups: dict[tuple[str, str, str], list[Failure]] = {}
        for failure in self.failures:
            groups.setdefault(failure.key, []).append(failure)
        return groups

    def lines(self) -> list[str]:
        """A human-readable report."""
        calls = ", ".join(f"{name} {count}" for name, count in self.outcomes.most_common())
        head = (
            f"{self.target}: {self.cases} cases in {self.seconds:.1f} s; {len(self.failures)} failures "
            f"({len(self.distinct)} distinct); calls ended: {calls}"
        )
        out = [head]
        for (_, error, where), members in self.distinct.items():
            first = members[0]
            out.append(
                f"  FAIL x{len(members)} {error} at {where} (case {first.number}: {first.description})"
            )
        return out


def _case_rng(seed: int, target: str, number: int) -> random.Random:
    return random.Random(f"{seed}:{target}:{number}")


def _innermost(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        if "recordkit" in frame.filename and "/fuzz/" not in frame.filename:
            return f"{os.path.basename(frame.filename)}:{frame.lineno} ({frame.name})"
    last = frames[-1] if frames else None
    return f"{os.path.basename(last.filename)}:{last.lineno}" if last else "?"


def run_case(
    target: Target, case: Case, rng: random.Random, timeout: float
) -> BaseException | None:
    """Run one case; return the exception that makes it a failure, or ``None``."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", RecordKitWarning)
        try:
            with time_limit(timeout):
                target.run(case, rng)
        except RecordKitError:
            return None  # run() catches these itself; one escaping is still an accepted outcome
        except (Exception, CaseTimeout) as exc:  # noqa: BLE001 - the failures looked for
            return exc
    return None


def run_target(
    target: Target,
    cases: int,
    *,
    seed: int = 0,
    timeout: float = 30.0,
    start: int = 0,
    progress: Callable[[Summary], None] | None = None,
    max_seconds: float | None = None,
) -> Summary:
    """Run cases ``start .. start + cases - 1`` of ``target``.

    Parameters
    ----------
    target
        The target.
    cases
        How many cases.
    seed
        The run's seed (cases are reproducible from it).
    timeout
        The time limit of one case, in seconds.
    start
        The number of the first case.
    progress
        Called with the summary so far every 1000 cases.
    max_seconds
        Stop early after this long (the summary says how many cases ran).
    """
    summary = Summary(target.name)
    OUTCOMES.clear()
    began = time.perf_counter()
    try:
        for number in range(start, start + cases):
            rng = _case_rng(seed, target.name, number)
            case = target.make_case(rng)
            error = run_case(target, case, rng, timeout)
            summary.cases += 1
            if error is not None:
                summary.failures.append(
                    Failure(
                        target.name,
                        number,
                        case.seed.name,
                        f"{case.description} {case.options}",
                        f"{type(error).__name__}: {error}"[:300],
                        _innermost(error),
                        "".join(traceback.format_exception(error)),
                        case.data,
                    )
                )
            if progress is not None and summary.cases % 1000 == 0:
                summary.seconds = time.perf_counter() - began
                progress(summary)
            if max_seconds is not None and time.perf_counter() - began > max_seconds:
                break
    finally:
        target.cleanup()
        summary.outcomes.update(OUTCOMES)
    summary.seconds = time.perf_counter() - began
    return summary


def replay(target: Target, number: int, *, seed: int = 0) -> None:
    """Run one case again, letting its exception propagate (for debugging)."""
    rng = _case_rng(seed, target.name, number)
    case = target.make_case(rng)
    try:
        target.run(case, rng)
    finally:
        target.cleanup()


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


def _progress(summary: Summary) -> None:
    print(
        f"  {summary.target}: {summary.cases} cases, {len(summary.failures)} failures, "
        f"{summary.seconds:.0f} s",
        file=sys.stderr,
        flush=True,
    )


def run_job(job: tuple[str, argparse.Namespace]) -> Summary:
    """Run one target (in this process, or in a worker) under the memory cap."""
    name, args = job
    target = all_targets()[name]
    _ = target.seeds  # build the seeds before capping memory
    if args.memory_limit > 0:
        _limit_memory(args.memory_limit << 20)
    return run_target(
        target,
        args.cases,
        seed=args.seed,
        timeout=args.timeout,
        start=args.start,
        progress=_progress,
    )
