"""The DataFrame of each kind of summary, built from the values of event files (whole or appended parts).

A *builder* turns ``(run, values, plugins)`` items (one per event file, or per part of one appended since a
follower last read it; ``plugins`` the run's tag -> plugin map) into the kind's DataFrame. The readers of
whole log directories and :func:`recordkit.tensorboard.follow` use the same builders, so that both give the
same columns and the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import numpy as np

from recordkit.support.extras import needs
from recordkit.tensorboard import _read
from recordkit.tensorboard._events import Values

__all__ = ["KINDS", "TEXT_SUFFIX", "Builder", "Item", "builder", "tag_set"]

Item = tuple[str, Values, dict[str, str]]
Builder = Callable[[Iterable[Item]], Any]
_Rows = Callable[[Values, dict[str, str]], Iterable[dict[str, Any]]]

#: What PyTorch's and tensorboardX's ``add_text(tag, ...)`` append to the tag: ``text(tags=[tag])`` reads
#: both ``tag`` and ``tag + TEXT_SUFFIX``.
TEXT_SUFFIX = "/text_summary"

#: The kinds of summary, by the name of the function that reads them.
KINDS = ("scalars", "tensors", "histograms", "images", "text", "hparams")

_COLUMNS = {
    "tensors": ["tag", "step", "wall_time", "value", "plugin"],
    "histograms": [
        "tag",
        "step",
        "wall_time",
        "edges",
        "counts",
        "min",
        "max",
        "num",
        "sum",
        "sum_squares",
    ],
    "images": ["tag", "step", "wall_time", "index", "image", "width", "height"],
    "text": ["tag", "step", "wall_time", "value"],
    "hparams": ["name", "value", "wall_time"],
}


def tag_set(tags: str | Iterable[str] | None) -> Collection[str] | None:
    """The tags wanted (``None``: all), from a name or names."""
    if tags is None:
        return None
    return {tags} if isinstance(tags, str) else set(tags)


def _pandas() -> Any:
    with needs("recordkit.tensorboard", "pandas", "tensorboard", "pandas"):
        import pandas as pd  # the optional dependency, loaded on first use
    return pd


def _categories(codes: list[np.ndarray[Any, Any]], names: list[str]) -> Any:
    """A categorical column from integer codes into ``names`` (repeated labels: small and fast).

    Its categories are the labels of its rows only: ``names`` numbers every tag (and run) of the files,
    those of other kinds of summary and those not asked for too.
    """
    pd = _pandas()
    joined = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    column = pd.Categorical.from_codes(joined, categories=pd.Index(names, dtype=object))
    return column.remove_unused_categories()


def _scalar_frame(items: Iterable[Item], wanted: Collection[str] | None) -> Any:
    """The scalars of ``items``, decoded column by column."""
    runs: dict[str, int] = {}
    numbers: dict[str, int] = {}
    parts: dict[str, list[np.ndarray[Any, Any]]] = {
        key: [] for key in ("run", "tag", "step", "wall_time", "value")
    }
    for run, values, plugins in items:
        found = _read.scalar_columns(values, plugins, wanted)
        remap = np.array([numbers.setdefault(tag, len(numbers)) for tag in values.tags], np.int64)
        parts["tag"].append(remap[found["tag"]] if len(remap) else found["tag"])
        parts["run"].append(np.full(len(found["value"]), runs.setdefault(run, len(runs)), np.int64))
        for key in ("step", "wall_time", "value"):
            parts[key].append(found[key])
    pd = _pandas()
    empty = {"step": np.int64, "wall_time": np.float64, "value": np.float64}
    return pd.DataFrame(
        {
            "run": _categories(parts["run"], list(runs)),
            "tag": _categories(parts["tag"], list(numbers)),
            **{
                key: np.concatenate(parts[key]) if parts[key] else np.zeros(0, dtype)
                for key, dtype in empty.items()
            },
        }
    )


def _row_frame(items: Iterable[Item], rows: _Rows, columns: list[str]) -> Any:
    """A DataFrame of the rows ``rows`` yields for each item, with a ``run`` column first."""
    found: list[dict[str, Any]] = []
    for run, values, plugins in items:
        found.extend({"run": run, **row} for row in rows(values, plugins))
    pd = _pandas()
    frame = pd.DataFrame(found, columns=["run", *columns])
    for key in ("run", "tag"):
        if key in frame:
            frame[key] = frame[key].astype("category")
    if "step" in frame:
        frame["step"] = frame["step"].astype(np.int64)
    return frame


def builder(
    kind: str, tags: str | Iterable[str] | None = None, color_space: str = "RGB"
) -> Builder:
    """The builder of ``kind``'s DataFrame (one of :data:`KINDS`), for ``tags`` only (``None``: all;
    ``hparams`` have no tags); images are decoded to ``color_space``."""
    wanted = tag_set(tags)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind == "hparams" and wanted is not None:
        raise ValueError("hparams have no tags: pass tags=None")
    if kind == "scalars":
        return lambda items: _scalar_frame(items, wanted)
    rows: _Rows
    if kind == "tensors":
        rows = lambda values, plugins: _read.tensor_rows(values, plugins, wanted)
    elif kind == "histograms":
        rows = lambda values, plugins: _read.histogram_rows(values, plugins, wanted)
    elif kind == "text":
        # A tag names the text logged under it by PyTorch's and tensorboardX's add_text too.
        texts = None if wanted is None else {*wanted, *(tag + TEXT_SUFFIX for tag in wanted)}
        rows = lambda values, plugins: _read.text_rows(values, plugins, texts)
    elif kind == "hparams":
        rows = _read.hparam_rows
    else:
        from recordkit.decode.images import Image, decode_images

        spec = Image(color_space=color_space)

        def decode(encoded: list[bytes], tag: str, records: list[int]) -> list[Any]:
            return list(decode_images(encoded, spec, tag, rows=records))

        rows = lambda values, plugins: _read.image_rows(values, plugins, wanted, decode)
    columns = _COLUMNS[kind]
    return lambda items: _row_frame(items, rows, columns)
