"""Fuzzing of every recordkit reader and payload decoder.

Each *target* takes valid seed inputs (the golden files and files written by recordkit), damages them
(:mod:`fuzz.mutations`: bit flips, cuts, splices, duplicated and deleted ranges, hostile length and offset
fields, random bytes) and checks that recordkit either reads the result correctly or raises one of its own
errors (:class:`recordkit.errors.RecordKitError`): never another exception, a hang, a crash or an oversized
allocation.

The pytest module ``tests/test_fuzz_short.py`` runs a few hundred cases per target in the normal suite.
The long run has its own command (from the repository root)::

    python -m tests.fuzz --cases 100000            # every target, 100k cases each
    python -m tests.fuzz --cases 5000 --target ffrecord --seed 7

It stops a case after ``--timeout`` seconds, caps the address space (``--memory-limit``), saves every
failing input under ``--save`` and exits with status 1 if any case failed.
"""

from __future__ import annotations

from .runner import Failure, Summary, run_target
from .targets import TARGETS, Target

__all__ = ["TARGETS", "Failure", "Summary", "Target", "run_target"]
