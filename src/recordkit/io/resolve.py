"""The spine: what a user names (a path, a directory, a glob, a list, a URL, a dataset, a split) as shards.

:func:`resolve_sources` is the one place where what is passed to a reading entry point becomes the list of
files to read, with their format and compression and, for a dataset, the manifest entries they are checked
against. :func:`recordkit.open`, :class:`recordkit.data.Dataset`,
:class:`recordkit.integrations.torch.MapDataset`, the ffrecord and OneFlow compatibility readers, the
command line and the Ray and Dask readers all call it, so a source names the same records whichever of
them reads it (:mod:`recordkit.recover` reads the one file it is given, through
:func:`~recordkit.io.sources.open_source`). :meth:`ResolvedSources.open` opens what it found as one
:class:`~recordkit.io.reader.RecordReader`.
"""

from __future__ import annotations

import dataclasses
import errno
import glob
import os
import posixpath
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Union

from recordkit.errors import ManifestError, UnsupportedOperationError
from recordkit.formats import format_for_path, get_format
from recordkit.formats.base import RecordFormat, normalize_compression
from recordkit.io.index import INDEX_SUFFIX
from recordkit.io.manifest import (
    MANIFEST_NAME,
    TFDS_INFO,
    Manifest,
    load_manifest,
    shard_listing,
    shard_path,
)
from recordkit.io.reader import RecordReader, _read_files, _Reopen
from recordkit.io.sources import (
    dataset_files,
    is_glob_pattern,
    is_url,
    listed_url,
    natural_key,
    require_fsspec,
    source_exists,
)

if TYPE_CHECKING:
    from recordkit.io.tfds import ReadOrder

Sources = Union[
    str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]], "ResolvedSources"
]
"""What a reading entry point takes: a path, a directory, a glob pattern, an fsspec URL, a list of them, or
what :func:`resolve_sources` returned."""


def _is_record_name(path: str) -> bool:
    """Whether a listed or globbed file may hold records: sidecar indexes and manifests do not."""
    return not path.endswith(INDEX_SUFFIX) and os.path.basename(path) != MANIFEST_NAME


def _is_directory(source: str) -> bool:
    """Whether ``source`` (a local path or an fsspec URL) names a directory."""
    if not is_url(source):
        return os.path.isdir(source)
    # A request to the store: made only for names without a record suffix, as a directory's are.
    if format_for_path(source) or is_glob_pattern(source):
        return False
    fs, inner = require_fsspec().core.url_to_fs(source)
    return bool(fs.isdir(inner))


def _listing(directory: str) -> tuple[list[str], bool]:
    """The files of ``directory`` (hidden ones left out), and whether it holds subdirectories."""
    if not is_url(directory):
        files = [path for path in dataset_files(directory, "") if os.path.isfile(path)]
        with os.scandir(directory) as entries:
            return files, any(entry.is_dir() for entry in entries)
    fs, inner = require_fsspec().core.url_to_fs(directory)
    entries = fs.ls(inner, detail=True)
    files = [
        listed_url(directory, fs, entry["name"])
        for entry in entries
        if entry["type"] == "file" and not posixpath.basename(entry["name"]).startswith(".")
    ]
    return sorted(files), any(entry["type"] == "directory" for entry in entries)


def _directory_files(directory: str, fmt: RecordFormat | None) -> list[str]:
    """The record files of ``directory`` (a local path or an fsspec URL), unsorted (see
    :func:`expand_sources`)."""
    listed, subdirectories = _listing(directory)
    named = [(path, format_for_path(path)) for path in listed if _is_record_name(path)]
    chosen = [path for path, found in named if found and (fmt is None or found[0] is fmt)]
    if not chosen and not any(found for _, found in named):
        # OneFlow's part-0, part-1, ...: no record suffix, the format is given or told by the content.
        # Only where no file has a record suffix at all (a README beside .tfrecord files is no record
        # file, whatever format= asks for). Names starting with "_" are metadata (Hadoop's _SUCCESS, as
        # Spark, Ray and Dask list a directory), and so are JSON files (tensorflow-datasets'
        # dataset_info.json, features.json).
        chosen = [
            path
            for path, _ in named
            if not os.path.basename(path).startswith("_") and not path.endswith(".json")
        ]
    if not chosen:
        kind = "record" if fmt is None else fmt.name
        message = f"no {kind} files in this directory"
        if subdirectories:
            message += (
                f" (subdirectories are not read: give them, or a glob such as {directory}/*/*)"
            )
        raise FileNotFoundError(errno.ENOENT, message, directory)
    return chosen


def _glob(pattern: str) -> list[str]:
    if is_url(pattern):
        fs, inner = require_fsspec().core.url_to_fs(pattern)
        matches = [listed_url(pattern, fs, p) for p in fs.glob(inner)]
    else:
        matches = [p for p in glob.glob(pattern) if os.path.isfile(p)]
    matches = [p for p in matches if _is_record_name(p)]
    if not matches:
        raise FileNotFoundError(errno.ENOENT, "no file matches this pattern", pattern)
    return matches


def _expand_one(
    item: Any, fmt: RecordFormat | None, key: Callable[[str], Any], check: bool
) -> list[Any]:
    """The files one source names (a file object: itself), see :func:`expand_sources`."""
    if not isinstance(item, (str, os.PathLike)):
        return [item]
    source = os.fspath(item)
    if _is_directory(source):
        return sorted(_directory_files(source, fmt), key=key)
    if is_glob_pattern(source):
        return sorted(_glob(source), key=key)
    if check and not source_exists(source):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), source)
    return [source]


def _source_list(sources: Any) -> list[Any]:
    """One source (a path or a file object) as a list of one, or a list of them as a list."""
    one = isinstance(sources, (str, os.PathLike)) or callable(getattr(sources, "read", None))
    return [sources] if one else list(sources)


def expand_sources(
    sources: Any,
    *,
    format: str | None = None,
    natural: bool = True,
    missing_ok: bool = False,
) -> list[Any]:
    """Return the files ``sources`` names, in order: what every reading entry point accepts.

    :func:`open`, :class:`recordkit.data.Dataset`, :class:`recordkit.compat.ffrecord.FileReader` and the command
    line all turn their sources into files with this function.

    Parameters
    ----------
    sources
        One source or a list (any iterable) of them, which keeps its order. A source is

        * a file (a path, a :class:`pathlib.Path` or an fsspec URL), returned as it is;
        * a directory (local, or an fsspec URL): its files whose suffix names a record format (with ``format``: that format),
          or, when no file there has a record suffix of any format, its other files (OneFlow's ``part-0``,
          ``part-1``, ...), JSON files and names starting with ``_`` (``_SUCCESS``) left out. Hidden files,
          sidecar ``*.idx`` indexes, manifests and
          subdirectories are left out, and a link to a file outside the directory is refused
          (:func:`dataset_files`). (:func:`open` reads a directory with a manifest through the
          manifest instead.)
        * a glob pattern (``*``, ``?``, ``[...]``, also in fsspec URLs) that is not itself an existing
          name: the files it matches (sidecar indexes left out);
        * a binary file object, returned as it is.
    format
        Choose a directory's files by this format's suffixes.
    natural
        Sort a directory's files and a glob's matches in natural order (``part-2`` before ``part-10``,
        :func:`natural_key`); ``False`` sorts by name, as ffrecord does.
    missing_ok
        Return a file that does not exist as it is (opening it reports the error) instead of raising.
        Without it, a missing local file is reported here; a missing URL too (one request to the storage).

    Returns
    -------
    list
        The files, directories and globs replaced by what they hold.

    Raises
    ------
    FileNotFoundError
        A file does not exist, a glob matches nothing, or a directory holds no record file; ``filename``
        is the source concerned.
    ValueError
        An empty list.
    UnsafePathError
        A directory entry links to a file outside the directory.
    """
    items = _source_list(sources)
    if not items:
        raise ValueError("no sources given: pass a file, a directory, a glob or a list of them")
    fmt = get_format(format) if format is not None else None
    key: Callable[[str], Any] = natural_key if natural else str
    return [file for item in items for file in _expand_one(item, fmt, key, not missing_ok)]


def _display_path(src: Any) -> str | None:
    """What :attr:`RecordReader.path` shows: the one path, directory or glob given, else ``None``."""
    return os.fspath(src) if isinstance(src, (str, os.PathLike)) else None


def find_dataset(
    source: Any, *, split: str | None = None, all_splits: bool = False
) -> tuple[str, Manifest] | None:
    """Return ``(directory, manifest)`` when ``source`` names a dataset with a manifest, else ``None``.

    A dataset is a local directory holding a ``_recordkit_manifest.json`` or, failing that, a
    tensorflow-datasets ``dataset_info.json``; or the path or URL of a manifest file itself (any name ending
    in ``.json``, e.g. one a :class:`~recordkit.ShardWriter` wrote with ``manifest="w3.json"``); or the URL
    of a directory (ending in ``/``, or without a record suffix) that holds a manifest. Shard paths in the manifest are relative to
    ``directory``.

    Parameters
    ----------
    source
        What the user passed to :func:`open` or :class:`recordkit.data.Dataset`.
    split
        Keep only this split's shards (:meth:`Manifest.select`).
    all_splits
        Return every shard, whatever its split (``split`` is then ignored).

    Raises
    ------
    ManifestError
        The manifest is malformed, or the split is missing or needed.
    """
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = os.fspath(source)
    found = _manifest_file(path)
    if found is None:
        return None
    directory = posixpath.dirname(found) if is_url(found) else os.path.dirname(found) or "."
    if not is_url(found) and os.path.basename(found) == TFDS_INFO:
        from recordkit.io.tfds import manifest_from_tfds

        manifest = manifest_from_tfds(directory, split=None if all_splits else split)
    else:
        manifest = load_manifest(found)
    if all_splits:
        return directory, manifest
    try:
        return directory, manifest.select(split)
    except ManifestError as exc:
        raise ManifestError(exc.reason, path=path) from None


def _manifest_file(path: str) -> str | None:
    """The manifest (or TFDS ``dataset_info.json``) that makes ``path`` a dataset, else ``None``.

    The one test of what a dataset is (:func:`find_dataset`, :func:`resolve_sources`): a local directory
    holding a manifest or a ``dataset_info.json``, a manifest file (any ``.json`` name), or the URL of a
    directory (ending in ``/``, or without a record suffix) that holds a manifest.
    """
    if is_url(path):
        if path.endswith(".json"):
            return path
        # A request to the store: made for names without a record suffix, as a directory's are.
        if path.endswith("/") or not (format_for_path(path) or is_glob_pattern(path)):
            candidate = path.rstrip("/") + "/" + MANIFEST_NAME
            return candidate if source_exists(candidate) else None
        return None
    if os.path.isdir(path):
        candidates = (os.path.join(path, name) for name in (MANIFEST_NAME, TFDS_INFO))
        return next((candidate for candidate in candidates if os.path.isfile(candidate)), None)
    return path if path.endswith(".json") and os.path.isfile(path) else None


def _manifest_format(
    manifest: Manifest, format: str | None, compression: str | None, path: str | None = None
) -> tuple[str, str]:
    if format is not None and get_format(format).name != manifest.format:
        raise ManifestError(
            f"format={format!r}, but the manifest says its shards are {manifest.format}", path=path
        )
    if compression is not None and normalize_compression(compression) != manifest.compression:
        raise ManifestError(
            f"compression={compression!r}, but the manifest says {manifest.compression or 'none'}",
            path=path,
        )
    return manifest.format, manifest.compression


# -- resolving sources: the one way every reading entry point turns what it is given into files ------


class ResolvedSources(NamedTuple):
    """What a reading entry point reads, as :func:`resolve_sources` found it.

    Attributes
    ----------
    files
        The files (paths, URLs or file objects), in reading order.
    format, compression
        A dataset's, from its manifest; otherwise as given (``None``: found per file).
    source
        The one path, directory or glob given, else ``None`` (what :attr:`RecordReader.path` shows).
    directory
        The dataset's directory, or ``None``.
    manifest
        The manifest (of the chosen split) whose shards are ``files``, one for one; ``None`` when the
        sources are not a dataset.
    """

    files: list[Any]
    format: str | None
    compression: str | None
    source: str | None = None
    directory: str | None = None
    manifest: Manifest | None = None

    def open(
        self,
        *,
        check_crc: bool = True,
        index: Any = None,
        lenient: bool = False,
        zero_copy: bool = False,
    ) -> RecordReader:
        """Open every file as one reader: what :func:`open` returns (the options are its own).

        A dataset's shards are checked against the manifest (presence, size, record count).
        """
        _check_index(index, self.files)
        shards = None if self.manifest is None else self.manifest.shards
        spec = _Reopen(
            self.files,
            self.source,
            check_crc,
            index,
            lenient,
            shards,
            zero_copy,
            self.order,
            shard_listing(self.manifest),
        )
        return _read_files(spec, format=self.format, compression=self.compression)

    @property
    def order(self) -> ReadOrder | None:
        """The order the records are read in when it is not file after file: a TFDS split's.

        TFDS reads a split's shards side by side (:func:`recordkit.io.tfds.read_order`); ``None``
        otherwise.
        """
        if self.manifest is None:
            return None
        from recordkit.io.tfds import read_order

        return read_order(self.manifest)

    def only(self, files: Iterable[str]) -> ResolvedSources:
        """The same resolution narrowed to ``files`` (each one of :attr:`files`), in the order given.

        A dataset keeps the manifest entries of the shards chosen, which they are checked against.

        Raises
        ------
        ManifestError
            A file of a dataset is not one of the shards its manifest lists (left over from an earlier
            write?).
        ValueError
            A file is not one of :attr:`files` (sources that are not a dataset).
        """
        where = {os.fspath(file): i for i, file in enumerate(self.files)}
        chosen = []
        for file in files:
            i = where.get(os.fspath(file))
            if i is None and self.manifest is not None:
                raise ManifestError(
                    f"the file is not one of the {len(self.files)} shards the manifest of "
                    f"{self.directory} lists: a file left over from an earlier write? (recordkit "
                    "manifest build describes the directory again)",
                    path=os.fspath(file),
                )
            if i is None:
                raise ValueError(f"{os.fspath(file)} is not one of the files resolved")
            chosen.append(i)
        manifest = self.manifest
        if manifest is not None:
            shards = tuple(manifest.shards[i] for i in chosen)
            manifest = dataclasses.replace(manifest, shards=shards)
        return self._replace(files=[self.files[i] for i in chosen], manifest=manifest)

    def open_part(
        self,
        part: int,
        *,
        check_crc: bool = True,
        index: Any = None,
        lenient: bool = False,
        recount: bool = False,
    ) -> RecordReader:
        """Open file number ``part`` alone; a dataset's shard with the checks :meth:`open` makes on it.

        The options are :func:`recordkit.open`'s; ``index`` takes a path only when there is one file.
        With ``recount``, a dataset's shard is counted from its own record headers (``len()`` walks them;
        a compressed shard is counted as it is read through), not taken from its manifest entry, and a
        count that differs from the entry raises :class:`~recordkit.errors.ManifestError` (what
        ``recordkit count`` reports). Other files are always counted from their own headers.
        """
        _check_index(index, self.files)
        file = self.files[part]  # a dataset's: the path of its manifest's shard number part
        shards = None if self.manifest is None else (self.manifest.shards[part],)
        spec = _Reopen(
            [file],
            _display_path(file),
            check_crc,
            index,
            lenient,
            shards,
            listing=shard_listing(self.manifest),
            recount=recount,
        )
        return _read_files(spec, format=self.format, compression=self.compression)


def _check_index(index: Any, files: list[Any]) -> None:
    """Refuse an index path for several files: it describes one file, and would be used for each.

    A dataset's shards are no exception: two shards of the same size but different records would both
    be read with the one file's record boundaries.
    """
    if len(files) > 1 and index not in (None, False, True):
        raise ValueError(
            f"index= takes a path only when reading a single file, not {len(files)} files: an index "
            "describes one file (each file's own sidecar is used with index=None)"
        )


def resolve_sources(
    sources: Any,
    *,
    format: str | None = None,
    compression: str | None = None,
    split: str | None = None,
    all_splits: bool = False,
    natural: bool = True,
    missing_ok: bool = False,
) -> ResolvedSources:
    """Return what ``sources`` names for reading: the resolution :func:`open` and every other reader uses.

    :func:`open`, :class:`recordkit.data.Dataset`, :class:`recordkit.integrations.torch.MapDataset`,
    :class:`recordkit.compat.ffrecord.FileReader`, the Ray and Dask readers and the command line all call it, so
    a source names the same records whichever of them reads it.

    * A dataset (:func:`find_dataset`: a directory with a ``_recordkit_manifest.json`` or a
      tensorflow-datasets ``dataset_info.json``, a manifest file, or a URL ending in ``/`` whose directory
      has a manifest) gives the shards its manifest lists for ``split``, in the manifest's order, with the
      manifest's format and compression. Files beside them that it does not list (left over from an earlier
      write) are not read.
    * Anything else is expanded by :func:`expand_sources` (files, directories, globs, lists).

    Parameters
    ----------
    sources
        One source or a list of them (see :func:`expand_sources`), or a :class:`ResolvedSources`, returned
        as it is (so every entry point also takes what this function returned). A dataset is read on its
        own: a list of several sources that holds one raises
        :class:`~recordkit.errors.UnsupportedOperationError` (its manifest, not the files present, says
        what it holds). A list of one source is that source.
    format, compression
        As given to :func:`open`. With a dataset they must agree with its manifest.
    split
        A dataset's split; required when it has several (unless ``all_splits``).
    all_splits
        Take every shard of a dataset, whatever its split.
    natural, missing_ok
        As for :func:`expand_sources`.

    Raises
    ------
    ManifestError
        The manifest is malformed, disagrees with ``format``/``compression``, or the split is missing or
        needed.
    ValueError
        ``split`` was given for sources that are not a dataset, or no source was given.
    UnsupportedOperationError
        A list of several sources holds a dataset.
    FileNotFoundError, UnsafePathError
        As for :func:`expand_sources`.
    """
    if isinstance(sources, ResolvedSources):
        if (format, compression, split) != (None, None, None):
            raise ValueError(
                "format=, compression= and split= were chosen when these sources were resolved"
            )
        return sources
    items = _source_list(sources)
    if len(items) == 1 and isinstance(items[0], (str, os.PathLike)):
        dataset = find_dataset(items[0], split=split, all_splits=all_splits)
        if dataset is not None:
            directory, manifest = dataset
            fmt, comp = _manifest_format(manifest, format, compression, directory)
            files = [shard_path(directory, shard) for shard in manifest.shards]
            return ResolvedSources(files, fmt, comp, _display_path(sources), directory, manifest)
    else:
        for item in items:
            if isinstance(item, (str, os.PathLike)) and _manifest_file(os.fspath(item)):
                raise UnsupportedOperationError(
                    f"{os.fspath(item)} is a dataset (it has a manifest), and a dataset is read on its "
                    "own: its manifest, not the files present, says which files it holds. Open it "
                    "alone, or mix datasets with recordkit.data.mix"
                )
    if split is not None and not all_splits:
        raise ValueError(
            f"split={split!r} needs a dataset directory: one with a {MANIFEST_NAME} or a "
            "tensorflow-datasets dataset_info.json"
        )
    files = expand_sources(items, format=format, natural=natural, missing_ok=missing_ok)
    return ResolvedSources(files, format, compression, _display_path(sources))
