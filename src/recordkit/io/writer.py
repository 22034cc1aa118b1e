"""Writing records: :class:`RecordWriter`, and the sidecar offset index of a file (:func:`write_index`)."""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import warnings
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

from recordkit.errors import OptionsError, StaleIndexError
from recordkit.formats import get_format
from recordkit.formats.base import FrameWriter, as_bytes
from recordkit.io.atomic import AtomicFile, UploadOnCommit
from recordkit.io.index import index_paths, load_index, save_index
from recordkit.io.manifest import MANIFEST_NAME
from recordkit.io.reader import _RecordFile
from recordkit.io.resolve import resolve_sources
from recordkit.io.sources import check_compression, is_url, require_fsspec, resolve_format
from recordkit.support.moved import renamed_arguments

if TYPE_CHECKING:
    from recordkit.formats.sequential import SequentialFrameReader

PathLike = str | os.PathLike[str]


def _discard_writer(frames: FrameWriter, target: AtomicFile | UploadOnCommit | None) -> None:
    """Drop what a writer wrote: its temporary file goes even if the frame writer's abort fails."""
    try:
        frames.abort()
    finally:
        if target is not None:
            target.discard()


def _drop_writer(
    frames: FrameWriter, target: AtomicFile | UploadOnCommit | None, path: str | None
) -> None:
    """Discard a writer that was garbage-collected without ``close()``, and say so, as an open file does."""
    try:
        _discard_writer(frames, target)
    finally:
        lost = "nothing was written" if target is not None else "its last records were not written"
        warnings.warn(
            f"a writer of {path or 'a file object'} was dropped without close(): {lost} (close it, "
            "or write in a with block)",
            ResourceWarning,
            stacklevel=2,
        )


class RecordWriter(_RecordFile):
    """Writes records to one file. Made by :func:`open` with mode ``"w"``.

    Writing to a path is atomic: records go to a hidden temporary file beside the target, which is renamed
    into place by :meth:`close`. If the ``with`` block raises, :meth:`abort` is called, or the writer is
    garbage-collected without being closed, the target is left untouched and the temporary file removed:
    ``recordkit.open(path, "w").write(record)`` alone writes nothing, and says so with a
    :class:`ResourceWarning` naming the path (shown under ``python -X dev`` or ``-W default``, as for an
    unclosed file). A file object passed in is written directly and never closed.

    Attributes
    ----------
    count
        The number of records written so far.
    """

    _noun = "RecordWriter"

    def __init__(
        self,
        frames: FrameWriter,
        *,
        target: AtomicFile | UploadOnCommit | None,
        path: str | None,
        format: str,
        compression: str,
    ) -> None:
        super().__init__(path=path, format=format, compression=compression)
        self._frames = frames
        self._target = target
        # recordkit.datasets looks at the finished temporary file (size, checksum, offsets) before commit.
        self._inspect: Callable[[str], None] | None = None
        # A writer dropped without close() discards what it wrote (and the frame writer's spill file), and
        # warns with a ResourceWarning, as an unclosed file does.
        self._dropped = weakref.finalize(self, _drop_writer, frames, target, path)

    @property
    def count(self) -> int:
        """The number of records written so far."""
        return self._frames.count

    def write(self, data: Any) -> None:
        """Append one record: ``bytes``, any bytes-like object, or a protobuf message."""
        self._check_open()
        self._frames.write(as_bytes(data))

    def write_many(self, records: Iterable[Any]) -> int:
        """Append every record of ``records``; return how many were written."""
        self._check_open()
        return self._frames.write_many(map(as_bytes, records))

    def flush(self) -> None:
        """Push buffered records to the (temporary) file."""
        self._check_open()
        self._frames.flush()
        self._frames.fileobj.flush()

    def close(self) -> None:
        """Finish the file and move it into place. Idempotent.

        If finishing fails (a disk error, an FFRecord count different from ``n``), the error propagates and
        no file is left at the target.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._frames.close()
            if self._inspect is not None and self._target is not None:
                self._target.file.flush()
                self._inspect(self._target.temporary)
            if isinstance(self._target, AtomicFile):  # its indexes describe the file replaced
                for index_path in index_paths(self._target.target):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(index_path)
            if self._target is not None:
                self._target.commit()
            else:
                self._frames.fileobj.flush()
        except BaseException:
            self._discard()
            raise
        self._dropped.detach()

    def abort(self) -> None:
        """Stop writing and discard everything: the target is left untouched. Idempotent."""
        self._closed = True
        self._discard()

    def _discard(self) -> None:
        """Discard what was written, once, without the warning of a writer dropped unclosed."""
        if self._dropped.detach() is not None:
            _discard_writer(self._frames, self._target)

    def _leave(self, *, failed: bool) -> None:
        if failed:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RecordWriter {self._format} {self._path!r} ({state})>"


@renamed_arguments(dst="dest")
def open_writer(
    dest: Any,
    *,
    format: str | None = None,
    compression: str | None = None,
    level: int | None = None,
    n: int | None = None,
    fsync: bool = False,
    options: str | None = None,
) -> RecordWriter:
    """Open ``dest`` (a path, an fsspec URL or a binary file object) for writing: ``recordkit.open(dest, "w")``.

    The options are :func:`recordkit.open`'s. A path is written to a temporary file renamed into place on
    close (:class:`~recordkit.io.atomic.AtomicFile`); a URL is uploaded on close.

    Raises
    ------
    UnknownFormatError
        The format is neither given nor named by the suffix.
    ValueError
        The compression does not fit the format.
    """
    is_path = isinstance(dest, (str, os.PathLike))
    if not is_path and not callable(getattr(dest, "write", None)):
        raise TypeError(f"expected a path or a binary file object, not {type(dest).__name__}")
    name = dest if is_path else getattr(dest, "name", None)
    path = os.fspath(name) if isinstance(name, (str, os.PathLike)) else None
    fmt, comp = resolve_format(None, path, format, compression)
    comp = comp or ""
    check_compression(fmt, comp)
    target: AtomicFile | UploadOnCommit | None = None
    if is_path:
        assert path is not None
        if is_url(path):
            target = UploadOnCommit(*require_fsspec().core.url_to_fs(path))
        else:
            target = AtomicFile(path, fsync=fsync)
    fileobj = dest if target is None else target.file
    extra = {"options": options} if options is not None else {}
    if extra and "options" not in inspect.signature(fmt.writer).parameters:
        raise OptionsError(f"the {fmt.name} format takes no writer options (options={options!r})")
    try:
        frames = fmt.writer(fileobj, compression=comp, level=level, n=n, **extra)
    except BaseException:
        if target is not None:
            target.discard()
        raise
    return RecordWriter(frames, target=target, path=path, format=fmt.name, compression=comp)


def check_writer(
    format: str,
    *,
    compression: str | None = None,
    level: int | None = None,
    options: str | None = None,
) -> None:
    """Raise what :func:`open_writer` would raise for these settings, writing nothing.

    For writers that open their files later, or elsewhere (:class:`~recordkit.ShardWriter`, the Ray and
    Dask writers), to refuse bad settings before any record is read: a compression the format does not
    take, ``options`` for a format that takes none (:class:`~recordkit.errors.OptionsError`), an
    option string that does not parse.
    """
    open_writer(
        io.BytesIO(), format=format, compression=compression, level=level, options=options
    ).abort()


def write_index(
    path: PathLike,
    index_path: PathLike | None = None,
    *,
    format: str | None = None,
    hidden: bool | None = None,
) -> str:
    """Write the sidecar offset index of a TFRecord or OFRecord file.

    Parameters
    ----------
    path
        The record file (local, uncompressed).
    index_path
        Where to write the index. Default: beside the file, under the name ``hidden`` picks; :func:`open`
        finds it under either name. An index of the file under the other name is then deleted.
    format
        The format, if the suffix does not tell it.
    hidden
        ``True``: ``.<name>.idx``, a name that tools reading every file of a directory (Ray Data, Spark,
        Dask) pass by. ``False``: ``<name>.idx``, the name DALI's and the ``tfrecord`` package's tools use.
        ``None`` (default): hidden when the file's directory holds a dataset manifest, whose directory
        those tools read whole; otherwise ``<name>.idx``, where the user's other tools look for it.

    Returns
    -------
    str
        The index path.
    """
    offsets = scan_offsets(path, format=format)
    if index_path is not None:
        save_index(offsets, index_path)
        return os.fspath(index_path)
    if hidden is None:
        hidden = os.path.isfile(os.path.join(os.path.dirname(os.fspath(path)), MANIFEST_NAME))
    hidden_path, plain_path = index_paths(path)
    written, other = (hidden_path, plain_path) if hidden else (plain_path, hidden_path)
    save_index(offsets, written)
    with contextlib.suppress(FileNotFoundError):
        os.remove(other)
    return written


def scan_offsets(path: PathLike, *, format: str | None = None) -> array[int]:
    """Return the frame-offset table of a local, uncompressed TFRecord or OFRecord file.

    The table has ``len + 1`` entries: record ``i`` spans bytes ``[offsets[i], offsets[i + 1])``. Only the
    record headers are read.

    Raises
    ------
    TypeError
        The format keeps its own index (FFRecord).
    UnsupportedOperationError
        The file is compressed.
    """
    with _indexable_frames(path, format, "building an index") as frames:
        return frames.offsets


@contextlib.contextmanager
def _indexable_frames(
    path: PathLike, format: str | None, what: str
) -> Iterator[SequentialFrameReader]:
    """The frames of a local, uncompressed file of a format with sidecar indexes, opened without one.

    A format that declares ``capabilities.sidecar_index`` finds its offsets by walking the record headers
    (:class:`~recordkit.formats.sequential.SequentialFrameReader`, the format contract).
    """
    with resolve_sources(path, format=format, missing_ok=True).open(index=False) as reader:
        if not get_format(reader.format).capabilities.sidecar_index:
            raise TypeError(f"the {reader.format} format has its own index; it needs no sidecar")
        frames = cast("SequentialFrameReader", reader.frame_reader(0))
        if not frames.random_access:
            raise frames.unsupported(what)
        yield frames


def index_problem(
    path: PathLike, index_path: PathLike, *, format: str | None = None
) -> StaleIndexError | None:
    """Return why a sidecar index does not describe a file, or ``None`` when every entry matches it.

    The index is checked as a reader checks it before use: it must be well formed, cover the file exactly,
    and agree with the record headers, walked from byte 0 (:func:`scan_offsets`). A reader that finds such a
    problem ignores the index (:class:`~recordkit.errors.StaleIndexWarning`) and scans the headers.

    Parameters
    ----------
    path
        The record file (local, uncompressed TFRecord or OFRecord).
    index_path
        The index, e.g. what :func:`find_index` found.
    format
        The format, if the suffix does not tell it.

    Raises
    ------
    CorruptRecordError
        The file itself is damaged (its headers cannot be walked).
    """
    with _indexable_frames(path, format, "checking an index") as frames:
        size = frames.source.size
        assert size is not None  # a random-access source knows its size
        try:
            frames.check_index(load_index(index_path, size=size, path=frames.path))
        except StaleIndexError as exc:
            return exc
    return None
