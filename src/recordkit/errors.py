"""The exception and warning classes recordkit raises.

Every error recordkit raises on bad input derives from :class:`RecordKitError`, and each also derives from
the standard-library type a caller would naturally catch (``ValueError``, ``OSError``, ``EOFError``,
``io.UnsupportedOperation``), so existing ``except`` clauses keep working.

Errors about damaged files carry where the damage is: :attr:`CorruptRecordError.path`,
:attr:`~CorruptRecordError.index` (the record number, counting from 0) and
:attr:`~CorruptRecordError.offset` (the byte offset in the file). Offsets follow TensorFlow's convention for
TFRecord: a bad length checksum is reported at the start of the record, a bad data checksum at the start of
the record plus 12.

Examples
--------
>>> from recordkit.errors import ChecksumError, RecordKitError
>>> err = ChecksumError("data checksum mismatch", path="a.tfrecord", index=3, offset=1036,
...                     expected=0x1234, actual=0x4321)
>>> isinstance(err, RecordKitError) and isinstance(err, OSError)
True
>>> str(err)
'a.tfrecord: record 3 at byte 1036: data checksum mismatch (expected 0x00001234, found 0x00004321)'
"""

from __future__ import annotations

import io
import json
import os

__all__ = [
    "ChecksumError",
    "CorruptRecordError",
    "DataLossWarning",
    "DecodeError",
    "FileChangedError",
    "HeaderError",
    "LegacyFormatWarning",
    "ManifestError",
    "NoLengthError",
    "OptionsError",
    "OutputExistsError",
    "RecordKitError",
    "RecordKitWarning",
    "RemoteReadError",
    "SlowCRCWarning",
    "StaleIndexError",
    "StaleIndexWarning",
    "StateError",
    "TruncatedRecordError",
    "UnknownFormatError",
    "UnsafePathError",
    "UnsupportedOperationError",
    "attach_attributes",
]


class RecordKitError(Exception):
    """Base class of every error recordkit raises on purpose."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        if args and isinstance(args[0], str):
            _restore_attributes(self, args[0])


# PyTorch re-raises an exception from a DataLoader worker as ``type(exc)(text)``, where the text is the
# worker's formatted traceback: only the message crosses, not the attributes. In a worker, recordkit appends
# the attributes to the message as one JSON line (:func:`attach_attributes`), and an error built from such a text
# takes them back (``_restore_attributes``).
_ATTRIBUTES = "recordkit error attributes: "


def attach_attributes(err: RecordKitError) -> None:
    """Append ``err``'s attributes (path, index, offset...) to its message as a JSON line, once.

    For code that hands errors across a boundary that keeps only the text (PyTorch's DataLoader workers).

    An error of the same class built from a text holding that line (such as a traceback that includes it)
    gets the attributes back.
    """
    if not err.args or not isinstance(err.args[0], str) or _ATTRIBUTES in err.args[0]:
        return
    values = {
        name: value
        for name, value in vars(err).items()
        if not name.startswith("_") and isinstance(value, (str, int, float))
    }
    if values:
        line = _ATTRIBUTES + json.dumps(values, sort_keys=True)
        err.args = (f"{err.args[0]}\n{line}", *err.args[1:])


def _restore_attributes(err: RecordKitError, text: str) -> None:
    """Set the attributes found in the last attribute line of ``text``: those that are ``None`` on ``err``,
    and ``reason`` (otherwise the whole text)."""
    start = text.rfind(_ATTRIBUTES)
    if start < 0:
        return
    line = text[start + len(_ATTRIBUTES) :].split("\n", 1)[0]
    try:
        values = json.loads(line)
    except ValueError:
        return
    if not isinstance(values, dict):
        return
    for name, value in values.items():
        if not name.isidentifier() or name.startswith("_"):
            continue
        if name == "reason" or getattr(err, name, None) is None:
            setattr(err, name, value)


class UnknownFormatError(RecordKitError, ValueError):
    """The record format could not be determined, or no format of that name is registered.

    Parameters
    ----------
    message
        What was asked for and what is available.
    name
        The format name asked for, or ``None`` when the format was being detected.
    """

    def __init__(self, message: str, *, name: str | None = None) -> None:
        self.name = name
        super().__init__(message)


def _where(path: str | None, index: int | None, offset: int | None) -> str:
    """Format a location as ``path: record 3 at byte 1036``, leaving out what is unknown."""
    position = []
    if index is not None:
        position.append(f"record {index}")
    if offset is not None:
        position.append(f"at byte {offset}" if index is not None else f"byte {offset}")
    parts = [path] if path is not None else []
    if position:
        parts.append(" ".join(position))
    return ": ".join(parts)


class CorruptRecordError(RecordKitError, OSError):
    """A record file is damaged.

    Parameters
    ----------
    message
        What is wrong, without the location (it is added from the other arguments).
    path
        The file, when known.
    index
        The number of the record concerned, counting from 0, when known.
    offset
        The byte offset in the (uncompressed) file where the damage was found, when known.

    Attributes
    ----------
    path, index, offset, reason
        As given; ``reason`` is the bare message.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        index: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = message
        self.path = None if path is None else os.fspath(path)
        self.index = index
        self.offset = offset
        where = _where(self.path, index, offset)
        super().__init__(f"{where}: {message}" if where else message)

    def __str__(self) -> str:
        return str(self.args[0])

    def within(self, what: str) -> None:
        """Say what the damaged bytes belong to: the reason becomes ``what: reason`` (in place)."""
        self.reason = f"{what}: {self.reason}"
        where = _where(self.path, self.index, self.offset)
        self.args = (f"{where}: {self.reason}" if where else self.reason, *self.args[1:])

    def relocate(self, records: int, offset: int) -> None:
        """Count the location from an earlier point of the file: ``records`` records and ``offset`` bytes
        before where it was found (in place)."""
        self.index = None if self.index is None else self.index + records
        self.offset = None if self.offset is None else self.offset + offset
        where = _where(self.path, self.index, self.offset)
        self.args = (f"{where}: {self.reason}" if where else self.reason, *self.args[1:])

    def __reduce__(self) -> tuple[object, ...]:
        # Keep keyword-only attributes across pickling (DataLoader workers send errors to the parent).
        return (_rebuild, (type(self), self.reason, dict(self.__dict__)))


def _rebuild(
    cls: type[CorruptRecordError], reason: str, state: dict[str, object]
) -> CorruptRecordError:
    err = cls.__new__(cls)
    CorruptRecordError.__init__(
        err,
        reason,
        path=state.get("path"),  # type: ignore[arg-type]
        index=state.get("index"),  # type: ignore[arg-type]
        offset=state.get("offset"),  # type: ignore[arg-type]
    )
    err.__dict__.update(state)
    return err


class ChecksumError(CorruptRecordError):
    """A stored checksum does not match the bytes it protects.

    Attributes
    ----------
    expected
        The checksum stored in the file.
    actual
        The checksum computed from the bytes read.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        index: int | None = None,
        offset: int | None = None,
        expected: int | None = None,
        actual: int | None = None,
    ) -> None:
        self.expected = expected
        self.actual = actual
        if expected is not None and actual is not None:
            message = f"{message} (expected {expected:#010x}, found {actual:#010x})"
        super().__init__(message, path=path, index=index, offset=offset)


class TruncatedRecordError(CorruptRecordError, EOFError):
    """The file ends inside a record (its header or its payload)."""


class FileChangedError(CorruptRecordError):
    """A file changed while it was being read, in a way its reader cannot follow.

    Raised by :class:`recordkit.io.Follower` when the path now names another file (replaced or
    rotated: a new inode or device), no file at all (removed), or a file shorter than what was already
    read (truncated or rewritten): ``offset`` is how far the file had been read. Raised when reading a
    URL when the server's file is no longer the one opened (another ETag, or fewer bytes than asked):
    ``offset`` is the start of the byte range asked for.
    """


class RemoteReadError(RecordKitError, OSError):
    """Bytes of a file at a URL could not be fetched: the request failed each time it was sent.

    The last failure is the ``__cause__``.

    Attributes
    ----------
    path
        The file's URL.
    start, end
        The byte range asked for, ``[start, end)``; an empty range (``0, 0``) when what failed was asking
        for the file's size.
    """

    def __init__(self, message: str, *, path: str, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end
        what = f"bytes {start}-{end - 1}" if end > start else "its size"
        super().__init__(f"{path}: {what}: {message}")


class HeaderError(CorruptRecordError):
    """A file header or index is inconsistent: impossible counts, offsets out of order or out of the file."""


class StaleIndexError(CorruptRecordError):
    """A sidecar index file does not describe the record file beside it."""


class ManifestError(CorruptRecordError):
    """A dataset manifest is malformed, or disagrees with the shards it names.

    Parameters
    ----------
    message
        What is wrong.
    path
        The manifest, or the shard concerned.
    shard
        When one shard is at fault: its position, counting from 0, among the shards being read (the
        manifest's, or its split's).

    Attributes
    ----------
    shard
        As given.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        shard: int | None = None,
    ) -> None:
        self.shard = shard
        super().__init__(message, path=path)


class DecodeError(RecordKitError, ValueError):
    """A payload could not be decoded: malformed protobuf, missing feature, wrong type or shape.

    Parameters
    ----------
    message
        The whole message (it names the record and feature itself, when known).
    index, feature, path, offset
        See the attributes.

    Attributes
    ----------
    index
        The record number within the batch parsed, or within the file when ``path`` is set; ``None`` when
        unknown.
    feature
        The feature name concerned, when known.
    path
        The file the record was read from, when known: set by the pipelines that read it
        (:class:`recordkit.data.Dataset`), see :meth:`locate`.
    offset
        The record's byte offset in the file, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        feature: str | None = None,
        path: str | os.PathLike[str] | None = None,
        offset: int | None = None,
    ) -> None:
        self.index = index
        self.feature = feature
        self.path = None if path is None else os.fspath(path)
        self.offset = offset
        super().__init__(message)

    def locate(self, path: str | os.PathLike[str], index: int) -> None:
        """Name the file the record came from and its index there, in place of its place in a batch.

        The message becomes ``path: record index: ...``: a leading ``record N:`` (the record's place in
        what was parsed) is replaced, the rest (feature, reason) kept.
        """
        message = str(self.args[0]) if self.args else ""
        prefix = f"record {self.index}: "
        if self.index is not None and message.startswith(prefix):
            message = message[len(prefix) :]
        self.path = os.fspath(path)
        self.index = index
        self.args = (f"{_where(self.path, index, self.offset)}: {message}", *self.args[1:])

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_decode,
            (type(self), self.args[0], self.index, self.feature, self.path, self.offset),
        )


def _rebuild_decode(
    cls: type[DecodeError],
    message: str,
    index: int | None,
    feature: str | None,
    path: str | None = None,
    offset: int | None = None,
) -> DecodeError:
    return cls(message, index=index, feature=feature, path=path, offset=offset)


class UnsafePathError(RecordKitError, PermissionError):
    """A file found in a dataset directory is a link to somewhere outside that directory."""


class OutputExistsError(RecordKitError, FileExistsError):
    """The output is there already (a file, or a directory that is not empty), and overwriting was not asked.

    Attributes
    ----------
    path
        The output.
    """

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        super().__init__(message if path is None else f"{self.path}: {message}")


class UnsupportedOperationError(RecordKitError, io.UnsupportedOperation):
    """The operation is not possible on this reader or writer, e.g. random access into a GZIP file."""


class NoLengthError(UnsupportedOperationError, TypeError):
    """``len()`` of a reader that can only be read in order (a compressed file, a non-seekable stream).

    It is also a :class:`TypeError`, what ``len()`` raises for an object without a length, so ``list()``
    and other callers that ask for a length only as a hint still work on such a reader.
    """


class OptionsError(RecordKitError, ValueError):
    """A format's writer options that do not parse: an unknown option or a value out of range (ArrayRecord's
    ``options="group_size:0"``)."""


class StateError(RecordKitError, ValueError):
    """A saved position (``state_dict()``) that this pipeline cannot continue from.

    It comes from another pipeline (other seed, files, batch size...), another kind of loader or an
    incompatible recordkit, or a list of positions saved by the ranks of a run is incomplete or inconsistent
    (a rank missing or given twice, ranks in different epochs).
    """


class RecordKitWarning(UserWarning):
    """Base class of recordkit's warnings."""


class DataLossWarning(RecordKitWarning):
    """Damaged parts of a file were skipped; the message names the file and says what was skipped.

    Issued by :mod:`recordkit.recover` and by the pipelines that read with ``on_error="skip"``
    (:class:`recordkit.data.Dataset` and the loaders, Ray and Dask readers built on it): once per damaged
    file, naming the damaged records (number and byte offset) or byte ranges with the reasons.
    """


class LegacyFormatWarning(RecordKitWarning):
    """A file uses an old variant of its format (e.g. an FFRecord file without a header checksum)."""


class StaleIndexWarning(RecordKitWarning):
    """A sidecar index does not describe the file beside it; it was ignored and the file's headers scanned.

    An index is a cache of the record offsets: a stale or malformed one (another program rewrote the file)
    costs a header scan, never the file's records. The message says what is wrong with it; rebuild it with
    ``recordkit index FILE`` (:func:`recordkit.io.write_index`) or delete it.
    """


class SlowCRCWarning(RecordKitWarning, RuntimeWarning):
    """The CRC32C implementation in use is pure Python, and reading TFRecord files will be slow."""
