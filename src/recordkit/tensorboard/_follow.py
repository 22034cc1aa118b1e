"""Follow a log directory while it is being written: :class:`LogFollower`, returned by
:func:`recordkit.tensorboard.follow`.

Each event file is read by its own :class:`recordkit.io.Follower` (complete records only: a record still
being written waits for the next poll), and the directory is walked again at each poll for new runs and new
event files. The records appended to a file since the last poll are decoded by the same code as the readers
of whole directories, and a run's tag -> plugin map is kept across polls (a tag's plugin is named by its
first event only).
"""

from __future__ import annotations

import errno
import os
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from recordkit.errors import RecordKitError
from recordkit.io.following import Follower
from recordkit.support.closing import Closing
from recordkit.support.moved import REMOVED_IN, RENAMED_IN, renamed_arguments
from recordkit.tensorboard import _read
from recordkit.tensorboard._frames import Builder, Item

__all__ = ["LogFollower"]


@renamed_arguments(logdir="sources", interval="poll_interval")
class LogFollower(Closing):
    """The rows a log directory's event files gain, as DataFrames; made by
    :func:`recordkit.tensorboard.follow`.

    Iterating yields one DataFrame per poll that found new rows, and waits (``poll_interval`` seconds between polls)
    when there are none; it ends after ``idle_timeout`` seconds in which no event file grew and none was
    created, or once :meth:`close` is called (from any thread: a waiting iteration ends at once).
    :meth:`poll` reads once without waiting. It is a context manager that closes it.

    Attributes
    ----------
    sources
        The log directory, event file or glob pattern followed, or the list of them (named ``logdir``
        before 0.3: that name still works, with a :class:`DeprecationWarning`, until 0.5).
    poll_interval
        Seconds between two polls while iterating.
    kind
        The kind of summary read: ``"scalars"``, ``"tensors"``, ``"histograms"``, ``"images"``,
        ``"text"`` or ``"hparams"``.
    """

    def __init__(
        self,
        sources: str | list[str],
        kind: str,
        build: Builder,
        *,
        idle_timeout: float | None,
        poll_interval: float,
        check_crc: bool,
    ) -> None:
        self.sources = sources
        self.kind = kind
        self.idle_timeout = idle_timeout
        self.poll_interval = poll_interval
        self.check_crc = check_crc
        self._build = build
        self._files: dict[str, tuple[str, Follower]] = {}  # path -> (run, its follower)
        self._plugins: dict[str, dict[str, str]] = {}  # run -> tag -> plugin
        self._sizes: dict[str, int] = {}  # path -> size at the last poll
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._failure: RecordKitError | None = None
        self._missing: list[str] = []  # the paths given that do not exist (yet)
        self._batches = self._run()
        self._discover()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def logdir(self) -> str | list[str]:
        """The old name of :attr:`sources`, until 0.5 (with a :class:`DeprecationWarning`)."""
        warnings.warn(
            f"LogFollower.logdir is now LogFollower.sources since {RENAMED_IN}; the name logdir will be "
            f"removed in {REMOVED_IN}",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.sources

    @property
    def files(self) -> list[tuple[str, str]]:
        """``(run, path)`` of every event file found so far, runs by name and a run's files by name."""
        return sorted(((run, path) for path, (run, _) in self._files.items()), key=_order)

    def poll(self) -> Any:
        """The rows appended since the last poll, as one DataFrame (empty when there are none); never waits.

        The log directory is searched for new runs and event files first; the rows come runs by name, a
        run's files by name, each file's rows in the order written. After :meth:`close` it returns an empty
        DataFrame.

        An error is raised after the rows that the event files polled before the failing one gained (the
        next poll raises it then), and by every poll after it.

        Raises
        ------
        recordkit.errors.CorruptRecordError
            A record is damaged (as :meth:`recordkit.io.Follower.poll`);
            :class:`~recordkit.errors.FileChangedError` when an event file was replaced, removed or
            shortened.
        recordkit.errors.DecodeError
            A record is not an ``Event``, or a summary is not what its plugin writes.
        """
        return self._poll()[0]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def close(self) -> None:
        """Stop following: the event files are closed and the iteration ends (a waiting one at once)."""
        with self._lock:
            self._closed = True
            followers = [follower for _, follower in self._files.values()]
        for follower in followers:
            follower.close()
        self._wake.set()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._files)} event files"
        return f"<LogFollower {self.kind} of {self.sources!r}, {state}>"

    # -- reading -----------------------------------------------------------------------------------

    def _discover(self) -> None:
        """Open a follower for every event file not followed yet."""
        self._missing = _read.missing_paths(self.sources)
        for run, path in _read.event_files(self.sources, missing_ok=True):
            if path in self._files:
                continue
            try:
                follower = Follower(path, format="tfrecord", check_crc=self.check_crc)
            except FileNotFoundError:  # removed since it was listed: nothing of it was read
                continue
            with self._lock:
                if self._closed:
                    follower.close()
                    return
                self._files[path] = (run, follower)

    def _poll(self) -> tuple[Any, bool]:
        """The new rows, and whether any event file grew or was created since the last poll.

        An error is kept: the rows the files before it gained are returned first (if any), and every
        later poll raises it.
        """
        if self._failure is not None:
            raise self._failure
        if self._closed:
            return self._build([]), False
        known = len(self._files)
        items: list[Item] = []
        grew = False
        try:
            self._discover()
            grew = len(self._files) != known
            for run, path in self.files:
                follower = self._files[path][1]
                first, offset = follower.position
                records = follower.poll()
                size = _size(path)
                grew |= size != self._sizes.get(path, 0)
                self._sizes[path] = size
                if not records:
                    continue
                values = _read.record_values(records, path, first, offset)
                plugins = self._plugins.setdefault(run, {})
                _read.merge_plugins(plugins, values)
                items.append((run, values, plugins))
        except RecordKitError as exc:
            self._failure = exc
            if not items:
                raise
        try:
            return self._build(items), grew
        except RecordKitError as exc:  # a value its plugin does not write
            self._failure = exc
            raise

    def _run(self) -> Iterator[Any]:
        last_growth = time.monotonic()
        try:
            while not self._closed:
                frame, grew = self._poll()
                if grew:
                    last_growth = time.monotonic()
                if len(frame):
                    yield frame
                    continue
                idle = time.monotonic() - last_growth
                if self.idle_timeout is not None and idle >= self.idle_timeout:
                    if self._missing:
                        raise FileNotFoundError(
                            errno.ENOENT,
                            f"no such file or directory (waited {idle:.3g} s for it to be created)",
                            self._missing[0],
                        )
                    break
                self._wake.wait(self.poll_interval)
        finally:  # the end, an error or the iterator collected: the files are closed
            self.close()


def _order(item: tuple[str, str]) -> tuple[str, str]:
    run, path = item
    return run, os.path.basename(path)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:  # the follower raises FileChangedError once its last records are read
        return 0
