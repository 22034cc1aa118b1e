"""Reading several units (files, or parts of files) of a shard at once, in a deterministic order.

A :class:`RoundRobin` schedule decides which unit each record comes from: ``cycle`` units are open side by
side and take turns, ``block`` records each; when a unit ends its slot is given the next unit the next time
the turn comes back to it (tf.data's deterministic ``interleave``). The schedule depends only on the units'
lengths, so a resumed or a random-access stream can replay it without reading anything. Each open unit is
read ahead by a thread of its own, which is what overlaps slow (remote) reads.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Generator, Iterator, Sequence

from recordkit.data._prefetch import End, Failure, put_unless_stopped
from recordkit.data._readers import ReaderPool, ShardStream, chunked
from recordkit.datasets.plan import IndexUnit, Unit

__all__ = ["InterleavedStream", "RoundRobin"]

_CHUNK = 64
"""Records a reading thread hands over at a time (one queue operation per chunk, not per record)."""

_DEPTH = 4
"""Chunks a reading thread may hold ready before it waits for the consumer."""


class RoundRobin:
    """Which unit the next record of an interleaved stream comes from.

    Parameters
    ----------
    units
        How many units the stream reads, in order.
    cycle
        How many are read side by side.
    block
        How many consecutive records one unit gives before the turn passes.
    """

    def __init__(self, units: int, cycle: int, block: int) -> None:
        self.units = units
        self.block = block
        self.slots: list[int | None] = [None] * cycle
        self.next_unit = 0
        self._slot = 0
        self._taken = 0

    def current(self) -> int | None:
        """The unit whose turn it is (filling an empty slot with the next unit), or ``None`` at the end."""
        for _ in range(len(self.slots)):
            unit = self.slots[self._slot]
            if unit is None and self.next_unit < self.units:
                unit = self.slots[self._slot] = self.next_unit
                self.next_unit += 1
            if unit is not None:
                return unit
            self._advance()
        return None

    def took(self) -> None:
        """One record came from the current unit."""
        self._taken += 1
        if self._taken == self.block:
            self._advance()

    def ended(self) -> None:
        """The current unit has no record left: free its slot and pass the turn."""
        self.slots[self._slot] = None
        self._advance()

    def _advance(self) -> None:
        self._taken = 0
        self._slot = (self._slot + 1) % len(self.slots)

    def replay(self, lengths: Sequence[int], records: int) -> list[int]:
        """Advance over ``records`` records of units of known ``lengths``; return how many each gave."""
        taken = [0] * len(lengths)
        done = 0
        while done < records:
            unit = self.current()
            if unit is None:
                break
            if taken[unit] == lengths[unit]:
                self.ended()
                continue
            taken[unit] += 1
            self.took()
            done += 1
        return taken


class _UnitReader:
    """A thread reading one unit of a stream ahead into a bounded queue."""

    def __init__(self, stream: ShardStream, unit: Unit, start: int) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=_DEPTH)
        self._stop = threading.Event()
        self._ready: collections.deque[bytes] = collections.deque()
        self._done = False
        self.read = 0
        """Records the thread has handed over (all of the unit's, once :meth:`next` has returned ``None``)."""
        pool = ReaderPool(stream.pool.catalog)
        if not isinstance(unit, IndexUnit):
            # A reader the planning step opened (and indexed) is handed to this thread.
            reader = stream.pool.detach(unit.file)
            if reader is not None:
                pool.attach(unit.file, reader)
        self._thread = threading.Thread(
            target=self._run,
            args=(stream, unit, start, pool),
            name="recordkit-interleave",
            daemon=True,
        )
        self._thread.start()

    def _run(self, stream: ShardStream, unit: Unit, start: int, pool: ReaderPool) -> None:
        message: object = End()
        chunk: list[bytes] = []
        try:
            for record in stream.unit_records(unit, start, pool):
                chunk.append(record)
                if len(chunk) == _CHUNK:
                    self.read += len(chunk)
                    if not put_unless_stopped(self._queue, chunk, self._stop):
                        return
                    chunk = []
            self.read += len(chunk)
            if chunk and not put_unless_stopped(self._queue, chunk, self._stop):
                return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
            message = Failure(exc)
        finally:
            pool.close()
        put_unless_stopped(self._queue, message, self._stop)

    def next(self) -> bytes | None:
        """The unit's next record, or ``None`` at its end; re-raises what the thread raised."""
        while not self._ready:
            if self._done:
                return None
            item = self._queue.get()
            if isinstance(item, Failure):
                self._done = True
                raise item.exc
            if isinstance(item, End):
                self._done = True
                return None
            self._ready.extend(item)  # type: ignore[arg-type]
        return self._ready.popleft()

    def close(self) -> None:
        """Stop the thread (its reader is closed there) and wait for it."""
        self._stop.set()
        self._thread.join()


class InterleavedStream:
    """A :class:`ShardStream` whose units are read ``cycle`` at a time, ``block`` records per turn.

    It has the stream's interface (``length``, ``random_access``, ``records``, ``fetch``), with positions
    counted in the interleaved order.
    """

    def __init__(self, stream: ShardStream, cycle: int, block: int) -> None:
        self.stream = stream
        self.cycle = cycle
        self.block = block
        self.length = stream.length
        self.random_access = stream.random_access
        # The lengths of the units of unknown size that were read to their end.
        self._ended: dict[int, int] = {}

    def _schedule(self) -> RoundRobin:
        return RoundRobin(len(self.stream.units), self.cycle, self.block)

    def _lengths(self) -> list[int] | None:
        units = self.stream.units
        return [len(u) for u in units] if all(u.sized for u in units) else None

    def records(self, start: int = 0) -> Iterator[bytes]:
        """Yield the records from interleaved position ``start`` to the end."""
        schedule = self._schedule()
        lengths = self._lengths()
        if lengths is None:
            # Units of unknown size: their turns cannot be replayed, so read and drop the first records.
            records = self._read(schedule, [0] * len(self.stream.units))
            for _ in range(start):
                if next(records, None) is None:
                    return
            yield from records
            return
        yield from self._read(schedule, schedule.replay(lengths, start))

    def chunks(self, start: int = 0) -> Generator[list[bytes], None, None]:
        """:meth:`records` in lists."""
        records = self.records(start)
        try:
            yield from chunked(records, None)
        finally:
            records.close()  # type: ignore[attr-defined]

    def where(self, position: int) -> tuple[int, int] | None:
        """The file and the record index in it of the record at interleaved ``position``, once read.

        The turns are replayed from the units' lengths; a unit of unknown size that has not ended yet had
        not ended before ``position`` either.
        """
        units = self.stream.units
        lengths = [
            len(u) if u.sized else self._ended.get(k, position + 1) for k, u in enumerate(units)
        ]
        schedule = self._schedule()
        taken = schedule.replay(lengths, position)
        while (unit := schedule.current()) is not None:
            if taken[unit] < lengths[unit]:
                return self.stream.where_in(unit, taken[unit])
            schedule.ended()
        return None

    def _read(self, schedule: RoundRobin, starts: list[int]) -> Iterator[bytes]:
        units = self.stream.units
        readers: dict[int, _UnitReader] = {}
        opened = schedule.next_unit
        self._ended = {}

        def top_up() -> None:
            nonlocal opened
            for unit in schedule.slots:
                if unit is not None and unit not in readers:
                    readers[unit] = _UnitReader(self.stream, units[unit], starts[unit])
            while len(readers) < self.cycle and opened < len(units):
                if opened not in readers:
                    readers[opened] = _UnitReader(self.stream, units[opened], starts[opened])
                opened += 1

        try:
            top_up()
            while (unit := schedule.current()) is not None:
                if unit not in readers:
                    top_up()
                record = readers[unit].next()
                if record is None:
                    ended = readers.pop(unit)
                    self._ended[unit] = starts[unit] + ended.read
                    ended.close()
                    schedule.ended()
                    top_up()
                    continue
                schedule.took()
                yield record
        finally:
            for reader in readers.values():
                reader.close()

    def fetch(self, positions: Sequence[int]) -> list[bytes]:
        """The records at interleaved ``positions`` (random-access plans only), in that order."""
        lengths = self._lengths()
        assert lengths is not None, "fetch needs units of known size"
        bases = [0]
        for n in lengths:
            bases.append(bases[-1] + n)
        wanted = set(positions)
        plain: dict[int, int] = {}
        schedule = self._schedule()
        taken = [0] * len(lengths)
        position = 0
        while len(plain) < len(wanted):
            unit = schedule.current()
            assert unit is not None, "position out of range"
            if taken[unit] == lengths[unit]:
                schedule.ended()
                continue
            if position in wanted:
                plain[position] = bases[unit] + taken[unit]
            taken[unit] += 1
            schedule.took()
            position += 1
        return self.stream.fetch([plain[p] for p in positions])
