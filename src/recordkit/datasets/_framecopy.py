"""Resharding uncompressed TFRecord files in order by copying their frames: no record is framed again.

A TFRecord frame (the length, its checksum, the payload, its checksum) does not depend on where it lies, so
shards cut at record boundaries are runs of the sources' bytes. :func:`copy_frames` reads each source in
blocks, finds and checks every frame of a block at once (the format's
:meth:`~recordkit.formats.base.RecordFormat.frames` verifies each length and payload checksum, as a reader
does), and hands the runs to a thread that writes
them and updates the shard's SHA-256 (the system call and the hash release the GIL, so the copy and the
checking overlap). Each shard's sidecar index comes from the frames found, so nothing is read twice.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from typing import IO, Any

import numpy as np

from recordkit.datasets.shardfile import _fingerprint, _write_index, relative_path
from recordkit.errors import CorruptRecordError
from recordkit.formats.base import RecordFormat
from recordkit.io.index import default_index_path
from recordkit.io.manifest import Shard

__all__ = ["copy_frames"]

BLOCK = 16 << 20
"""How many bytes of a source are read and checked at once (a record longer than that is read whole)."""
_QUEUED = 8
"""The most writes and hashes handed to the threads and not done: memory holds their blocks (about
:data:`BLOCK` bytes for every two) and the one being checked."""


class _OpenShard:
    """One shard being copied into: its file, its SHA-256 and the offsets of its frames."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file: IO[bytes] = open(path, "wb", buffering=0)  # noqa: SIM115 (closed by finish)
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.records = 0
        self.heads: list[Any] = []  # numpy arrays of frame offsets in this file

    def add(
        self, pools: list[ThreadPoolExecutor], run: memoryview, heads: Any
    ) -> list[Future[Any]]:
        """Append ``run`` (whole frames, starting at ``heads[0]`` in its block): one of ``pools`` writes
        it, the other hashes it (SHA-256 costs as much as the rest of the copy together)."""
        self.heads.append(heads - heads[0] + self.size)
        self.size += len(run)
        self.records += len(heads)
        return [
            pools[0].submit(_write_all, self.file, run),
            pools[1].submit(self.sha256.update, run),
        ]

    def finish(self, root: str, split: str | None) -> Shard:
        """Close the file, write its index, and return its manifest entry (its writes all done)."""
        self.file.close()
        offsets = array("q", np.concatenate([*self.heads, [self.size]]).astype(np.int64).tobytes())
        index = _write_index(offsets, default_index_path(self.path), root)
        return Shard(
            path=relative_path(self.path, root),
            records=self.records,
            size=self.size,
            sha256=self.sha256.hexdigest(),
            split=split,
            index=index,
            fingerprint=_fingerprint(self.path),
        )


def copy_frames(
    fmt: RecordFormat,
    files: list[str],
    directory: str,
    sizes: list[int],
    split: str | None,
    shards: list[Shard],
) -> Iterator[int]:
    """Copy the records of the uncompressed ``files`` of the format ``fmt`` (one whose frames can be
    copied: :meth:`~recordkit.formats.base.RecordFormat.frames`), in order, into shards of ``sizes``
    records in ``directory``, named as :class:`~recordkit.ShardWriter` names them, and append their
    manifest entries to ``shards``.

    A generator: it yields the number of records of each block once they are handed to the writing
    thread (for a progress bar); ``shards`` is complete when it is exhausted.

    Raises
    ------
    CorruptRecordError
        A frame is damaged (located by file, record and byte offset), or the files hold another number of
        records than ``sizes`` adds up to (they changed since they were counted).
    """
    pattern = fmt.shard_pattern
    paths = [
        os.path.join(directory, pattern.format(shard=i, num_shards=len(sizes)))
        for i in range(len(sizes))
    ]
    wanted = iter(zip(paths, sizes, strict=True))
    current: _OpenShard | None = None
    left = 0
    pending: list[Future[Any]] = []
    with ExitStack() as stack:
        pools = [
            stack.enter_context(
                ThreadPoolExecutor(1, thread_name_prefix=f"recordkit-reshard-{job}")
            )
            for job in ("write", "hash")
        ]
        try:
            for path in files:
                for block, heads, ends in _frames(fmt, path):
                    _wait(pending, keep=_QUEUED)
                    at = 0
                    while at < len(heads):
                        if not left:
                            if current is not None:
                                _wait(pending)
                                shards.append(current.finish(directory, split))
                            target = next(wanted, None)
                            if target is None:
                                raise _changed(path, sum(sizes), "more")
                            current, left = _OpenShard(target[0]), target[1]
                        assert current is not None
                        take = min(left, len(heads) - at)
                        run = block[int(heads[at]) : int(ends[at + take - 1])]
                        pending += current.add(pools, run, heads[at : at + take])
                        at, left = at + take, left - take
                    yield len(heads)
            _wait(pending)
            if current is not None:
                shards.append(current.finish(directory, split))
            if left or next(wanted, None) is not None:
                raise _changed(files[-1] if files else directory, sum(sizes), "fewer")
        finally:
            _wait(pending, quiet=True)
            if current is not None and not current.file.closed:
                current.file.close()


def _frames(fmt: RecordFormat, path: str) -> Iterator[tuple[memoryview, Any, Any]]:
    """Each block of ``path``: its bytes, and where its whole frames begin and end, checksums checked.

    A block starts at the first frame the one before did not hold whole (read again rather than copied
    over), and is read twice as long when it holds no whole frame.
    """
    records, base, size = 0, 0, BLOCK
    with open(path, "rb", buffering=0) as file:
        while True:
            file.seek(base)
            block = file.read(size)
            final = len(block) < size
            try:
                frames = fmt.frames(block, path=path, final=final)
            except CorruptRecordError as err:
                err.relocate(records, base)
                raise
            heads = frames.starts - 12
            if len(heads):
                yield memoryview(block), heads, frames.starts + frames.lengths + 4
            records, base = records + len(heads), base + frames.end
            size = BLOCK if len(heads) else 2 * size
            if final:
                return


def _write_all(file: IO[bytes], run: memoryview) -> None:
    while run:
        run = run[file.write(run) or 0 :]


def _wait(pending: list[Future[Any]], *, keep: int = 0, quiet: bool = False) -> None:
    """Wait for the oldest of ``pending`` until ``keep`` are left (raising what failed unless ``quiet``)."""
    while len(pending) > keep:
        future = pending.pop(0)
        if quiet:
            future.exception()
        else:
            future.result()


def _changed(path: str, total: int, how: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"the sources changed while they were read: {total} records were counted, {how} copied",
        path=path,
    )
