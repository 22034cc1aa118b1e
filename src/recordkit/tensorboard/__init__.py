"""TensorBoard event files as pandas DataFrames: scalars, tensors, histograms, images, text and hparams.

Every function takes a log directory (every event file under it; each directory holding event files is a
run, named by its path relative to the log directory, ``"."`` for the log directory itself, as TensorBoard
names runs), one event file (run ``"."``), a glob pattern, or a list of them (runs named relative to the
common parent of the paths given: ``["logs/a", "logs/b"]`` and ``"logs/*"`` have runs ``"a"`` and ``"b"``)::

    import recordkit as rk

    df = rk.tensorboard.scalars("logs")                  # run, tag, step, wall_time, value
    ab = rk.tensorboard.scalars(["logs/a", "logs/b"])    # runs "a" and "b" (and below them)
    loss = rk.tensorboard.scalars("logs", tags=["loss"])  # other tags are never decoded
    for batch in rk.tensorboard.follow("logs", idle_timeout=600):  # rows as a training job logs them
        ...

Rows come in the order the values were written (runs by name, a run's files by name), one row per value:
nothing is sampled or dropped. Checksums are checked by default; damage raises recordkit's typed errors
naming the file, the record and its byte offset; a file that ends inside a record (still being written)
raises :class:`~recordkit.errors.TruncatedRecordError` unless ``growing=True``. Needs pandas (``pip install "recordkit[tensorboard]"``);
:func:`images` needs Pillow too. docs/tensorboard.md compares the results with tbparse and TensorBoard's
``EventAccumulator``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from recordkit.support.moved import renamed_arguments
from recordkit.tensorboard import _frames, _read
from recordkit.tensorboard._follow import LogFollower
from recordkit.tensorboard._read import Sources

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LogFollower", "follow", "histograms", "hparams", "images", "scalars", "tensors", "text"]


def _read_all(
    kind: str,
    sources: Sources,
    tags: str | Iterable[str] | None,
    check_crc: bool,
    growing: bool,
    color_space: str = "RGB",
) -> pd.DataFrame:
    build = _frames.builder(kind, tags, color_space)
    result: pd.DataFrame = build(_read.load_runs(sources, check_crc, growing))
    return result


@renamed_arguments(logdir_or_file="sources")
def scalars(
    sources: Sources,
    tags: str | Iterable[str] | None = None,
    *,
    check_crc: bool = True,
    growing: bool = False,
) -> pd.DataFrame:
    """Every scalar under a log directory (or in one event file) as a DataFrame.

    Parameters
    ----------
    sources
        A log directory (every event file below it; runs named relative to it), one event file (run
        ``"."``), a glob pattern (the directories and event files it matches), or a list of them. Runs are
        named by their directory's path relative to the common parent of what is given: a directory, an
        event file's directory, a pattern's directory before its first wildcard. So
        ``["logs/a", "logs/b"]`` and ``"logs/*"`` both have the runs ``"a"`` and ``"b"`` (and ``"a/x"``
        for ``logs/a/x``), the names ``scalars("logs")`` gives them. A file named twice is read once.
    tags
        Only these tags (a name or names); the others are never decoded. ``None``: all.
    check_crc
        Verify every record's checksums (the default).
    growing
        The files may still be being written: a record cut short by the end of a file is left out (a
        later call reads it once it is complete) instead of raising
        :class:`~recordkit.errors.TruncatedRecordError`. Damage still raises. To read the rows as they
        are written, use :func:`follow`.

    Returns
    -------
    pandas.DataFrame
        Columns ``run`` and ``tag`` (categorical, with the runs and tags of the rows), ``step`` (int64), ``wall_time`` (float64, seconds since
        the epoch) and ``value`` (float64): the legacy ``simple_value`` summaries (TF1, PyTorch,
        tensorboardX) and the tensors of the ``scalars`` plugin (TF2's ``tf.summary.scalar``, PyTorch with
        ``new_style=True``), in the order written.

    Raises
    ------
    FileNotFoundError
        A path does not exist, or a pattern matches no directory or event file.
    TypeError
        ``sources`` is not a path (``str`` or ``os.PathLike``), a pattern, or a list of them.
    recordkit.errors.CorruptRecordError
        A checksum does not match, or a file ends inside a record (``.path``, ``.index``, ``.offset``;
        :class:`~recordkit.errors.TruncatedRecordError`, unless ``growing``).
    recordkit.errors.DecodeError
        A record is not a valid ``Event``, or a scalar summary holds more than one number.
    """
    return _read_all("scalars", sources, tags, check_crc, growing)


@renamed_arguments(logdir_or_file="sources")
def tensors(
    sources: Sources,
    tags: str | Iterable[str] | None = None,
    *,
    check_crc: bool = True,
    growing: bool = False,
) -> pd.DataFrame:
    """Every tensor summary (of any plugin) as a DataFrame.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``value`` (a numpy array as TensorBoard's
    ``make_ndarray`` gives it, strings as ``bytes``; the Python scalar of a 0-d array) and ``plugin`` (the
    plugin named by the tag's first metadata: ``"scalars"``, ``"histograms"``, ``"text"``, ... or ``""``).
    ``tags``, ``check_crc`` and ``growing`` as for :func:`scalars`.
    """
    return _read_all("tensors", sources, tags, check_crc, growing)


@renamed_arguments(logdir_or_file="sources")
def histograms(
    sources: Sources,
    tags: str | Iterable[str] | None = None,
    *,
    check_crc: bool = True,
    growing: bool = False,
) -> pd.DataFrame:
    """Every histogram as a DataFrame, one row per histogram.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``edges`` (float64 array of the k + 1 bucket edges)
    and ``counts`` (float64 array of the k bucket counts), as ``numpy.histogram`` returns them (plot with
    ``matplotlib.pyplot.stairs(counts, edges)``), then ``min``, ``max``, ``num``, ``sum`` and
    ``sum_squares``. The edges never decrease. Legacy ``HistogramProto`` summaries (PyTorch,
    tensorboardX, TF1) have edges ``[min, bucket_limit[0], ..., bucket_limit[k - 2], max]`` clipped to
    ``[min, max]``: TensorBoard's edges (the data's min, the inner limits, the data's max) for the
    buckets from the first non-empty one to the last, and zero-width edges at ``min`` or ``max`` for the
    empty buckets the writers add outside them (one before the data for PyTorch and tensorboardX, one
    before and one after for TF1); ``counts`` are the stored buckets, all of them. TF2's tensor
    histograms (``k x 3``: left edge, right edge, count) have their left edge followed by the right edges,
    and NaN for ``sum`` and ``sum_squares``, which they do not record. ``tags``, ``check_crc`` and
    ``growing`` as for :func:`scalars`.
    """
    return _read_all("histograms", sources, tags, check_crc, growing)


@renamed_arguments(logdir_or_file="sources")
def images(
    sources: Sources,
    tags: str | Iterable[str] | None = None,
    *,
    color_space: str = "RGB",
    check_crc: bool = True,
    growing: bool = False,
) -> pd.DataFrame:
    """Every image summary, decoded, as a DataFrame: one row per image.

    Columns ``run``, ``tag``, ``step``, ``wall_time``, ``index`` (the image's place in its summary: TF2's
    ``tf.summary.image`` writes up to ``max_outputs`` per step), ``image`` (a ``(H, W, C)`` uint8 array
    decoded by :class:`recordkit.Image`; ``color_space`` ``"RGB"``, ``"BGR"`` or ``"GRAY"``), ``width`` and
    ``height`` (as the summary states them). Needs Pillow. ``tags``, ``check_crc`` and ``growing`` as for
    :func:`scalars`.
    """
    return _read_all("images", sources, tags, check_crc, growing, color_space)


@renamed_arguments(logdir_or_file="sources")
def text(
    sources: Sources,
    tags: str | Iterable[str] | None = None,
    *,
    check_crc: bool = True,
    growing: bool = False,
) -> pd.DataFrame:
    """Every text summary as a DataFrame.

    Columns ``run``, ``tag`` (as written: PyTorch and tensorboardX append ``/text_summary`` to the tag they
    are given), ``step``, ``wall_time`` and ``value`` (a ``str``; an object array of ``str`` for a text
    tensor of several strings). A tag in ``tags`` selects the text logged under it by PyTorch's and
    tensorboardX's ``add_text`` too: ``tags=["note"]`` reads ``"note"`` and ``"note/text_summary"``
    (the rows keep the tag as written). ``check_crc`` and ``growing`` as for :func:`scalars`.
    """
    return _read_all("text", sources, tags, check_crc, growing)


@renamed_arguments(logdir_or_file="sources")
def hparams(sources: Sources, *, check_crc: bool = True, growing: bool = False) -> pd.DataFrame:
    """The hyperparameters of every run that logged them with the hparams plugin, as a DataFrame.

    Columns ``run``, ``name``, ``value`` (``float``, ``str`` or ``bool``, as logged) and ``wall_time`` (of the
    session start that logged them): one row per hyperparameter of each session start (TF's
    ``hparams_api.hparams``, PyTorch's and tensorboardX's ``add_hparams``). Pivot with
    ``df.pivot(index="run", columns="name", values="value")``. ``check_crc`` and ``growing`` as for
    :func:`scalars`.
    """
    return _read_all("hparams", sources, None, check_crc, growing)


@renamed_arguments(logdir_or_file="sources", poll="poll_interval")
def follow(
    sources: Sources,
    kind: str = "scalars",
    tags: str | Iterable[str] | None = None,
    *,
    idle_timeout: float | None = None,
    poll_interval: float = 1.0,
    check_crc: bool = True,
    color_space: str = "RGB",
) -> LogFollower:
    """Follow a log directory that is being written: DataFrames of the rows appended since the last one.

    The first DataFrame holds what the event files hold already; each later one the rows written since.
    Every ``poll_interval`` seconds the log directory is searched again, so runs (subdirectories) and event files
    created later are followed too, from their first record. A record still being written is read once its
    last byte is there, never cut. The DataFrames have the columns of the function named by ``kind``
    (:func:`scalars`, ...), and all of them together hold the rows that function returns once the writers
    are done (within a DataFrame: runs by name, a run's files by name, as written; across them, in the
    order they were appended). ``run`` and ``tag`` are categorical in each DataFrame, with the labels of
    its rows: ``pandas.concat`` joins them as ``object`` columns.

    Parameters
    ----------
    sources
        A log directory (it may be empty, or not created yet: it is waited for, as for new event files),
        one event file, a glob pattern, or a list of them, with the runs named as for :func:`scalars`. A pattern is matched again at each poll: it may
        match nothing at first, and runs that come to match it later are followed (``"logs/*"``: every
        run created in ``logs``).
    kind
        ``"scalars"`` (the default), ``"tensors"``, ``"histograms"``, ``"images"``, ``"text"`` or
        ``"hparams"``.
    tags
        Only these tags, as for :func:`scalars` (``None`` for ``"hparams"``).
    idle_timeout
        End after this many seconds in which no event file grew and none was created (``0``: once what is
        written now was read). ``None``: never; end it with ``close()``.
    poll_interval
        Seconds between two searches of the log directory and checks of its files.
    check_crc
        Verify every record's checksums (the default).
    color_space
        For ``"images"``, as for :func:`images`.

    Returns
    -------
    LogFollower
        An iterator of the DataFrames (only ones with rows), with ``poll()`` (one check, without waiting)
        and ``close()``, usable as a context manager.

    Raises
    ------
    FileNotFoundError
        While iterating: a path (not a pattern) still does not exist after ``idle_timeout`` seconds.
    TypeError
        ``sources`` is not a path, a pattern, or a list of them.
    ValueError
        An unknown ``kind``, tags for ``"hparams"``, or a ``poll_interval`` or ``idle_timeout`` out of range.
    recordkit.errors.CorruptRecordError
        While iterating: damage, as :func:`scalars` raises it (the rows before it come first);
        :class:`~recordkit.errors.FileChangedError` when an event file is replaced, removed or shortened.

    Examples
    --------
    In a process beside a training job::

        for batch in rk.tensorboard.follow("logs", idle_timeout=600):
            print(batch[batch.tag == "loss"].tail(1))
    """
    if poll_interval <= 0:
        raise ValueError(
            f"poll_interval must be a positive number of seconds, not {poll_interval!r}"
        )
    if idle_timeout is not None and idle_timeout < 0:
        raise ValueError(f"idle_timeout must be >= 0 or None, not {idle_timeout!r}")
    paths = _read.source_paths(sources)
    return LogFollower(
        paths[0] if isinstance(sources, (str, os.PathLike)) else paths,
        kind,
        _frames.builder(kind, tags, color_space),
        idle_timeout=idle_timeout,
        poll_interval=poll_interval,
        check_crc=check_crc,
    )
