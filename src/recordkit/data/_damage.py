"""The pipeline's side of ``on_error="skip"`` (the readers and the counting are in
:mod:`recordkit.datasets.damage`): the stage that drops the places of damaged records, and the counts a
state reports."""

from __future__ import annotations

from typing import Any

from recordkit.data._stages import Filter, Stage
from recordkit.datasets.damage import (
    DamageLog,
    OnError,
    SkippingReader,
    check_on_error,
    intact,
)

__all__ = [
    "DamageLog",
    "OnError",
    "SkippingReader",
    "check_on_error",
    "intact",
    "log_of",
    "skipped_summary",
    "with_damage_filter",
]


def log_of(source: Any) -> DamageLog | None:
    """The damage log of a pipeline's file source that skips damage, else ``None``."""
    catalog = getattr(source, "catalog", None)
    if catalog is None or getattr(catalog, "on_error", "raise") != "skip":
        return None
    return catalog.damage  # type: ignore[no-any-return]


def with_damage_filter(source: Any, stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The stages an epoch runs: a source that skips damage drops the :data:`DAMAGED` places first.

    As a ``filter`` does, this makes resuming run that first stage again over the part of the epoch
    already delivered (reading it again, without running the user's stages on it): the count of
    records delivered then tells the position in the file's numbering, holes included.
    """
    if log_of(source) is None:
        return stages
    return (Filter(intact), *stages)


def skipped_summary(source: Any) -> dict[str, Any] | None:
    """What the pipeline skipped so far in the epoch (``None`` unless it skips damage)."""
    log = log_of(source)
    return None if log is None else log.summary()
