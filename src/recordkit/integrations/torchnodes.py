"""torchdata.nodes glue: a :class:`~recordkit.data.Dataset` as a ``BaseNode``, resumable in torchdata's ``Loader``.

:func:`node` (also ``recordkit.integrations.torch.node``) wraps a pipeline as a :class:`RecordNode`, the
leaf of a ``torchdata.nodes`` graph. Its position is the dataset's own: ``get_state()`` is
:meth:`Dataset.state_dict <recordkit.data.Dataset.state_dict>` and ``reset(state)`` is
:meth:`Dataset.load_state_dict <recordkit.data.Dataset.load_state_dict>`, so a ``Loader`` restored from its
``state_dict()`` continues with exactly the items not yet delivered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from recordkit.support.extras import needs

with needs("recordkit.integrations.torchnodes", "torchdata (0.10 or later)", None, "torchdata"):
    from torchdata.nodes import BaseNode

from recordkit.data import Dataset

__all__ = ["RecordNode", "node"]

_DATASET = "dataset"


class RecordNode(BaseNode[Any]):  # type: ignore[misc]
    """A :class:`~recordkit.data.Dataset` as a ``torchdata.nodes.BaseNode``; made by :func:`node`.

    ``next()`` gives the dataset's items (records, or what its ``map`` and ``batch`` stages make) in the
    order iterating the dataset gives them, this process's shard of them (its rank). Each
    ``reset(None)`` (each ``iter()`` of a ``torchdata.nodes.Loader``) starts the next epoch, as each
    iteration of a PyTorch ``DataLoader`` over :func:`~recordkit.integrations.torch.torch_dataset` does:
    after a complete epoch the one after it, and after an epoch left part-way the one after that (the
    first ``reset`` starts the dataset's current epoch). ``reset(state)`` continues from a state saved by
    ``get_state()`` (through ``Loader.state_dict()``), with exactly the items not yet delivered.

    The state is the dataset's :meth:`~recordkit.data.Dataset.state_dict` under the key ``"dataset"``
    (JSON-compatible); a state of another pipeline (other seed, files, batch size, shuffle...) is refused
    with ``ValueError`` by :meth:`~recordkit.data.Dataset.load_state_dict`.

    Attributes
    ----------
    dataset
        The wrapped pipeline (the node moves its position: give each node its own).
    """

    def __init__(self, dataset: Dataset) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(f"node() takes a recordkit Dataset, not {type(dataset).__name__}")
        super().__init__()
        self.dataset = dataset
        self._items: Iterator[Any] | None = None
        self._ended = False

    def reset(self, initial_state: dict[str, Any] | None = None) -> None:
        """Start the next epoch (``None``), or continue from ``initial_state``, saved by :meth:`get_state`."""
        super().reset(initial_state)
        started = self._items is not None and not self._ended
        self._close()
        if initial_state is not None:
            self.dataset.load_state_dict(initial_state[_DATASET])
        else:
            # The dataset's epoch is already the next one after a complete epoch (it counts it at the end).
            self.dataset.set_epoch(self.dataset.epoch + (1 if started else 0))
        self._items = iter(self.dataset)
        self._ended = False

    def next(self) -> Any:
        """The next item; ``StopIteration`` at the end of the epoch (of the ``repeat`` epochs)."""
        assert self._items is not None  # BaseNode calls reset() first
        try:
            return next(self._items)
        except StopIteration:
            self._ended = True
            raise

    def get_state(self) -> dict[str, Any]:
        """The position: ``{"dataset": dataset.state_dict()}``."""
        return {_DATASET: self.dataset.state_dict()}

    def _close(self) -> None:
        items, self._items = self._items, None
        close = getattr(items, "close", None)
        if close is not None:
            close()  # the readers of an abandoned iteration are closed now, not when collected


def node(dataset: Dataset) -> RecordNode:
    """Return a ``torchdata.nodes.BaseNode`` over ``dataset`` (a :class:`RecordNode`).

    Use it as the source of a ``torchdata.nodes`` graph and wrap the graph in ``torchdata.nodes.Loader``,
    whose ``state_dict()`` / ``load_state_dict()`` then save and restore the exact position.

    Examples
    --------
    >>> from torchdata.nodes import Loader  # doctest: +SKIP
    >>> loader = Loader(node(Dataset("train-*.tfrecord", seed=1).shuffle(1024).batch(32)))  # doctest: +SKIP
    >>> for batch in loader:  # doctest: +SKIP
    ...     ...
    """
    return RecordNode(dataset)
