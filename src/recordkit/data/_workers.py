"""Worker processes that each read their share of a pipeline and hand its items to the main process.

A :class:`WorkerPool` starts one process per worker for one iteration. Each runs its runs of the pipeline
(:class:`recordkit.data.loading.Share`) and passes every item through its shared-memory slots
(:mod:`recordkit.data._shm`); the main process takes the items from the workers in turn, as PyTorch's
``DataLoader`` does, so the order is the same from run to run. The pool works with the ``fork``, ``spawn``
and ``forkserver`` start methods and does not need PyTorch.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import pickle
import random
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from recordkit.data._damage import DamageLog
from recordkit.data._shm import (
    DAMAGE,
    END,
    ERROR,
    Control,
    SlotReader,
    SlotWriter,
    make_directory,
    shm_directory,
)
from recordkit.support.workers import mark_worker_process

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from recordkit.data.loading import IndexShare, Resume, Share

__all__ = ["Job", "WorkerPool", "WorkerTraceback"]

_POLL = 0.1
"""Seconds between checks that a worker is still alive while waiting for its next item."""
_JOIN = 1.0
"""Seconds a stopping worker is given to exit before it is terminated (one busy in user code may not see
the stop until its item is done)."""

# The receiving ends of the pipes of every pool running in this process. A forked worker inherits them
# and closes them first: a worker must not hold a pipe's reading end, or its writes would block for ever
# instead of failing once the main process is gone.
_receivers: set[Connection] = set()


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker process, set as that exception's cause."""


@dataclass(frozen=True)
class Job:
    """What every worker of one iteration does (pickled to spawned workers).

    Attributes
    ----------
    share
        The rank's share of the pipeline that the workers split.
    first, end
        The iteration's epochs (``end`` ``None``: forever).
    resume
        Where the iteration continues, or ``None`` for its start.
    init
        Called with the worker's number as the worker starts (``worker_init_fn``).
    seed
        The base seed: worker ``w`` seeds ``random``, numpy's global generator and, when imported, torch
        with ``seed + w``.
    """

    share: Share | IndexShare
    first: int
    end: int | None
    resume: Resume | None
    init: Callable[[int], None] | None
    seed: int


def _become_worker(job: Job, worker: int, num_workers: int) -> None:
    mark_worker_process()
    seed = job.seed + worker
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        # User code may ask torch.utils.data.get_worker_info(); it reads this.
        from torch.utils.data._utils import worker as torch_worker

        torch_worker._worker_info = torch_worker.WorkerInfo(
            id=worker,
            num_workers=num_workers,
            seed=seed,
            dataset=job.share.dataset,  # type: ignore[arg-type]
        )


def _error_message(exc: BaseException) -> bytes:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    payload: bytes | None
    try:
        payload = pickle.dumps(exc, protocol=5)
        pickle.loads(payload)
    except Exception:  # noqa: BLE001 - an exception that does not survive pickling goes as text
        payload = None
    return bytes([ERROR]) + pickle.dumps((payload, type(exc).__name__, text), protocol=5)


def _serve(
    job: Job,
    worker: int,
    num_workers: int,
    directory: str,
    control: Control,
    slots: int,
    conn: Connection,
    owner: int,
) -> None:
    """A worker process: read this worker's runs and send every item to the main process."""
    for inherited in list(_receivers):
        inherited.close()
    _receivers.clear()
    writer = SlotWriter(directory, control, worker, slots, owner)
    # Whether the main process went away without stopping the pass: then nobody else removes the files.
    orphaned = False
    try:
        _become_worker(job, worker, num_workers)
        if job.init is not None:
            job.init(worker)
        # What on_error="skip" skips is counted and warned about by the main process.
        damage = job.share.damage or DamageLog()
        damage.forward = True
        for run in job.share.runs(worker, num_workers, job.first, job.end, job.resume):
            for item in job.share.items(run):
                if control.stopped:
                    return
                if damage.pending:
                    conn.send_bytes(bytes([DAMAGE]) + pickle.dumps(damage.take_pending()))
                conn.send_bytes(writer.pack(run.slot, item))
        if damage.pending:
            conn.send_bytes(bytes([DAMAGE]) + pickle.dumps(damage.take_pending()))
        conn.send_bytes(bytes([END]))
    except (BrokenPipeError, InterruptedError):
        orphaned = not control.stopped
    except KeyboardInterrupt:
        pass  # the main process was interrupted too, and stops the pass
    except BaseException as exc:  # noqa: BLE001 - handed to the main process, which re-raises it
        try:
            conn.send_bytes(_error_message(exc))
        except OSError:
            orphaned = not control.stopped
    finally:
        writer.close()
        conn.close()
        if orphaned:
            _remove(directory)


def _functions(dataset: Any) -> Iterator[tuple[str, Any]]:
    """The user functions of a pipeline (its mix's datasets' included) or of a map-style dataset, as
    ``(what, function)``."""
    process = getattr(dataset, "_process", None)
    if process is not None:
        yield "the process function of the MapDataset", process
    for op in getattr(dataset, "_ops", ()):
        fn = getattr(op, "fn", None)
        if fn is not None:
            yield f"the function given to {type(op).__name__.lower()}()", fn
    for inner in getattr(getattr(dataset, "_source", None), "datasets", ()):
        yield from _functions(inner)


def _unpicklable(job: Job) -> tuple[str, Any] | None:
    """The first user function of ``job`` that does not pickle, with what it is, else ``None``."""
    candidates = list(_functions(job.share.dataset))
    fetch = getattr(job.share, "fetch", None)  # a map-style dataset's read, then the collate_fn
    if fetch is not None:
        candidates.append(("the collate_fn given to dataloader()", fetch))
    if job.init is not None:
        candidates.append(("worker_init_fn", job.init))
    return next(((what, fn) for what, fn in candidates if not _pickles(fn)), None)


def _pickles(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - whatever pickling raises, the object does not pickle
        return False
    return True


def _remove(directory: str) -> None:
    """Remove a pass's directory, which a sibling worker may be adding a slot to at the same time."""
    for _ in range(20):
        shutil.rmtree(directory, ignore_errors=True)
        if not os.path.exists(directory):
            return
        time.sleep(0.05)


def _raise_remote(payload: bytes | None, name: str, text: str, worker: int) -> None:
    exc: BaseException
    if payload is not None:
        exc = pickle.loads(payload)
    else:
        exc = RuntimeError(f"{name} raised in loader worker {worker}")
    raise exc from WorkerTraceback(f"in loader worker {worker}:\n{text}")


def _context(context: Any) -> multiprocessing.context.BaseContext:
    if context is None or isinstance(context, str):
        return multiprocessing.get_context(context)
    if isinstance(context, multiprocessing.context.BaseContext):
        return context
    raise TypeError(
        f"multiprocessing_context must be None, a start method name or a context, not {context!r}"
    )


class WorkerPool:
    """One iteration's worker processes, started when iterated and stopped when it ends or is abandoned.

    Iterating yields ``(slot, item)``: the stream each item counts against (see
    :class:`~recordkit.data.loading.Run`) and the item, whose numpy arrays view shared memory until they
    are garbage collected.

    Parameters
    ----------
    job
        What the workers read.
    num_workers
        How many worker processes (at least 1).
    context
        The ``multiprocessing`` start method (a name or a context; ``None``: the default).
    prefetch_factor
        How many items each worker may have ready before the main process takes them.
    timeout
        Seconds to wait for an item before raising ``TimeoutError`` (``0``: no limit).
    first_turn
        The worker whose item comes first (a resumed pass continues the turns where they stopped).
    on_damage
        Called with the events of what a worker skipped (``on_error="skip"``), before its next item.
    """

    def __init__(
        self,
        job: Job,
        num_workers: int,
        *,
        context: Any = None,
        prefetch_factor: int = 2,
        timeout: float = 0,
        first_turn: int = 0,
        on_damage: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.job = job
        self.on_damage = on_damage
        self.num_workers = num_workers
        self.context = _context(context)
        self.slots = (
            prefetch_factor + 2
        )  # the items in flight, and the ones the consumer still holds
        self.timeout = timeout
        self.first_turn = first_turn

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        directory = make_directory()
        processes: list[Any] = []
        conns: list[Connection] = []
        control: Control | None = None
        try:
            control = Control.create(directory, self.num_workers, self.slots)
            for worker in range(self.num_workers):
                receive, send = self.context.Pipe(duplex=False)
                _receivers.add(receive)
                conns.append(receive)
                process = self.context.Process(  # type: ignore[attr-defined]
                    target=_serve,
                    args=(
                        self.job,
                        worker,
                        self.num_workers,
                        directory,
                        control,
                        self.slots,
                        send,
                        os.getpid(),
                    ),
                    name=f"recordkit-loader-{worker}",
                    daemon=True,
                )
                try:
                    process.start()
                except (pickle.PicklingError, AttributeError, TypeError) as exc:
                    self._refuse_unpicklable(exc)
                finally:
                    send.close()
                processes.append(process)
            readers = [
                SlotReader(directory, control, w, self.slots) for w in range(self.num_workers)
            ]
            active = list(range(self.num_workers))
            turn = self.first_turn
            while active:
                turn %= len(active)
                worker = active[turn]
                message = self._receive(worker, conns[worker], processes[worker])
                if message[0] == END:
                    active.pop(turn)
                    continue
                if message[0] == DAMAGE:  # what the worker skipped before its next item
                    if self.on_damage is not None:
                        self.on_damage(pickle.loads(memoryview(message)[1:]))
                    continue
                if message[0] == ERROR:
                    payload, name, text = pickle.loads(memoryview(message)[1:])
                    _raise_remote(payload, name, text, worker)
                turn += 1
                yield readers[worker].unpack(message)
        finally:
            self._stop(control, conns, processes)
            shutil.rmtree(directory, ignore_errors=True)

    def _refuse_unpicklable(self, exc: BaseException) -> None:
        """Raise a ``TypeError`` naming the function of the pipeline that could not be sent to a worker
        (``spawn`` and ``forkserver`` pickle the job); re-raise ``exc`` if none of them is the cause."""
        found = _unpicklable(self.job)
        if found is None:
            raise exc
        what, fn = found
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"{what} {name} (module {getattr(fn, '__module__', None)!r}) cannot be sent to the loader's "
            f"workers: the {self.context.get_start_method()!r} start method pickles it, and only functions "
            "importable by name can be pickled. Define it at module level (not a lambda or a nested "
            "function; functools.partial of such a function works), or use "
            'multiprocessing_context="fork"'
        ) from exc

    def _receive(self, worker: int, conn: Connection, process: Any) -> bytes:
        if not self.timeout:
            # Only the worker holds the pipe's sending end: if it dies, the read ends at once.
            try:
                message = conn.recv_bytes()
            except EOFError:
                return self._died(worker, process)
            return message
        deadline = time.monotonic() + self.timeout
        while True:
            if conn.poll(min(_POLL, max(0.0, deadline - time.monotonic()))):
                try:
                    message = conn.recv_bytes()
                except EOFError:
                    return self._died(worker, process)
                return message
            if not process.is_alive() and not conn.poll(0):
                return self._died(worker, process)
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"loader worker {worker} gave no item within {self.timeout} seconds"
                )

    @staticmethod
    def _died(worker: int, process: Any) -> NoReturn:
        process.join(_POLL)
        why = ""
        if process.exitcode == -signal.SIGBUS:
            why = (
                ": killed by SIGBUS, which writing to shared memory raises when it is full; give "
                f"{shm_directory()} more room (a Docker container has 64 MB unless run with "
                "--shm-size=...), or use fewer workers, a smaller prefetch_factor or smaller batches"
            )
        raise RuntimeError(
            f"loader worker {worker} (pid {process.pid}) exited unexpectedly "
            f"(exit code {process.exitcode}){why}"
        )

    @staticmethod
    def _stop(control: Control | None, conns: list[Connection], processes: list[Any]) -> None:
        if control is not None:
            control.stop()
        for conn in conns:
            conn.close()  # a worker blocked on sending gets a broken pipe
            _receivers.discard(conn)
        deadline = time.monotonic() + _JOIN
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join()
            if hasattr(process, "close"):
                process.close()
