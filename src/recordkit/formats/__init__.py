"""The registry of record formats (the framing layer).

Each format is a :class:`~recordkit.formats.base.RecordFormat` subclass registered here by name. The
built-in formats are registered at the bottom of this module, one explicit line each; a third-party format
is added with :func:`register_format`, or found through the ``recordkit.formats`` entry-point group of the
installed distributions (see :data:`ENTRY_POINT_GROUP`), loaded the first time a name, a suffix or a file's
head matches no registered format, and by :func:`available_formats`.

Examples
--------
>>> from recordkit.formats import available_formats, get_format
>>> available_formats()
['arrayrecord', 'ffrecord', 'ofrecord', 'tfrecord']
>>> get_format("TFRecord").extensions
('.tfrecord', '.tfrecords', '.tfrec', '.tfr')
>>> detect_format(bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19"))
'tfrecord'
"""

from __future__ import annotations

import re
import threading
import types
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from recordkit.errors import RecordKitWarning, UnknownFormatError
from recordkit.formats import _crc
from recordkit.formats.arrayrecord import ArrayRecordFormat
from recordkit.formats.base import RecordFormat
from recordkit.formats.compression import SUFFIXES
from recordkit.formats.ffrecord import FFRecordFormat
from recordkit.formats.ofrecord import OFRecordFormat
from recordkit.formats.tfrecord import TFRecordFormat
from recordkit.support.caller import user_stacklevel

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVENT_FILE_PREFIX",
    "SNIFF_LIMIT",
    "RecordFormat",
    "available_formats",
    "checksum_backends",
    "detect_format",
    "format_for_path",
    "get_format",
    "register_format",
    "suffix_compression",
]

_REGISTRY: dict[str, RecordFormat] = {}

SNIFF_LIMIT = 1 << 26
"""The most bytes a sniffer may ask :func:`detect_format` for (64 MiB)."""

ENTRY_POINT_GROUP = "recordkit.formats"
"""The entry-point group through which installed distributions add formats.

Each entry point names a :class:`~recordkit.formats.base.RecordFormat` subclass or instance
(``"lrec = lrec_plugin:LRecFormat"``), or a module that registers its formats when imported
(``"lrec = lrec_plugin"``). They are loaded once, the first time a format name, a file suffix or a file's
first bytes match no registered format, or :func:`available_formats` is called. A plugin that fails to load
gives a :class:`~recordkit.errors.RecordKitWarning` naming it, never an error."""

_plugins_loaded = False
_plugins_lock = threading.RLock()


def _load_plugins() -> bool:
    """Load the formats of the ``recordkit.formats`` entry points, once; return whether any was added."""
    global _plugins_loaded
    with _plugins_lock:
        if _plugins_loaded:
            return False
        _plugins_loaded = True
        from importlib.metadata import entry_points

        before = set(_REGISTRY)
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            _load_entry(entry)
        return set(_REGISTRY) != before


def _load_entry(entry: EntryPoint) -> None:
    """Register the format(s) of one entry point; a broken one gives a warning naming it."""
    try:
        _register_entry(entry.load())
    except Exception as exc:  # noqa: BLE001 - a broken plugin must never break recordkit
        warnings.warn(
            f"the recordkit format plugin {entry.name!r} ({entry.value}) could not be loaded and is "
            f"ignored: {type(exc).__name__}: {exc}",
            RecordKitWarning,
            stacklevel=user_stacklevel(),
        )


def _register_entry(loaded: object) -> None:
    """Register what an entry point names: a format class or instance (a module registered itself)."""
    if isinstance(loaded, types.ModuleType):
        return
    fmt = loaded() if isinstance(loaded, type) and issubclass(loaded, RecordFormat) else loaded
    if not isinstance(fmt, RecordFormat):
        raise TypeError(
            f"expected a RecordFormat subclass or instance, or a module, not {type(loaded).__name__}"
        )
    name = fmt.name.lower()
    present = _REGISTRY.get(name)
    if present is None:
        _REGISTRY[name] = fmt
    elif type(present) is not type(fmt):
        raise ValueError(f"a format named {name!r} is already registered")


def register_format(cls: type[RecordFormat], *, replace: bool = False) -> type[RecordFormat]:
    """Register a format class under its ``name``; usable as a class decorator.

    Parameters
    ----------
    cls
        A :class:`~recordkit.formats.base.RecordFormat` subclass with a ``name``.
    replace
        Allow replacing a format already registered under that name.

    Raises
    ------
    ValueError
        If the name is taken and ``replace`` is false.
    """
    name = cls.name.lower()
    if name in _REGISTRY and not replace:
        raise ValueError(f"a format named {name!r} is already registered")
    _REGISTRY[name] = cls()
    return cls


def _lookup(name: str) -> RecordFormat | None:
    """The registered format whose name or one of whose aliases is ``name`` (any case), or ``None``."""
    key = str(name).lower()
    found = _REGISTRY.get(key)
    if found is None:
        found = next(
            (fmt for fmt in _REGISTRY.values() if key in (alias.lower() for alias in fmt.aliases)),
            None,
        )
    return found


def get_format(name: str) -> RecordFormat:
    """Return the registered format called ``name`` or one of its aliases (case-insensitive).

    ``get_format("array_record")`` is the ``"arrayrecord"`` format: the returned format's ``name`` is the
    one recordkit reports.

    Raises
    ------
    UnknownFormatError
        If no format has that name; the message lists the available ones.
    """
    found = _lookup(name)
    if found is None and _load_plugins():
        found = _lookup(name)
    if found is None:
        names = available_formats()
        # The spelling of a file suffix or a package (array_record, tf-record) names a format too.
        squeezed = re.sub(r"[-_ .]", "", str(name).lower())
        close = [known for known in names if known == squeezed]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownFormatError(
            f"unknown record format {name!r}{hint}; available formats: {', '.join(names)}",
            name=str(name),
        )
    return found


def available_formats(*, writable: bool = False) -> list[str]:
    """Return the names of the registered formats (the entry points' loaded first), sorted.

    With ``writable=True``, only those recordkit writes (a plugin's format may be read only).
    """
    _load_plugins()
    return sorted(
        name for name, fmt in _REGISTRY.items() if fmt.capabilities.writable or not writable
    )


def checksum_backends() -> dict[str, str]:
    """Return the checksum implementations in use, by checksum.

    ``"crc32c"`` (TFRecord's) is ``"google-crc32c"`` (fast, ``pip install recordkit[fast]``),
    ``"crcmod-c"`` or ``"crcmod-python"`` (correct but a few MB/s; a
    :class:`~recordkit.errors.SlowCRCWarning` says so once); ``"crc32"`` (FFRecord's) is ``"isal"`` or
    ``"zlib"``.

    Examples
    --------
    >>> sorted(checksum_backends())
    ['crc32', 'crc32c']
    """
    return {"crc32c": _crc.CRC32C_BACKEND, "crc32": _crc.CRC32_BACKEND}


def suffix_compression(path: str) -> str | None:
    """Return the compression named by a file name's last suffix, or ``None``.

    ``.gz`` and ``.gzip`` name GZIP, ``.zlib`` names ZLIB, ``.bz2`` names BZIP2 (any case).

    Examples
    --------
    >>> suffix_compression("shard-0.tfrecord.GZ"), suffix_compression("shard-0.tfrecord")
    ('gzip', None)
    """
    lowered = path.lower()
    return next((name for suffix, name in SUFFIXES if lowered.endswith(suffix)), None)


# "-00003-of-00010" at the end of a name: the shard numbering of tensorflow-datasets and Beam.
_SHARD_NUMBER = re.compile(r"-[0-9]+-of-[0-9]+$")

EVENT_FILE_PREFIX = "events.out.tfevents."
"""How the name of a TensorBoard event file starts (``events.out.tfevents.<time>.<host>...``, as TensorFlow,
PyTorch and tensorboardX name them): TFRecord files of ``Event`` messages with no record suffix, which
:func:`format_for_path` names TFRecord."""


def format_for_path(path: str) -> tuple[RecordFormat, str | None] | None:
    """Return the format a file name's suffix selects, and the compression the suffix implies.

    The compression is ``None`` when the suffix says nothing about it (``"train.tfrecord"``), ``"gzip"``,
    ``"zlib"`` or ``"bzip2"`` for ``.gz``/``.gzip``/``.zlib``/``.bz2`` after a format suffix. Returns ``None`` if no format claims
    the suffix (or the format it names cannot be compressed that way). A shard number after the suffix,
    as tensorflow-datasets and Apache Beam write it (``mnist-train.tfrecord-00003-of-00010``), is passed
    over. A TensorBoard event file (a name starting with :data:`EVENT_FILE_PREFIX`) is TFRecord.

    Examples
    --------
    >>> fmt, compression = format_for_path("shard-0.tfrecord.gz")
    >>> fmt.name, compression
    ('tfrecord', 'gzip')
    >>> format_for_path("mnist-train.tfrecord-00003-of-00010")[0].name
    'tfrecord'
    >>> format_for_path("logs/run1/events.out.tfevents.1700000000.host.42.0")[0].name
    'tfrecord'
    """
    lowered = _SHARD_NUMBER.sub("", path.lower())
    compression = suffix_compression(lowered)
    if compression is not None:
        lowered = lowered[: lowered.rindex(".")]
    while True:
        for fmt in _REGISTRY.values():
            if lowered.endswith(fmt.extensions) and (
                compression is None or compression in fmt.capabilities.compression
            ):
                return fmt, compression
        if not _load_plugins():
            return _named_format(path, compression)


def _named_format(path: str, compression: str | None) -> tuple[RecordFormat, str | None] | None:
    """The format a file's whole name says, when its suffix says none (TensorBoard's event files)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    tfrecord = _REGISTRY.get("tfrecord")
    if tfrecord is not None and name.startswith(EVENT_FILE_PREFIX):
        return tfrecord, compression
    return None


def detect_format(
    head: bytes,
    size: int | None = None,
    *,
    more: Callable[[int], bytes] | None = None,
    limit: int = SNIFF_LIMIT,
) -> str | None:
    """Return the name of the format whose sniffer recognises ``head``, or ``None``.

    Sniffers are tried by :attr:`~recordkit.formats.base.RecordFormat.sniff_priority`, highest first
    (formats of equal priority in the order they were registered). A sniffer that answers with a number
    of bytes instead of ``True`` or ``False`` (an FFRecord header longer than ``head``) is asked again,
    once, with that many bytes from ``more``, when no sniffer recognised ``head`` itself: those second
    tries are made in the same order. This is the one detection order of recordkit (``recordkit.open``
    sniffs a file without a known suffix with it).

    Parameters
    ----------
    head
        The first bytes of a file (a few KiB is plenty for most files; an FFRecord file needs its
        whole header to be recognised).
    size
        The file size, when known; sniffers use it to reject lengths that do not fit.
    more
        ``more(n)`` returns the first ``n`` bytes of the file (fewer at its end); without it, a sniffer
        that needs more than ``head`` does not recognise the file.
    limit
        The most bytes a sniffer may ask ``more`` for (:data:`SNIFF_LIMIT`, 64 MiB).
    """
    ordered = sorted(_REGISTRY.items(), key=lambda item: -item[1].sniff_priority)
    wanting: list[tuple[str, RecordFormat, int]] = []
    for name, fmt in ordered:
        verdict = fmt.sniff(head, size)
        if verdict is True:
            return name
        if verdict is not False and more is not None and len(head) < verdict <= limit:
            wanting.append((name, fmt, int(verdict)))
    for name, fmt, wanted in wanting:
        if more is not None and fmt.sniff(more(wanted), size) is True:
            return name
    # A format of an installed plugin may recognise it (the entry points are loaded once).
    return detect_format(head, size, more=more, limit=limit) if _load_plugins() else None


register_format(TFRecordFormat)
register_format(OFRecordFormat)
register_format(FFRecordFormat)
register_format(ArrayRecordFormat)
