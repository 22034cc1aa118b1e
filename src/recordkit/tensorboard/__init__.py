"""TensorBoard event files as pandas DataFrames: scalars, tensors, histograms, images, text and hparams.

Every function takes a log directory (every event file under it; each directory holding event files is a
run, named by its path relative to the log directory, ``"."`` for the log directory itself, as TensorBoard
names runs) or one event file (run ``"."``)::

    import recordkit as rk

    df = rk.tensorboard.scalars("logs")                  # run, tag, step, wall_time, value
    loss = rk.tensorboard.scalars("logs", tags=["loss"])  # other tags are never decoded

Rows come in the order the values were written (runs by name, a run's files by name), one row per value:
nothing is sampled or dropped. Checksums are checked by default; damage raises recordkit's typed errors
naming the file, the record and its byte offset. Needs pandas (``pip install "recordkit[tensorboard]"``);
:func:`images` needs Pillow too. docs/tensorboard.md compares the results with tbparse and TensorBoard's
``EventAccumulator``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from recordkit.tensorboard import _read
from recordkit.tensorboard._events import Values

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["histograms", "hparams", "images", "scalars", "tensors", "text"]

PathLike = str | os.PathLike[str]


def _tag_set(tags: str | Iterable[str] | None) -> Collection[str] | None:
    if tags is None:
        return None
    return {tags} if isinstance(tags, str) else set(tags)


def _pandas() -> Any:
    import pandas as pd  # the optional dependency, loaded on first use

    return pd


def _categories(codes: list[np.ndarray[Any, Any]], names: list[str]) -> Any:
    """A categorical column from integer codes into ``names`` (repeated labels: small and fast)."""
    pd = _pandas()
    joined = np.concatenate(codes) if codes else np.zeros(0, np.int64)
    return pd.Categorical.from_codes(joined, categories=pd.Index(names, dtype=object))


def scalars(
    logdir_or_file: PathLike, tags: str | Iterable[str] | None = None, *, check_crc: bool = True
) -> pd.DataFrame:
    """Every scalar under a log directory (or in one event file) as a DataFrame.

    Parameters
    ----------
    logdir_or_file
        A log directory (every event file below it) or one event file.
    tags
        Only these tags (a name or names); the others are never decoded. ``None``: all.
    check_crc
        Verify every record's checksums (the default).

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` and ``tag`` (categorical), ``step`` (int64), ``wall_time`` (float64, seconds since
        the epoch) and ``value`` (float64): the legacy ``simple_value`` summaries (TF1, PyTorch,
        tensorboardX) and the tensors of the ``scalars`` plugin (TF2's ``tf.summary.scalar``, PyTorch with
        ``new_style=True``), in the order written.

    Raises
    ------
    FileNotFoundError
        ``logdir_or_file`` does not exist.
    recordkit.errors.CorruptRecordError
        A checksum does not match, or a file ends inside a record (``.path``, ``.index``, ``.offset``).
    recordkit.errors.DecodeError
        A record is not a valid ``Event``, or a scalar summary holds more than one number.
    """
    wanted = _tag_set(tags)
    runs: list[str] = []
    tag_names: list[str] = []
    numbers: dict[str, int] = {}
    parts: dict[str, list[np.ndarray[Any, Any]]] = {
        key: [] for key in ("run", "tag", "step", "wall_time", "value")
    }
    for run, files, plugins in _read.load_runs(logdir_or_file, check_crc):
        for values in files:
            found = _read.scalar_columns(values, plugins, wanted)
            remap = np.array(
                [numbers.setdefault(tag, len(numbers)) for tag in values.tags], np.int64
            )
            parts["tag"].append(remap[found["tag"]] if len(remap) else found["tag"])
            parts["run"].append(np.full(len(found["value"]), len(runs), np.int64))
            for key in ("step", "wall_time", "value"):
                parts[key].append(found[key])
        runs.append(run)
    tag_names = list(numbers)
    pd = _pandas()
    empty = {"step": np.int64, "wall_time": np.float64, "value": np.float64}
    return pd.DataFrame(
        {
            "run": _categories(parts["run"], runs),
            "tag": _categories(parts["tag"], tag_names),
            **{
                key: np.concatenate(parts[key]) if parts[key] else np.zeros(0, dtype)
                for key, dtype in empty.items()
            },
        }
    )


_Rows = Callable[[Values, dict[str, str]], Iterable[dict[str, Any]]]


def _frame(logdir_or_file: PathLike, rows: _Rows, columns: list[str], check_crc: bool) -> Any:
    """A DataFrame of the rows ``rows`` yields for each file, with a ``run`` column first."""
    found: list[dict[str, Any]] = []
    for run, files, plugins in _read.load_runs(logdir_or_file, check_crc):
        for values in files:
            found.extend({"run": run, **row} for row in rows(values, plugins))
    pd = _pandas()
    frame = pd.DataFrame(found, columns=["run", *columns])
    for key in ("run", "tag"):
        if key in frame:
            frame[key] = frame[key].astype("category")
    if "step" in frame:
        frame["step"] = frame["step"].astype(np.int64)
    return frame


def tensors(
    logdir_or_file: PathLike, tags: str | Iterable[str] | None = None, *, check_crc: bool = True
) -> pd.DataFrame:
    """Every tensor summary (of any plugin) as a DataFrame.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``value`` (a numpy array as TensorBoard's
    ``make_ndarray`` gives it, strings as ``bytes``; the Python scalar of a 0-d array) and ``plugin`` (the
    plugin named by the tag's first metadata: ``"scalars"``, ``"histograms"``, ``"text"``, ... or ``""``).
    ``tags`` and ``check_crc`` as for :func:`scalars`.
    """
    wanted = _tag_set(tags)
    return _frame(
        logdir_or_file,
        lambda values, plugins: _read.tensor_rows(values, plugins, wanted),
        ["tag", "step", "wall_time", "value", "plugin"],
        check_crc,
    )


def histograms(
    logdir_or_file: PathLike, tags: str | Iterable[str] | None = None, *, check_crc: bool = True
) -> pd.DataFrame:
    """Every histogram as a DataFrame, one row per histogram.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``edges`` (float64 array of the k + 1 bucket edges)
    and ``counts`` (float64 array of the k bucket counts), as ``numpy.histogram`` returns them (plot with
    ``matplotlib.pyplot.stairs(counts, edges)``), then ``min``, ``max``, ``num``, ``sum`` and
    ``sum_squares``. Legacy ``HistogramProto`` summaries (PyTorch, tensorboardX, TF1) have edges
    ``[min, bucket_limit[0], ..., bucket_limit[k - 2], max]``, as TensorBoard draws them; TF2's tensor
    histograms (``k x 3``: left edge, right edge, count) have their left edge followed by the right edges,
    and NaN for ``sum`` and ``sum_squares``, which they do not record. ``tags`` and ``check_crc`` as for
    :func:`scalars`.
    """
    wanted = _tag_set(tags)
    return _frame(
        logdir_or_file,
        lambda values, plugins: _read.histogram_rows(values, plugins, wanted),
        ["tag", "step", "wall_time", "edges", "counts", "min", "max", "num", "sum", "sum_squares"],
        check_crc,
    )


def images(
    logdir_or_file: PathLike,
    tags: str | Iterable[str] | None = None,
    *,
    color_space: str = "RGB",
    check_crc: bool = True,
) -> pd.DataFrame:
    """Every image summary, decoded, as a DataFrame: one row per image.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``index`` (the image's place in its summary: TF2's
    ``tf.summary.image`` writes up to ``max_outputs`` per step), ``image`` (a ``(H, W, C)`` uint8 array
    decoded by :class:`recordkit.Image`; ``color_space`` ``"RGB"``, ``"BGR"`` or ``"GRAY"``), ``width`` and
    ``height`` (as the summary states them). Needs Pillow. ``tags`` and ``check_crc`` as for
    :func:`scalars`.
    """
    from recordkit.decode.images import Image, decode_images

    spec = Image(color_space=color_space)
    wanted = _tag_set(tags)

    def decode(encoded: list[bytes], tag: str, records: list[int]) -> list[Any]:
        return list(decode_images(encoded, spec, tag, rows=records))

    return _frame(
        logdir_or_file,
        lambda values, plugins: _read.image_rows(values, plugins, wanted, decode),
        ["tag", "step", "wall_time", "index", "image", "width", "height"],
        check_crc,
    )


def text(
    logdir_or_file: PathLike, tags: str | Iterable[str] | None = None, *, check_crc: bool = True
) -> pd.DataFrame:
    """Every text summary as a DataFrame.

    Columns ``run``, ``tag`` (as written: PyTorch and tensorboardX append ``/text_summary`` to the tag they
    are given), ``step``, ``wall_time`` and ``value`` (a ``str``; an object array of ``str`` for a text
    tensor of several strings). ``tags`` and ``check_crc`` as for :func:`scalars`.
    """
    wanted = _tag_set(tags)
    return _frame(
        logdir_or_file,
        lambda values, plugins: _read.text_rows(values, plugins, wanted),
        ["tag", "step", "wall_time", "value"],
        check_crc,
    )


def hparams(logdir_or_file: PathLike, *, check_crc: bool = True) -> pd.DataFrame:
    """The hyperparameters of every run that logged them with the hparams plugin, as a DataFrame.

    Columns ``run``, ``name``, ``value`` (``float``, ``str`` or ``bool``, as logged) and ``wall_time`` (of the
    session start that logged them): one row per hyperparameter of each session start (TF's
    ``hparams_api.hparams``, PyTorch's and tensorboardX's ``add_hparams``). Pivot with
    ``df.pivot(index="run", columns="name", values="value")``.
    """
    return _frame(
        logdir_or_file,
        _read.hparam_rows,
        ["name", "value", "wall_time"],
        check_crc,
    )
