"""Atomic file creation: write under a temporary name, rename into place on success.

:class:`AtomicFile` creates ``.<name>.<random>.tmp`` in the target's directory (so the final
:func:`os.replace` never crosses a file system) and renames it over the target on :meth:`AtomicFile.commit`.
Until then the target is untouched: after an exception, :meth:`AtomicFile.discard`, garbage collection of
an uncommitted object, or interpreter exit, the temporary file is removed. A process killed outright
(``SIGKILL``, power loss) leaves only the hidden temporary file behind, never a partial target.

:class:`UploadOnCommit` does the same for remote (fsspec) targets: it writes a local temporary file and
uploads it on commit, so a failed write never creates the remote object. Whether the upload itself is
atomic depends on the storage (object stores such as S3 only show complete objects).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
import weakref
from typing import IO, Any

from recordkit.io.sources import is_url, require_fsspec

__all__ = [
    "AtomicFile",
    "UploadOnCommit",
    "is_temporary",
    "pending_temporaries",
    "remove_leftovers",
    "temporary_name",
    "write_atomically",
]


def temporary_name(target: str) -> str:
    """Return a fresh hidden temporary path beside ``target``.

    Examples
    --------
    >>> name = temporary_name("/data/train.tfrecord")
    >>> name.startswith("/data/.train.tfrecord.") and name.endswith(".tmp")
    True
    """
    directory, name = os.path.split(target)
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


_TEMPORARY = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{12}\.tmp")
"""What :func:`temporary_name` names, the name of the file it is for in the group ``target``."""


def is_temporary(path: str) -> bool:
    """Whether ``path`` is named as :func:`temporary_name` names a writer's temporary file.

    Examples
    --------
    >>> is_temporary(temporary_name("/logs/events.out.tfevents.1.host"))
    True
    >>> is_temporary("/logs/events.out.tfevents.1.host")
    False
    """
    return _TEMPORARY.fullmatch(os.path.basename(path)) is not None


def pending_temporaries(target: str) -> list[str]:
    """Return the temporary files beside ``target`` that writers of it have open or left behind, sorted.

    Each is what :func:`temporary_name` names: a writer still running renames its own over ``target`` when
    it is closed.
    """
    directory, name = os.path.split(target)
    try:
        entries = os.listdir(directory or ".")
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(
        os.path.join(directory, entry)
        for entry in entries
        if (found := _TEMPORARY.fullmatch(entry)) is not None and found["target"] == name
    )


def remove_leftovers(target: str) -> int:
    """Delete the temporary files that writers of ``target`` left behind; return how many.

    A writer killed outright (SIGKILL, a lost machine) cannot remove its temporary file. Call this only
    when no writer of ``target`` is still running: its temporary file would go too, and its commit fail.
    """
    removed = 0
    for path in pending_temporaries(target):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            removed += 1
    return removed


def _discard(file: IO[bytes], temporary: str) -> None:
    """Close ``file`` and delete ``temporary``, ignoring errors (it may already be gone)."""
    with contextlib.suppress(OSError):
        file.close()
    with contextlib.suppress(OSError):
        os.unlink(temporary)


def _about_target(exc: OSError, target: str) -> OSError:
    """Return ``exc`` reworded about ``target``: the hidden temporary name means nothing to the user.

    The class (``FileNotFoundError``, ``PermissionError``, ...) and ``errno`` are kept; ``filename`` becomes
    the target; a missing directory is named as what is missing (a writer creates no directories, as
    ``open()`` does not).
    """
    directory = os.path.dirname(target)
    if isinstance(exc, FileNotFoundError) and directory and not os.path.isdir(directory):
        return FileNotFoundError(
            exc.errno, f"no such directory: {directory!r}; create it first", target
        )
    return type(exc)(exc.errno, exc.strerror, target)


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class AtomicFile:
    """A binary file that appears at ``target`` only when :meth:`commit` succeeds.

    Parameters
    ----------
    target
        The final path.
    fsync
        On commit, fsync the file before the rename and the directory after it.

    Attributes
    ----------
    file
        The open temporary file to write to.
    temporary
        Its path.
    """

    def __init__(self, target: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.target = os.fspath(target)
        self.fsync = fsync
        self.temporary = temporary_name(self.target)
        try:
            self.file: IO[bytes] = open(self.temporary, "xb")  # noqa: SIM115 - closed by commit/discard
        except OSError as exc:
            raise _about_target(exc, self.target) from None
        self._finalizer = weakref.finalize(self, _discard, self.file, self.temporary)

    @property
    def done(self) -> bool:
        """Whether the file was committed or discarded."""
        return not self._finalizer.alive

    def commit(self) -> None:
        """Flush, close and rename the temporary file to the target.

        On any error the temporary file is removed, the target is left as it was, and the error propagates.
        """
        if self.done:
            raise ValueError(f"{self.target}: already committed or discarded")
        try:
            self.file.flush()
            if self.fsync:
                os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.temporary, self.target)
        except OSError as exc:
            self.discard()
            if exc.filename == self.temporary:
                raise _about_target(exc, self.target) from None
            raise
        except BaseException:
            self.discard()
            raise
        self._finalizer.detach()
        if self.fsync:
            _fsync_directory(os.path.dirname(self.target))

    def discard(self) -> None:
        """Close and delete the temporary file; the target is untouched. Idempotent."""
        self._finalizer()


class UploadOnCommit:
    """A binary file written locally and uploaded to an fsspec URL on :meth:`commit`.

    Parameters
    ----------
    fs
        The fsspec file system.
    path
        The path on ``fs``.
    """

    def __init__(self, fs: Any, path: str) -> None:
        self.fs = fs
        self.target = path
        handle, self.temporary = tempfile.mkstemp(prefix="recordkit-upload-", suffix=".tmp")
        self.file: IO[bytes] = os.fdopen(handle, "wb")
        self._finalizer = weakref.finalize(self, _discard, self.file, self.temporary)

    @property
    def done(self) -> bool:
        """Whether the file was committed or discarded."""
        return not self._finalizer.alive

    def commit(self) -> None:
        """Upload the local file to the target, then delete it (also on failure)."""
        if self.done:
            raise ValueError(f"{self.target}: already committed or discarded")
        try:
            self.file.close()
            self.fs.put_file(self.temporary, self.target)
        finally:
            self.discard()

    def discard(self) -> None:
        """Delete the local file without uploading. Idempotent."""
        self._finalizer()


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through an :class:`AtomicFile`: the whole file appears, or nothing.

    An fsspec URL is uploaded in one piece: object stores replace an object whole, so readers see the old
    content or the new.
    """
    if is_url(os.fspath(path)):
        with require_fsspec().open(path, "wb") as file:
            file.write(data)
        return
    target = AtomicFile(path)
    try:
        target.file.write(data)
    except BaseException:
        target.discard()
        raise
    target.commit()
