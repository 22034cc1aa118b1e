"""``on_error="skip"`` through a :class:`~recordkit.integrations.torch.RecordLoader`'s worker processes.

A worker's :class:`~recordkit.integrations.torch.MapDataset` collects what it skipped instead of warning
(:attr:`DamageLog.forward <recordkit.datasets.damage.DamageLog>`, set when the worker starts); the loader's
collate function, which runs in the worker after each batch is read, sends it along with the batch
(:class:`Forwarded`), and the main process counts and warns about it (:meth:`DamageLog.receive
<recordkit.datasets.damage.DamageLog.receive>`, as a :class:`~recordkit.data.Loader` does with its
workers' reports): a :class:`~recordkit.errors.DataLossWarning` per damaged file naming each damaged
record (at the latest when the iteration ends), counts over every worker, ``max_skipped`` over every
worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.utils.data as torch_data

from recordkit.datasets.damage import DamageLog

__all__ = ["Forwarded", "collate_forwarding", "damage_log", "received", "skipped", "start_worker"]


def damage_log(dataset: Any) -> DamageLog | None:
    """The damage log of a :class:`~recordkit.integrations.torch.MapDataset` that skips damage, else ``None``."""
    records = getattr(dataset, "_records", None)
    return getattr(records, "damage", None)


class Forwarded:
    """A collated batch and what the worker skipped while reading it, on their way to the main process."""

    __slots__ = ("batch", "events")

    def __init__(self, batch: Any, events: list[dict[str, Any]]) -> None:
        self.batch = batch
        self.events = events

    def pin_memory(self) -> Forwarded:
        """The batch's tensors in pinned memory (the ``DataLoader``'s ``pin_memory=True`` calls this)."""
        pin = torch_data._utils.pin_memory.pin_memory
        return Forwarded(pin(self.batch), self.events)  # type: ignore[no-untyped-call]


def start_worker(init: Callable[[int], None] | None, worker: int) -> None:
    """A ``worker_init_fn``: make the worker's dataset forward what it skips, then run the user's ``init``."""
    info = torch_data.get_worker_info()
    log = damage_log(info.dataset) if info is not None else None
    if log is not None:
        log.forward = True
    if init is not None:
        init(worker)


def collate_forwarding(collate: Callable[[Any], Any], batch: Any) -> Any:
    """``collate(batch)``, as :class:`Forwarded` with the events when the worker skipped something."""
    out = collate(batch)
    info = torch_data.get_worker_info()
    log = damage_log(info.dataset) if info is not None else None
    if log is None or not log.pending:
        return out
    return Forwarded(out, log.take_pending())


def skipped(dataset: Any) -> dict[str, Any] | None:
    """What ``dataset`` skipped so far in the epoch, in this process (with a loader: in every worker), as
    ``state_dict()["skipped"]`` reports it; ``None`` unless it skips damage."""
    log = damage_log(dataset)
    return None if log is None else log.summary()


def received(log: DamageLog | None, item: Any) -> Any:
    """The batch of a loader's ``item``, after counting what a worker forwarded with it."""
    if not isinstance(item, Forwarded):
        return item
    assert log is not None
    log.receive(item.events)
    return item.batch
