"""Shared helpers of the ``recordkit`` command line: inputs, progress bars, errors and per-file reports.

Every command turns its arguments into record files with :func:`expand_inputs` (or :func:`resolve_input`),
which ask :func:`recordkit.io.resolve_sources`, the resolution every reader uses; nothing here lists files,
detects formats or opens a dataset's shards on its own. Like the rest of the command-line layer, this
module uses only public names.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import recordkit as rk
from recordkit.io import ResolvedSources, find_dataset, resolve_sources

if TYPE_CHECKING:
    from typing_extensions import Self

PROG = "recordkit"
EXIT_OK, EXIT_CORRUPT, EXIT_ERROR = 0, 1, 2
"""The exit statuses: all went well; corrupt data was found (a damaged file, a payload that does not
decode); a usage error or any other failure (bad arguments, a missing file, an unknown format)."""

_T = TypeVar("_T")
_P = TypeVar("_P", bound=str)


class CliError(Exception):
    """A failure the command line reports in one line on stderr, then exits with ``code``.

    Parameters
    ----------
    message
        What went wrong and, when possible, what to do.
    code
        The exit status, :data:`EXIT_ERROR` unless the data itself is at fault.
    """

    def __init__(self, message: str, *, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class InputPath(str):
    """A file to read, named on the command line or found in a directory, glob or dataset named there.

    It is the path itself (a ``str``: it prints, compares and joins as one) and knows how
    :func:`recordkit.open` reads it: a dataset's shard is checked against its manifest's entry, and a
    whole dataset (``part=None``) is read as its manifest lists it.

    Parameters
    ----------
    path
        What is shown for it.
    resolved
        The resolution of the command-line argument it comes from
        (:func:`recordkit.io.resolve_sources`).
    part
        Which of ``resolved``'s files it is, or ``None`` for all of them as one sequence.
    """

    resolved: ResolvedSources
    part: int | None

    def __new__(cls, path: str, resolved: ResolvedSources, part: int | None) -> Self:
        """Make the path ``path`` that opens as ``resolved``'s file ``part`` (all of them for ``None``)."""
        self = super().__new__(cls, path)
        self.resolved, self.part = resolved, part
        return self

    def open(self, *, recount: bool = False) -> rk.RecordReader:
        """Open it for reading, with the checks :func:`recordkit.open` makes; ``recount`` as for
        :meth:`~recordkit.io.ResolvedSources.open_part`."""
        if self.part is None:
            return self.resolved.open()
        return self.resolved.open_part(self.part, recount=recount)

    def count_records(self, *, recount: bool = False, enabled: bool = False) -> int:
        """Return the number of records: ``len(reader)`` with random access, else read through (with a
        progress bar when ``enabled``); ``recount`` as for :meth:`open`."""
        with self.open(recount=recount) as reader:
            if reader.supports_random_access:
                return len(reader)
            return sum(1 for _ in progress(reader, total=None, desc=self, enabled=enabled))


def resolve_input(
    path: str | list[str],
    *,
    format: str | None,
    split: str | None = None,
    all_splits: bool = False,
) -> ResolvedSources:
    """Resolve one command-line argument (or a list of them, read as one) as :func:`recordkit.open`
    resolves its sources.

    Raises
    ------
    CliError
        A dataset has several splits and ``--split`` names none of them (or none was given), or
        ``--split`` was given for an argument that is not a dataset.
    ManifestError
        A dataset's manifest is malformed or disagrees with ``--format``.
    """
    try:
        return resolve_sources(
            path, format=format, split=split, all_splits=all_splits, missing_ok=True
        )
    except rk.ManifestError as exc:
        whole = find_dataset(path, all_splits=True)
        splits = [] if whole is None else whole[1].splits
        if whole is not None and split not in splits and (split is not None or len(splits) > 1):
            # Choosing a split (one the dataset has) is the user's part, not damage in the data.
            raise CliError(describe_error(exc)) from exc
        raise


def expand_inputs(
    paths: Iterable[str],
    *,
    format: str | None = None,
    split: str | None = None,
    all_splits: bool = False,
    whole_datasets: bool = False,
) -> list[InputPath]:
    """Replace each argument by the record files it names (as :class:`InputPath`), as :func:`recordkit.open`
    resolves it.

    A dataset directory with a manifest (or a tensorflow-datasets ``dataset_info.json``) contributes the
    shards its manifest lists for ``--split`` (required when it has several, unless ``all_splits``), in
    the manifest's order, each checked against its entry when opened: files beside them that it does not
    list (left over from an earlier write) are not read. With ``whole_datasets``, it contributes itself,
    read as one sequence in the order :func:`recordkit.open` reads it. Any other directory or glob is
    expanded by :func:`recordkit.io.expand_sources`: a directory contributes its files whose suffix names a
    record format (with ``--format``: that format), or, when no file there has a record suffix, its other
    files (OneFlow's ``part-0``, ``part-1``, ...; names starting with ``_`` left out); hidden files, sidecar
    ``*.idx`` indexes and links out of the directory are left out. A quoted glob pattern is expanded there
    too (:mod:`recordkit.io.resolve`), not here. A file that does not exist is returned as given and
    reported when it is opened, beside the others.

    Raises
    ------
    FileNotFoundError
        A directory holds no record file, or a glob pattern matches nothing.
    CliError
        A dataset needs ``--split``, or ``--split`` was given for an argument that is not a dataset.
    ManifestError
        A dataset's manifest is malformed or disagrees with ``--format``.
    """
    inputs: list[InputPath] = []
    for path in paths:
        try:
            resolved = resolve_input(path, format=format, split=split, all_splits=all_splits)
        except ValueError as exc:
            if isinstance(exc, rk.RecordKitError):
                raise
            raise CliError(f"{path}: {describe_error(exc)}") from exc
        if resolved.manifest is not None and whole_datasets:
            inputs.append(InputPath(path, resolved, None))
        else:
            inputs += [InputPath(str(file), resolved, i) for i, file in enumerate(resolved.files)]
    return inputs


def progress(
    items: Iterable[_T], *, total: int | None, desc: str, enabled: bool, unit: str = "rec"
) -> Iterator[_T]:
    """Wrap ``items`` in a tqdm progress bar on stderr when ``enabled`` and tqdm is installed.

    The bar is shown only when stderr is a terminal, so logs and pipes stay clean.
    """
    if enabled and sys.stderr.isatty():
        with contextlib.suppress(ImportError):
            from tqdm import tqdm

            items = tqdm(items, total=total, desc=desc, unit=unit, unit_scale=True, leave=False)
    yield from items


def reader_len(reader: rk.RecordReader) -> int | None:
    """Return the number of records when it is cheap to know (random access), else ``None``."""
    return len(reader) if reader.supports_random_access else None


def records_text(n: int) -> str:
    """``1 record``, ``2 records``."""
    return f"{n} record" if n == 1 else f"{n} records"


def error(message: str) -> None:
    """Print ``recordkit: error: MESSAGE`` on stderr."""
    print(f"{PROG}: error: {message}", file=sys.stderr)


def report_each(
    paths: Iterable[_P],
    work: Callable[[_P], _T],
    show: Callable[[_P, _T], str],
    damaged: Callable[[_P, Any], object],
) -> list[tuple[int, _T | None]]:
    """Run ``work(path)`` for each file of a command and print ``show(path, result)``; return each file's
    exit status and result (``None`` when it failed).

    Corrupt data (a damaged file, a payload that does not decode) goes to ``damaged(path, exc)``; any
    other failure is printed as an error line. Either way the command goes on with the other files.
    """
    results: list[tuple[int, _T | None]] = []
    for path in paths:
        try:
            result = work(path)
        except (rk.CorruptRecordError, rk.DecodeError) as exc:  # noqa: PERF203 - one file each
            damaged(path, exc)
            results.append((EXIT_CORRUPT, None))
        except (rk.RecordKitError, OSError, ValueError) as exc:
            error(describe_error(exc))
            results.append((EXIT_ERROR, None))
        else:
            print(show(path, result))
            results.append((EXIT_OK, result))
    return results


def damage_line(path: str, exc: rk.CorruptRecordError | rk.DecodeError) -> str:
    """Return the line that reports damage found in a file or shard (``info``, ``verify``, ``verify DIR``).

    ``PATH: CORRUPT: record I at byte O: REASON [ErrorClass]``, leaving out the record or the byte when
    unknown; for a payload that does not decode (``verify --decode``), the record is ``exc.index``.
    """
    offset, reason = (
        (exc.offset, exc.reason) if isinstance(exc, rk.CorruptRecordError) else (None, exc)
    )
    where = [] if exc.index is None else [f"record {exc.index}"]
    if offset is not None:
        where.append(f"at byte {offset}" if where else f"byte {offset}")
    location = " ".join(where) + ": " if where else ""
    return f"{path}: CORRUPT: {location}{reason} [{type(exc).__name__}]"


def describe_error(exc: BaseException) -> str:
    """Return a one-line description of ``exc`` for stderr: what failed, where, and for one of
    recordkit's typed errors (:mod:`recordkit.errors`) its class, ``MESSAGE [ErrorClass]``.

    Every command prints an error that stops it, or a file it could not read, with this line; damage
    reported in a file's place has the line of :func:`damage_line`, which ends with the class too.
    """
    tag = f" [{type(exc).__name__}]" if isinstance(exc, rk.RecordKitError) else ""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, (rk.ManifestError, ValueError)) and "split=" in text:
        # The library's message speaks of the Python argument split=; on the command line it is --split.
        text = text.replace("with split=", "with --split").replace("split=", "--split=")
    elif isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
        text = f"{exc.filename}: {exc.strerror}"
    elif isinstance(exc, rk.UnknownFormatError):
        # The library's message speaks of the Python argument; on the command line it is an option.
        text = text.replace("pass format=", "pass --format")
    return text + tag
