"""The resumable position of a pipeline, as a plain JSON-compatible dict.

A position is *where in the deterministic order of an epoch* the consumer is: the epoch number and how many
items (records or batches) it has received. Everything else (which records, in which order, what sits in a
shuffle buffer) follows from the seed, the epoch and the shard, and is rebuilt on restore.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recordkit.datasets.ranks import resolve_rank, shard_of
from recordkit.errors import StateError

__all__ = [
    "ALL",
    "STATE_VERSION",
    "Elastic",
    "Phase",
    "Resume",
    "Run",
    "Stream",
    "check_state",
    "delivered_counts",
    "iteration_start",
    "loader_streams",
    "merge_states",
    "plan_runs",
]

STATE_VERSION = 2
"""Version 2: shuffle buffers draw their slots in blocks (numpy), so a version 1 state would resume with
other records in the buffers."""


def check_state(state: Mapping[str, Any], kind: str, expected: Mapping[str, Any]) -> None:
    """Check that ``state`` was saved by a pipeline like this one.

    Parameters
    ----------
    state
        What ``state_dict()`` returned.
    kind
        The kind of pipeline that is loading it (``"dataset"``, ``"loader"``, ...).
    expected
        Entries that must be equal in ``state`` (seed, number of files, batch size, ...).

    Raises
    ------
    StateError
        The state is of another kind or version, or an entry differs: restoring it would not give the
        remaining records of the saved run.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"a state must be a mapping, not {type(state).__name__}")
    version = state.get("version")
    if state.get("kind") == kind and isinstance(version, int) and 0 < version < STATE_VERSION:
        raise StateError(
            f"this {kind} state was saved by an earlier recordkit (state version {version}), whose "
            "shuffle buffers chose the records in another order: restoring it here would not continue "
            f"the same sequence of records (this version reads state version {STATE_VERSION}); start "
            "the epoch again"
        )
    if state.get("kind") != kind or version != STATE_VERSION:
        raise StateError(
            f"not a recordkit {kind} state (kind={state.get('kind')!r}, version={state.get('version')!r})"
        )
    for key, value in expected.items():
        saved = state.get(key)
        if isinstance(saved, list):
            saved = tuple(saved)
        if isinstance(value, list):
            value = tuple(value)
        if saved != value:
            raise StateError(
                f"the state was saved with {key}={saved!r} but this pipeline has {key}={value!r}; "
                "restoring it would not continue the same sequence of records"
                + (
                    "; to resume on another number of ranks, give load_state_dict the list of the "
                    "states saved by every rank"
                    if key in ("rank", "world_size")
                    else ""
                )
            )


# -- resuming on another number of shards ---------------------------------------------------------------

ALL = -1
"""A phase's count for a shard that had consumed every record it had (it had moved to the next epoch)."""


@dataclass(frozen=True)
class Phase:
    """Part of an epoch read by ``num_shards`` shards before the job stopped.

    ``consumed[s]`` is how many records shard ``s`` had taken from its stream (:data:`ALL`: all of them).
    """

    num_shards: int
    consumed: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Elastic:
    """The epoch ``epoch`` continued on another layout of shards: what each earlier layout had read.

    The first phase's shards read the epoch as planned (files, shuffle, interleave, shuffle buffer); each
    later phase's shards read balanced slices of what the phases before left
    (:func:`recordkit.data._files.remaining`).
    """

    epoch: int
    phases: tuple[Phase, ...]
    _cache: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    def to_state(self) -> dict[str, Any]:
        """The JSON-compatible form stored in a state under ``"elastic"``."""
        return {
            "epoch": self.epoch,
            "phases": [[p.num_shards, list(p.consumed)] for p in self.phases],
        }

    @classmethod
    def from_state(cls, data: Any) -> Elastic | None:
        """Read what :meth:`to_state` wrote (``None`` stays ``None``).

        Raises
        ------
        StateError
            It is malformed.
        """
        if data is None:
            return None
        try:
            phases = []
            for num_shards, consumed in data["phases"]:
                counts = tuple(_count(c) for c in consumed)
                if _count(num_shards) < 1 or len(counts) != num_shards:
                    raise ValueError
                phases.append(Phase(int(num_shards), counts))
            return cls(_count(data["epoch"]), tuple(phases))
        except (KeyError, TypeError, ValueError):
            raise StateError(f"malformed state: elastic={data!r}") from None

    def __getstate__(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "phases": self.phases, "_cache": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < ALL:
        raise ValueError(value)
    return value


@dataclass(frozen=True)
class Stream:
    """One saved stream of a position: ``items`` delivered by ``shard`` of ``num_shards`` (``None``:
    unknown: a state that an older version saved before the pipeline was ever iterated)."""

    shard: int | None
    num_shards: int | None
    items: int


def merge_states(
    states: Sequence[Mapping[str, Any]],
    kind: str,
    expected: Mapping[str, Any],
    streams: Callable[[Mapping[str, Any]], list[Stream]],
    records: Callable[[int], int],
) -> tuple[int, int, Elastic | None]:
    """Combine the positions saved by every rank of a run into one position for any new layout.

    Parameters
    ----------
    states
        What ``state_dict()`` returned on each rank (in any order).
    kind, expected
        As for :func:`check_state`.
    streams
        The streams a state saved (a dataset's one; a loader's one per worker).
    records
        How many records a stream had taken for a number of items it delivered.

    Returns
    -------
    epoch, first_epoch, elastic
        Where the restored pipeline continues: ``elastic`` says what the epoch's earlier layouts consumed
        (``None``: nothing, the epoch starts afresh).

    Raises
    ------
    StateError
        A state is of another pipeline, malformed, a shard is missing or given twice, or the ranks are
        in different epochs.
    UnsupportedOperationError
        A count of items cannot be turned into a count of records (see ``records``).
    """
    if isinstance(states, Mapping) or not states:
        raise StateError("give the list of the states saved by every rank of the run")
    for state in states:
        check_state(state, kind, expected)
    epoch = min(_count(state["epoch"]) for state in states)
    firsts = {_count(state["first_epoch"]) for state in states}
    if len(firsts) != 1:
        raise StateError(f"the ranks' states began iterating in different epochs: {sorted(firsts)}")
    current: list[Stream] = []
    history: set[Elastic | None] = set()
    finished: list[Stream] = []
    for state in states:
        saved = streams(state)
        at = _count(state["epoch"])
        if at == epoch:
            current.extend(saved)
            elastic = Elastic.from_state(state.get("elastic"))
            history.add(None if elastic is None or elastic.epoch != epoch else elastic)
        elif at == epoch + 1 and not any(s.items for s in saved):
            finished.extend(saved)  # this rank had read its whole share of the epoch
        else:
            raise StateError(
                f"the ranks' states are in different epochs ({epoch} and {at}): save every rank's "
                "state at the same step"
            )
    keys = {None if e is None else json.dumps(e.to_state()) for e in history}
    if len(keys) > 1:
        raise StateError("the ranks' states were resumed from different positions of the epoch")
    previous = next(iter(history), None)
    phases = () if previous is None else previous.phases
    if not finished and not any(s.items for s in current):
        return epoch, firsts.pop(), None if not phases else Elastic(epoch, phases)
    every = [(s, False) for s in current] + [(s, True) for s in finished]
    layouts = {s.num_shards for s, _ in every if s.num_shards is not None}
    if len(layouts) != 1 or any(s.shard is None for s, _ in every):
        raise StateError(
            "the states do not say which shard each rank read (a state that an older version saved "
            f"before its rank iterated, or states of different runs: {sorted(layouts)} shards)"
        )
    num_shards = layouts.pop()
    consumed: dict[int, int] = {}
    for s, done in every:
        assert s.shard is not None
        if s.shard in consumed or not 0 <= s.shard < num_shards:
            raise StateError(f"shard {s.shard} of {num_shards} is given twice or out of range")
        consumed[s.shard] = ALL if done else records(s.items)
    missing = sorted(set(range(num_shards)) - set(consumed))
    if missing:
        raise StateError(
            f"the states of shards {missing} of {num_shards} are missing: give the state of every "
            "rank of the run"
        )
    phase = Phase(num_shards, tuple(consumed[s] for s in range(num_shards)))
    return epoch, firsts.pop(), Elastic(epoch, (*phases, phase))


@dataclass(frozen=True)
class Resume:
    """Where a restored iteration continues: the streams of the workers that saved it.

    ``positions`` maps a saved worker to ``(epoch, items delivered in it)``. Each saved worker's stream is
    finished by the current worker ``saved % num_workers``, with the shard layout it was saved with; later
    epochs use the current layout.
    """

    first_epoch: int
    workers: int
    positions: dict[int, tuple[int, int]]


@dataclass(frozen=True)
class Run:
    """Epochs of one shard read in a row: ``epochs`` of them (``None``: forever) from ``epoch``.

    ``slot`` is the stream the items are counted against: the worker that reads them, or the saved worker
    whose unfinished stream they complete.
    """

    slot: int
    shard: int
    num_shards: int
    epoch: int
    skip: int
    epochs: int | None


def delivered_counts(state: Mapping[str, Any]) -> list[int]:
    """The items each stream of a loader state delivered, checked."""
    delivered = state.get("delivered")
    if (
        not isinstance(delivered, list)
        or not delivered
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in delivered)
    ):
        raise StateError(f"malformed loader state: delivered={delivered!r}")
    return delivered


def loader_streams(state: Mapping[str, Any]) -> list[Stream]:
    """The streams of a loader state: its workers' (or, in an epoch it resumed with another number of
    workers, the saved workers' it finished), ``shard_of(rank, world_size, i, len(delivered))``."""
    delivered = delivered_counts(state)
    rank, world_size = resolve_rank(int(state["rank"]), int(state["world_size"]))
    n = len(delivered)
    return [Stream(*shard_of(rank, world_size, i, n), count) for i, count in enumerate(delivered)]


def plan_runs(
    rank: int,
    world_size: int,
    worker: int,
    num_workers: int,
    first: int,
    end: int | None,
    resume: Resume | None,
) -> list[Run]:
    """The runs ``worker`` of ``num_workers`` of a rank reads in an iteration from epoch ``first`` to
    ``end``: the unfinished streams of saved workers it continues, then its own shard."""
    runs = []
    start = first
    if resume is not None:
        for saved in sorted(resume.positions):
            epoch, skip = resume.positions[saved]
            start = max(start, epoch + 1)
            if saved % num_workers != worker or (end is not None and epoch >= end):
                continue
            shard, num_shards = shard_of(rank, world_size, saved, resume.workers)
            runs.append(Run(saved, shard, num_shards, epoch, skip, 1))
    if end is None or start < end:
        shard, num_shards = shard_of(rank, world_size, worker, num_workers)
        epochs = None if end is None else end - start
        runs.append(Run(worker, shard, num_shards, start, 0, epochs))
    return runs


def iteration_start(epoch: int, first: int, epochs: int | None) -> int:
    """The first epoch of the iteration a restored position continues: ``first``, the saved one's, unless
    that iteration had read all its ``epochs`` (``None``: endless) when it was saved; then the next
    iteration starts at ``epoch``, as it would have in the process that saved it."""
    return epoch if epochs is not None and epoch >= first + epochs else first
