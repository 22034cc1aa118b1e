"""Event files to pandas DataFrames: finding the runs, and each kind of summary as columns."""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import PurePath
from typing import Any, Union

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError as ProtobufDecodeError

from recordkit._proto.tensorboard import hparams_pb2
from recordkit.errors import DecodeError, TruncatedRecordError
from recordkit.formats.bulk import tfrecord_frames
from recordkit.io.atomic import is_temporary
from recordkit.io.sources import is_glob_pattern
from recordkit.tensorboard._events import Values, index_events
from recordkit.tensorboard._tensors import to_array

__all__ = [
    "event_files",
    "histogram_rows",
    "hparam_rows",
    "image_rows",
    "is_event_file",
    "legacy_edges",
    "load_runs",
    "merge_plugins",
    "read_values",
    "record_values",
    "Sources",
    "scalar_columns",
    "source_paths",
    "tensor_rows",
    "text_rows",
]

#: The run name of event files directly in the log directory, as TensorBoard names it.
ROOT_RUN = "."
_SIMPLE, _HISTO, _IMAGE, _TENSOR = 2, 5, 4, 8
_FRAMING = 16  # bytes a TFRecord record adds to its payload: length, its checksum, payload checksum
# The tensor layouts of nearly every scalar written as a tensor: the first 6 bytes of the TensorProto
# (dtype, an empty shape, then the field holding the one value) -> (payload size, value dtype).
_SCALAR_TENSORS = {
    bytes.fromhex("080112002204"): (10, "<f4"),  # DT_FLOAT, tensor_content
    bytes.fromhex("080112002a04"): (10, "<f4"),  # DT_FLOAT, float_val
    bytes.fromhex("080212002208"): (14, "<f8"),  # DT_DOUBLE, tensor_content
    bytes.fromhex("080212003208"): (14, "<f8"),  # DT_DOUBLE, double_val
}


def is_event_file(name: str) -> bool:
    """Whether a file of this name is read as an event file: ``"tfevents"`` in its base name, as TensorBoard
    says, unless it is a recordkit writer's temporary file (its events come again under the final name)."""
    return "tfevents" in os.path.basename(name) and not is_temporary(name)


#: What the readers and :func:`recordkit.tensorboard.follow` take: a log directory, an event file or a glob
#: pattern, or a list (any iterable) of them.
Sources = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]
_ACCEPTED = (
    "a log directory, an event file or a glob pattern (str or os.PathLike), or a list of them"
)


def _one_path(item: object) -> str:
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        if isinstance(path, str):
            return path
    raise TypeError(f"logdir_or_file takes {_ACCEPTED}, not {type(item).__name__} {item!r:.80}")


def source_paths(sources: object) -> list[str]:
    """The paths and patterns of ``sources`` (one, or a list of them), checked to be ``str`` paths.

    Raises
    ------
    TypeError
        ``sources`` or one of its items is not a ``str`` or ``os.PathLike`` path (bytes paths included).
    ValueError
        An empty list.
    """
    if isinstance(sources, (str, os.PathLike)):
        return [_one_path(sources)]
    if isinstance(sources, (bytes, bytearray, Mapping)) or not isinstance(sources, Iterable):
        raise TypeError(
            f"logdir_or_file takes {_ACCEPTED}, not {type(sources).__name__} {sources!r:.80}"
        )
    paths = [_one_path(item) for item in sources]
    if not paths:
        raise ValueError(f"no log directories given: pass {_ACCEPTED}")
    return paths


def missing_paths(sources: Sources) -> list[str]:
    """The paths of ``sources`` (not its patterns) that do not exist."""
    return [
        item
        for item in source_paths(sources)
        if not is_glob_pattern(item) and not os.path.exists(item)
    ]


def _pattern_parent(pattern: str) -> str:
    """The directory a glob pattern matches under: its components before the first with a wildcard."""
    parts = PurePath(pattern).parts
    fixed: list[str] = []
    for part in parts:
        # The test glob.glob itself applies to each component: a wildcard, whether or not a file has the name.
        if glob.has_magic(part):
            break
        fixed.append(part)
    return os.path.join(*fixed) if fixed else os.curdir


def event_files(sources: Sources, *, missing_ok: bool = False) -> list[tuple[str, str]]:
    """``(run, path)`` of every event file that ``sources`` names.

    ``sources`` is a log directory (every event file below it), an event file, a glob pattern (the
    directories and event files it matches), or a list of them. A run is a directory holding event files,
    named by its path relative to the *base* with ``/`` separators (``"."`` for the base itself), as
    TensorBoard names runs relative to its ``--logdir``. The base is the common parent of what each item
    stands for: a directory itself, an event file's directory, a pattern's directory before its first
    wildcard (``logs`` for ``logs/*``, however many runs it matches). So one directory is a log directory
    (runs relative to it) and one file is run ``"."``; ``["logs/a", "logs/b"]`` and ``"logs/*"`` give runs
    ``"a"``, ``"b"`` (and ``"a/..."`` below them). A file named twice is listed once. Runs come sorted by
    name, and a run's files by file name (which starts with the time they were created).

    Raises
    ------
    FileNotFoundError
        A path does not exist, or a pattern matches no directory or event file (unless ``missing_ok``:
        then a path may be missing, standing for a log directory not created yet, and a pattern may match
        nothing).
    TypeError, ValueError
        As :func:`source_paths`.
    """
    bases: list[str] = []
    tops: list[str] = []  # the directories and event files to read, in the order named
    for item in source_paths(sources):
        if is_glob_pattern(item):
            bases.append(_pattern_parent(item))
            matches = [
                path
                for path in sorted(glob.glob(item))
                if os.path.isdir(path) or (os.path.isfile(path) and is_event_file(path))
            ]
            if not matches and not missing_ok:
                raise FileNotFoundError(
                    errno.ENOENT, "no directory or event file matches this pattern", item
                )
            tops.extend(matches)
        elif os.path.isfile(item):
            bases.append(os.path.dirname(item) or os.curdir)
            tops.append(item)
        elif os.path.isdir(item):
            bases.append(item)
            tops.append(item)
        elif missing_ok:
            bases.append(item)
        else:
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", item)
    base = os.path.commonpath([os.path.abspath(path) for path in bases])
    found: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(directory: str, names: Iterable[str]) -> None:
        run = os.path.relpath(os.path.abspath(directory), base).replace(os.sep, "/")
        for name in names:
            path = os.path.join(directory, name)
            if os.path.abspath(path) not in seen:
                seen.add(os.path.abspath(path))
                found.append((run, path))

    for top in tops:
        if os.path.isfile(top):
            directory, name = os.path.split(top)
            add(directory or os.curdir, [name])
            continue
        for directory, subdirs, files in os.walk(top):
            subdirs.sort()
            add(directory, sorted(name for name in files if is_event_file(name)))
    found.sort(key=lambda item: (item[0], os.path.basename(item[1])))
    return found


def read_values(path: str, check_crc: bool, growing: bool = False) -> Values:
    """Read one event file and index its summary values; ``growing``: leave a partial last record out."""
    with open(path, "rb") as file:
        data = file.read()
    try:
        frames = tfrecord_frames(data, path=path, check_crc=check_crc, final=not growing)
    except TruncatedRecordError as exc:
        raise TruncatedRecordError(
            f"{exc.reason} (a file still being written ends that way: pass growing=True to read up to "
            "its last complete record, or follow the log directory with recordkit.tensorboard.follow)",
            path=exc.path,
            index=exc.index,
            offset=exc.offset,
        ) from None
    return index_events(data, frames.starts, frames.lengths, path)


def record_values(records: list[bytes], path: str, first: int, offset: int) -> Values:
    """Index the summary values of the TFRecord payloads ``records`` of ``path``: record ``first`` and
    the ones after it, the first starting at byte ``offset`` of the file."""
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    starts = np.zeros(len(records), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    offsets = offset + starts + _FRAMING * np.arange(len(records), dtype=np.int64)
    buffer = b"".join((*records, bytes(8)))  # 8 bytes after the last payload, as index_events needs
    return index_events(buffer, starts, lengths, path, first=first, offsets=offsets)


def merge_plugins(plugins: dict[str, str], values: Values) -> None:
    """Add the plugins ``values`` names to a run's ``plugins``: the first metadata of a tag wins."""
    for tag, name in values.plugins.items():
        plugins.setdefault(tag, name)


def load_runs(
    sources: Sources, check_crc: bool, growing: bool = False
) -> Iterator[tuple[str, Values, dict[str, str]]]:
    """Each event file's run, values, and its run's plugins (the first metadata of the run wins), file by
    file, runs by name and a run's files by name."""
    runs: dict[str, list[str]] = {}
    for run, path in event_files(sources):
        runs.setdefault(run, []).append(path)
    for run, paths in runs.items():
        files = [read_values(path, check_crc, growing) for path in paths]
        plugins: dict[str, str] = {}
        for values in files:
            merge_plugins(plugins, values)
        for values in files:
            yield run, values, plugins


def _rows(
    values: Values,
    plugins: dict[str, str],
    tags: Collection[str] | None,
    kinds: dict[int, str | None],
) -> npt.NDArray[np.int64]:
    """The rows of the wanted tags whose oneof member is one of ``kinds`` (member -> plugin it must have,
    ``None`` for any), tags filtered first."""
    wanted = np.ones(len(values.tags), bool)
    for i, tag in enumerate(values.tags):
        wanted[i] = tags is None or tag in tags
    ok_kind = np.zeros(9, bool)
    ok_tag = np.zeros((9, len(values.tags)), bool)
    for kind, plugin in kinds.items():
        ok_kind[kind] = True
        for i, tag in enumerate(values.tags):
            ok_tag[kind, i] = wanted[i] and (plugin is None or plugins.get(tag) == plugin)
    if not len(values.tags):
        return np.zeros(0, np.int64)
    member = np.minimum(values.kind, 8)
    return np.flatnonzero(ok_kind[member] & ok_tag[member, values.tag])


def scalar_columns(
    values: Values, plugins: dict[str, str], tags: Collection[str] | None
) -> dict[str, Any]:
    """tag ids, step, wall_time, value of the scalars of one file: ``simple_value`` and the tensors of the
    ``scalars`` plugin."""
    rows = _rows(values, plugins, tags, {_SIMPLE: None, _TENSOR: "scalars"})
    out = np.empty(len(rows), np.float64)
    done = np.zeros(len(rows), bool)
    buffer = values.buffer
    kind, kstart, kend = values.kind[rows], values.kstart[rows], values.kend[rows]
    floats = np.ndarray((max(len(buffer) - 3, 0),), "<f4", buffer, 0, (1,))
    simple = np.flatnonzero((kind == _SIMPLE) & (kstart >= 0))
    out[simple] = floats[kstart[simple]]
    done[simple] = True
    tensor = np.flatnonzero((kind == _TENSOR) & (kstart >= 0))
    if len(tensor):
        heads = np.ndarray((max(len(buffer) - 7, 0),), "<u8", buffer, 0, (1,))[kstart[tensor]]
        heads &= np.uint64(0xFFFFFFFFFFFF)
        sizes = kend[tensor] - kstart[tensor]
        for prefix, (size, dtype) in _SCALAR_TENSORS.items():
            key = np.frombuffer(prefix + b"\0\0", "<u8")[0]
            match = tensor[(heads == key) & (sizes == size)]
            view = np.ndarray((max(len(buffer) - 7, 0),), dtype, buffer, 0, (1,))
            out[match] = view[kstart[match] + 6]
            done[match] = True
    for i in np.flatnonzero(~done).tolist():
        row = int(rows[i])
        value = values.value(row)
        if value.WhichOneof("value") == "simple_value":
            out[i] = value.simple_value
            continue
        array = _tensor(values, row, value)
        if array.size != 1 or array.dtype.kind not in "biuf":
            raise values.error(
                row, f"tag {values.tags[int(values.tag[row])]!r}: a scalar summary holds {array!r}"
            )
        out[i] = float(array.reshape(-1)[0])
    return {
        "tag": values.tag[rows],
        "step": values.step[rows],
        "wall_time": values.wall_time[rows],
        "value": out,
    }


def _tensor(values: Values, row: int, value: Any) -> npt.NDArray[Any]:
    try:
        return to_array(value.tensor)
    except DecodeError as exc:
        raise values.error(row, f"tag {value.tag!r}: {exc}") from None


def _base(values: Values, row: int) -> dict[str, Any]:
    return {
        "tag": values.tags[int(values.tag[row])],
        "step": int(values.step[row]),
        "wall_time": float(values.wall_time[row]),
    }


def tensor_rows(
    values: Values, plugins: dict[str, str], tags: Collection[str] | None
) -> Iterable[dict[str, Any]]:
    """One row per tensor summary value: ``value`` (an array; its item for a 0-d array) and ``plugin``."""
    for row in _rows(values, plugins, tags, {_TENSOR: None}).tolist():
        value = values.value(row)
        array = _tensor(values, row, value)
        tag = values.tags[int(values.tag[row])]
        yield {
            **_base(values, row),
            "value": array.item() if array.ndim == 0 else array,
            "plugin": plugins.get(tag, ""),
        }


def histogram_rows(
    values: Values, plugins: dict[str, str], tags: Collection[str] | None
) -> Iterable[dict[str, Any]]:
    """One row per histogram: ``edges`` (k + 1 bucket edges) and ``counts`` (k), with the statistics."""
    for row in _rows(values, plugins, tags, {_HISTO: None, _TENSOR: "histograms"}).tolist():
        value = values.value(row)
        if value.WhichOneof("value") == "histo":
            histo = value.histo
            limits = np.array(histo.bucket_limit, np.float64)
            counts = np.array(histo.bucket, np.float64)
            if len(limits) != len(counts):
                raise values.error(
                    row, f"tag {value.tag!r}: {len(limits)} limits, {len(counts)} buckets"
                )
            edges = legacy_edges(histo.min, histo.max, limits)
            stats = (histo.min, histo.max, histo.num, histo.sum, histo.sum_squares)
        else:
            array = _tensor(values, row, value).astype(np.float64)
            if array.ndim != 2 or array.shape[1] != 3:
                raise values.error(row, f"tag {value.tag!r}: a histogram of shape {array.shape}")
            counts = array[:, 2].copy()
            edges = np.concatenate((array[:1, 0], array[:, 1])) if len(array) else np.zeros(0)
            low = float(edges[0]) if len(edges) else np.nan
            high = float(edges[-1]) if len(edges) else np.nan
            stats = (low, high, float(counts.sum()), np.nan, np.nan)
        yield {
            **_base(values, row),
            "edges": edges,
            "counts": counts,
            **dict(zip(("min", "max", "num", "sum", "sum_squares"), stats, strict=True)),
        }


def legacy_edges(
    low: float, high: float, limits: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """The k + 1 edges of a legacy ``HistogramProto``'s k buckets, non-decreasing like ``numpy.histogram``'s.

    Bucket i holds the values up to ``limits[i]`` from ``limits[i - 1]``; the first has no left limit and
    the last's limit is the writer's (TF1: the largest double). Every value lies in ``[low, high]`` (the
    data's min and max), so the edges are ``[low, limits[0], ..., limits[k - 2], high]`` clipped to
    ``[low, high]``: TensorBoard's own edges (``data_compat``: min, the inner limits, max) for the buckets
    from the first non-empty one to the last, and zero-width buckets at ``low`` or ``high`` for the empty
    ones writers add outside them (PyTorch and tensorboardX one empty bucket before the data, TF1 one
    before and one after). Without the clip the first left edge (``low``) exceeds the next one. A
    histogram of no values (``low > high`` or NaN) has the edges ``[limits[0], *limits]``.
    """
    if not len(limits):
        return limits
    # No values (TF1's empty histogram: min the largest double, max the smallest), or NaN.
    if not low <= high:
        return np.concatenate((limits[:1], limits))
    edges = np.concatenate(([low], limits[:-1], [high]))
    return np.clip(edges, low, high, out=edges)


def image_rows(
    values: Values,
    plugins: dict[str, str],
    tags: Collection[str] | None,
    decode: Callable[[list[bytes], str, list[int]], list[Any]],
) -> Iterable[dict[str, Any]]:
    """One row per image: ``index`` (its place in the summary's batch), ``image`` (decoded by ``decode``),
    ``width`` and ``height`` as written."""
    for row in _rows(values, plugins, tags, {_IMAGE: None, _TENSOR: "images"}).tolist():
        value = values.value(row)
        if value.WhichOneof("value") == "image":
            image = value.image
            encoded = [image.encoded_image_string]
            width, height = image.width, image.height
        else:
            array = _tensor(values, row, value)
            if array.ndim != 1 or array.dtype != object or len(array) < 2:
                raise values.error(
                    row, f"tag {value.tag!r}: an image summary of shape {array.shape}"
                )
            try:
                width, height = int(array[0]), int(array[1])
            except ValueError:
                raise values.error(row, f"tag {value.tag!r}: image size {array[:2]!r}") from None
            encoded = list(array[2:])
        record = values.first + int(values.record[row])
        decoded = decode(encoded, value.tag, [record] * len(encoded))
        for index, pixels in enumerate(decoded):
            yield {
                **_base(values, row),
                "index": index,
                "image": pixels,
                "width": width,
                "height": height,
            }


def text_rows(
    values: Values, plugins: dict[str, str], tags: Collection[str] | None
) -> Iterable[dict[str, Any]]:
    """One row per text summary: ``value``, a ``str`` (an array of them for a text tensor of several)."""
    for row in _rows(values, plugins, tags, {_TENSOR: "text"}).tolist():
        value = values.value(row)
        array = _tensor(values, row, value)
        try:
            text = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array)
        except (UnicodeDecodeError, AttributeError):
            raise values.error(row, f"tag {value.tag!r}: text that is not UTF-8 strings") from None
        yield {**_base(values, row), "value": text.reshape(-1)[0] if text.size == 1 else text}


def hparam_rows(values: Values, plugins: dict[str, str]) -> Iterable[dict[str, Any]]:
    """One row per hyperparameter of each session start the hparams plugin wrote: ``name`` and ``value``."""
    for row in _rows(values, plugins, None, dict.fromkeys(range(9), "hparams")).tolist():
        value = values.value(row)
        if not value.HasField("metadata"):
            continue
        try:
            data = hparams_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
        except ProtobufDecodeError as exc:
            raise values.error(row, f"malformed hparams plugin data: {exc}") from None
        if data.WhichOneof("data") != "session_start_info":
            continue
        for name, item in sorted(data.session_start_info.hparams.items()):
            kind = item.WhichOneof("kind")
            held = (
                getattr(item, kind)
                if kind in ("number_value", "string_value", "bool_value")
                else None
            )
            yield {"name": name, "value": held, "wall_time": float(values.wall_time[row])}
