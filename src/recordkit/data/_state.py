"""The resumable position of a pipeline, as a plain JSON-compatible dict.

A position is *where in the deterministic order of an epoch* the consumer is: the epoch number and how many
items (records or batches) it has received. Everything else (which records, in which order, what sits in a
shuffle buffer) follows from the seed, the epoch and the shard, and is rebuilt on restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["STATE_VERSION", "check_state"]

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
    ValueError
        The state is of another kind or version, or an entry differs: restoring it would not give the
        remaining records of the saved run.
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"a state must be a mapping, not {type(state).__name__}")
    version = state.get("version")
    if state.get("kind") == kind and isinstance(version, int) and 0 < version < STATE_VERSION:
        raise ValueError(
            f"this {kind} state was saved by an earlier recordkit (state version {version}), whose "
            "shuffle buffers chose the records in another order: restoring it here would not continue "
            f"the same sequence of records (this version reads state version {STATE_VERSION}); start "
            "the epoch again"
        )
    if state.get("kind") != kind or version != STATE_VERSION:
        raise ValueError(
            f"not a recordkit {kind} state (kind={state.get('kind')!r}, version={state.get('version')!r})"
        )
    for key, value in expected.items():
        saved = state.get(key)
        if isinstance(saved, list):
            saved = tuple(saved)
        if isinstance(value, list):
            value = tuple(value)
        if saved != value:
            raise ValueError(
                f"the state was saved with {key}={saved!r} but this pipeline has {key}={value!r}; "
                "restoring it would not continue the same sequence of records"
            )
