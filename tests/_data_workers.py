"""Running a pipeline as each (rank, DataLoader worker) of a job would, in this process; resuming it.

The pipeline learns its worker from ``torch.utils.data.get_worker_info()``, looked up in ``sys.modules``;
:func:`as_worker` puts a stand-in module there that answers as worker ``worker`` of ``num_workers``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any


@contextlib.contextmanager
def as_worker(worker: int, num_workers: int) -> Iterator[None]:
    """Make the pipeline see itself inside DataLoader worker ``worker`` of ``num_workers``."""
    info = types.SimpleNamespace(id=worker, num_workers=num_workers, seed=0, dataset=None)
    fake = types.ModuleType("torch.utils.data")
    fake.get_worker_info = lambda: info  # type: ignore[attr-defined]
    saved = sys.modules.get("torch.utils.data")
    sys.modules["torch.utils.data"] = fake
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["torch.utils.data"]
        else:
            sys.modules["torch.utils.data"] = saved


def every_share(
    make: Callable[[int, int], Any],
    world_size: int,
    num_workers: int,
    use: Callable[[Any], Any] = list,
) -> list[Any]:
    """``use`` (default: read one epoch) of the pipeline as every (rank, worker) sees it.

    ``make(rank, world_size)`` builds the pipeline; it is built and used inside the worker.
    """
    out = []
    for rank in range(world_size):
        for worker in range(num_workers):
            with as_worker(worker, num_workers):
                out.append(use(make(rank, world_size)))
    return out


def share_lengths(make: Callable[[int, int], Any], world_size: int, num_workers: int) -> list[int]:
    """``len()`` of the pipeline as every (rank, worker) sees it."""
    return every_share(make, world_size, num_workers, len)


def resumes(build: Callable[[], Any], points: Iterable[int], total: int | None = None) -> None:
    """Stopping after k items and restoring the state in a fresh pipeline gives the rest, exactly.

    ``total`` compares only the first ``total`` items, for a pipeline that never ends.
    """
    full = list(itertools.islice(build(), total))
    for k in points:
        k = min(k, len(full))
        ds = build()
        it = iter(ds)
        head = list(itertools.islice(it, k))
        state = json.loads(json.dumps(ds.state_dict()))
        it.close()
        restored = build()
        restored.load_state_dict(state)
        assert head + list(itertools.islice(restored, len(full) - k)) == full, k
