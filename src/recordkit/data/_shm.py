"""Handing items from worker processes to the main process through reused shared-memory slots.

Each worker owns a few *slots*: files in a shared-memory directory (``/dev/shm`` where there is one),
mapped by the worker and by the main process and reused from item to item. A worker pickles an item with
protocol 5, so that the memory of numpy arrays stays out of the pickle; it writes the pickle and the
arrays' memory into a free slot and sends the main process a descriptor of a hundred bytes. The main
process unpickles the item with its arrays *viewing* the slot: it copies nothing, and its work per item
does not grow with the item's size.

The life of a slot is told by one byte per slot in a control file both sides map:

* ``FREE``: the worker may write it;
* ``SENT``: written and described to the main process, which has not taken it yet;
* ``HELD``: taken: arrays of the item it holds may still be in use.

When the last array viewing a slot is garbage collected, the main process sets the slot back to ``FREE``.
Nothing is ever overwritten while the consumer can still see it. A worker makes its slots as it needs
them, up to its limit, and makes one anew when an item outgrows it. A worker whose slots are all in use
waits for the main process to take one while some are ``SENT``; when all are ``HELD`` (the consumer keeps
many items alive) it sends the item through the pipe instead, pickled whole.
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import pickle
import shutil
import struct
import sys
import tempfile
import time
import weakref
from typing import Any

import numpy as np

__all__ = [
    "DAMAGE",
    "END",
    "ERROR",
    "FREE",
    "HELD",
    "INLINE",
    "SENT",
    "SLOT",
    "Control",
    "SlotReader",
    "SlotWriter",
    "alive",
    "make_directory",
    "shm_directory",
]

FREE, SENT, HELD = 0, 1, 2
# The first byte of a message from a worker: an item inline or in a slot, the end of the pass, an error.
INLINE, SLOT, END, ERROR, DAMAGE = 1, 2, 3, 4, 5
# kind, stream (then the pickle)
_INLINE_HEAD = struct.Struct("<Bq")
# kind, stream, slot, generation, slot size, pickle length, buffers (then each buffer's start and size)
_SLOT_HEAD = struct.Struct("<BqiiqqI")
_ALIGN = 64
_PAGE = mmap.PAGESIZE
_INLINE = 32 * 1024
"""Items whose pickle is smaller than this, without array memory, go through the pipe."""
_WAIT = 0.0005
"""Seconds between looks at the slots' bytes while every slot is in flight (doubling up to 8x)."""


_PREFIX = "recordkit-loader-"


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shm_directory() -> str:
    """Where loaders make their slot directories: ``/dev/shm`` where it can be written, else the temporary
    directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()


def make_directory() -> str:
    """A new private directory (mode ``0700``) for a loader's slots, in shared memory where there is some.

    Its name holds the process id of the main process. Directories left behind by main processes that no
    longer exist (killed before they could remove them) are removed first.
    """
    base = shm_directory()
    _remove_leftovers(base)
    return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)


def _remove_leftovers(base: str) -> None:
    uid = os.getuid() if hasattr(os, "getuid") else None
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        pid = name[len(_PREFIX) :].split("-", 1)[0]
        path = os.path.join(base, name)
        try:
            owned = uid is None or os.stat(path).st_uid == uid
        except OSError:
            continue
        if pid.isdigit() and owned and not alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


class Control:
    """The slots' state bytes and the stop byte, in a small file that every process maps.

    Parameters
    ----------
    path
        The control file (made by :meth:`create` in the main process).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        with open(path, "r+b") as file:
            self._map = mmap.mmap(file.fileno(), 0)
        self.bytes = np.frombuffer(self._map, dtype=np.uint8)

    @classmethod
    def create(cls, directory: str, workers: int, slots: int) -> Control:
        """Make the control file of ``workers`` workers with up to ``slots`` slots each."""
        path = os.path.join(directory, "control")
        with open(path, "wb") as file:
            file.write(bytes(workers * slots + 1))
        return cls(path)

    @property
    def stopped(self) -> bool:
        """Whether the main process asked the workers to stop."""
        return bool(self.bytes[-1])

    def stop(self) -> None:
        """Ask every worker to stop."""
        self.bytes[-1] = 1

    def __reduce__(self) -> tuple[Any, ...]:
        return (Control, (self.path,))


def _slot_size(size: int) -> int:
    """The bytes of a slot made for an item of ``size`` bytes: a quarter more, in whole pages."""
    return max(_PAGE, -(-(size + size // 4) // _PAGE) * _PAGE)


def _slot_name(worker: int, slot: int, generation: int) -> str:
    return f"w{worker}-s{slot}-g{generation}"


def _tensor_from_numpy(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array)


class _Pickler(pickle.Pickler):
    """Protocol 5 with out-of-band buffers; CPU tensors travel as the numpy arrays viewing them."""

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if (
            torch is not None
            and type(obj) is torch.Tensor
            and obj.device.type == "cpu"
            and not obj.requires_grad
            and obj.is_contiguous()
            and obj.dtype != torch.bfloat16  # numpy has no bfloat16
        ):
            return (_tensor_from_numpy, (obj.numpy(),))
        return NotImplemented


def _dumps(item: Any, buffers: list[pickle.PickleBuffer]) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(item)
    return out.getvalue()


class SlotWriter:
    """A worker's side: packs items into its slots and describes them.

    Parameters
    ----------
    directory, control
        The loader's slot directory and control file.
    worker
        This worker's number.
    slots
        The slots this worker may make before it sends items through the pipe instead.
    owner
        The process id of the main process: a worker waiting for a slot stops when it is gone.
    """

    def __init__(
        self, directory: str, control: Control, worker: int, slots: int, owner: int
    ) -> None:
        self.directory = directory
        self.control = control
        self.worker = worker
        self.owner = owner
        self._states = control.bytes[worker * slots : (worker + 1) * slots]
        self._maps: list[mmap.mmap] = []
        self._generations: list[int] = []
        self._generation = 0

    def pack(self, stream: int, item: Any) -> bytes:
        """Write ``item`` (of ``stream``) into a free slot, or inline, and return the message for
        :meth:`SlotReader.unpack`: a few dozen bytes when the item went into a slot.

        Raises
        ------
        InterruptedError
            The main process asked the workers to stop, or went away, while every slot was in flight.
        """
        buffers: list[pickle.PickleBuffer] = []
        data = _dumps(item, buffers)
        if not buffers and len(data) < _INLINE:
            return _INLINE_HEAD.pack(INLINE, stream) + data
        raws = [b.raw() for b in buffers]
        spans: list[int] = []
        at = _aligned(len(data))
        for raw in raws:
            spans += (at, raw.nbytes)
            at = _aligned(at + raw.nbytes)
        slot = self._acquire(at)
        if slot is None:
            return _INLINE_HEAD.pack(INLINE, stream) + pickle.dumps(item, protocol=5)
        target = self._maps[slot]
        target[: len(data)] = data
        for k, raw in enumerate(raws):
            start = spans[2 * k]
            target[start : start + raw.nbytes] = raw.cast("B")
        self._states[slot] = SENT
        head = _SLOT_HEAD.pack(
            SLOT, stream, slot, self._generations[slot], len(target), len(data), len(raws)
        )
        return head + struct.pack(f"<{len(spans)}q", *spans)

    def _acquire(self, size: int) -> int | None:
        """A free slot of at least ``size`` bytes (made or grown if needed), or ``None``: all are held."""
        wait = _WAIT
        while True:
            states = self._states
            free = [i for i in range(len(self._maps)) if states[i] == FREE]
            for i in free:
                if len(self._maps[i]) >= size:
                    return i
            # A slot that a full /dev/shm cannot hold kills this process (SIGBUS) as it is written.
            if (free or len(self._maps) < len(states)) and not self._room(size):
                return None
            if free:
                self._make(free[0], size)
                return free[0]
            if len(self._maps) < len(states):
                self._make(len(self._maps), size)
                return len(self._maps) - 1
            if not any(states[i] == SENT for i in range(len(self._maps))):
                return None
            if self.control.stopped or not alive(self.owner):
                raise InterruptedError("the loader stopped")
            time.sleep(wait)
            wait = min(wait * 2, 8 * _WAIT)

    def _room(self, size: int) -> bool:
        """Whether the slot directory's file system has room for a slot of ``size`` bytes."""
        try:
            found = os.statvfs(self.directory)
        except (AttributeError, OSError):  # no statvfs (Windows): nothing to ask
            return True
        return found.f_bavail * found.f_frsize >= _slot_size(size)

    def _make(self, slot: int, size: int) -> None:
        """Make slot ``slot`` anew with room for ``size`` bytes (and some to spare)."""
        size = _slot_size(size)
        self._generation += 1
        path = os.path.join(self.directory, _slot_name(self.worker, slot, self._generation))
        with open(path, "w+b") as file:
            file.truncate(size)
            mapped = mmap.mmap(file.fileno(), size)
        if slot < len(self._maps):
            old = _slot_name(self.worker, slot, self._generations[slot])
            self._maps[slot].close()
            self._maps[slot], self._generations[slot] = mapped, self._generation
            os.unlink(os.path.join(self.directory, old))
        else:
            self._maps.append(mapped)
            self._generations.append(self._generation)

    def close(self) -> None:
        """Unmap this worker's slots (the main process removes the files)."""
        for mapped in self._maps:
            mapped.close()
        self._maps = []


class SlotReader:
    """The main process's side: turns a worker's messages back into items viewing its slots.

    Parameters
    ----------
    directory, control
        The loader's slot directory and control file.
    worker, slots
        As for :class:`SlotWriter`.
    """

    def __init__(self, directory: str, control: Control, worker: int, slots: int) -> None:
        self.directory = directory
        self.worker = worker
        self._states = control.bytes[worker * slots : (worker + 1) * slots]
        self._maps: dict[int, tuple[int, mmap.mmap]] = {}
        # One weak reference per slot in use, whose callback frees the slot.
        self._leases: dict[int, weakref.ref[np.ndarray]] = {}

    def unpack(self, message: bytes) -> tuple[int, Any]:
        """The stream and the item of a message from :meth:`SlotWriter.pack`; the item's arrays view the
        slot until they are all gone."""
        if message[0] == INLINE:
            stream = _INLINE_HEAD.unpack_from(message)[1]
            return stream, pickle.loads(memoryview(message)[_INLINE_HEAD.size :])
        _, stream, slot, generation, size, length, count = _SLOT_HEAD.unpack_from(message)
        spans = struct.unpack_from(f"<{2 * count}q", message, _SLOT_HEAD.size)
        mapped = self._map(slot, generation, size)
        self._states[slot] = HELD
        base = np.frombuffer(mapped, dtype=np.uint8, count=size)
        buffers = [base[spans[k] : spans[k] + spans[k + 1]] for k in range(0, len(spans), 2)]
        try:
            item = pickle.loads(base[:length].data, buffers=buffers)
        except BaseException:
            self._states[slot] = FREE  # nothing views the slot: the worker may write it again
            raise
        self._leases[slot] = weakref.ref(base, functools.partial(self._release, slot))
        return stream, item

    def _release(self, slot: int, _: object) -> None:
        """Called when the last array viewing ``slot`` is gone: the worker may write it again.

        The lease's callback refers to this reader, which holds the lease, but only until it is called:
        a weak reference drops its callback once its object dies, so no cycle outlives the slot's arrays.
        """
        self._states[slot] = FREE

    def _map(self, slot: int, generation: int, size: int) -> mmap.mmap:
        known = self._maps.get(slot)
        if known is not None and known[0] == generation:
            return known[1]
        name = _slot_name(self.worker, slot, generation)
        with open(os.path.join(self.directory, name), "r+b") as file:
            mapped = mmap.mmap(file.fileno(), size)
        # A slot made anew replaces the old mapping; the old one is unmapped once nothing views it.
        self._maps[slot] = (generation, mapped)
        return mapped
