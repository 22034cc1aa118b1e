"""recordkit.data.loader: worker processes handing batches over through shared memory, without PyTorch.

The expected items come from the pipeline itself read in this process, one shard per worker
(``Dataset(..., rank=w, world_size=W)``), taken in turns as PyTorch's ``DataLoader`` takes them.
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import weakref

import numpy as np
import pytest
from _data_files import write, write_label_examples

import recordkit as rk
from recordkit.data import Dataset, Loader, loader
from recordkit.data._shm import (
    FREE,
    INLINE,
    SLOT,
    Control,
    SlotReader,
    SlotWriter,
    alive,
    make_directory,
)
from recordkit.data._workers import WorkerPool
from recordkit.errors import ChecksumError

SPEC = {"x": rk.FixedLen((3,), np.float32), "label": rk.FixedLen((), np.int64)}
parse = functools.partial(rk.parse_examples, features=SPEC)
CONTEXTS = ["fork", "spawn", "forkserver"]


def ragged(records: list[bytes]) -> dict[str, np.ndarray]:
    """A batch whose size in bytes changes from batch to batch (label-long vectors of the batch's labels)."""
    labels = parse(records)["label"]
    return {"label": labels, "wide": np.repeat(labels, int(labels.max()) * 50 + 1)}


def exit_in_worker(records: list[bytes]) -> list[bytes]:
    """Kill the process that runs it (a worker dying without a word)."""
    os._exit(3)


@pytest.fixture(scope="module")
def examples(tmp_path_factory) -> list[str]:
    """Four files of 101 Examples in all; label i has x = [i, 2i, 3i]."""
    return write_label_examples(tmp_path_factory.mktemp("loader"), [30, 17, 41, 13])


def pipeline(paths: list[str], **kwargs) -> Dataset:
    return Dataset(paths, seed=5, **kwargs).shuffle(7).batch(4).map(parse)


def in_turns(paths: list[str], workers: int, epoch: int = 0) -> list[list[int]]:
    """The label batches of each worker's shard, read here, then taken one per worker in turn."""
    streams = []
    for w in range(workers):
        shard = pipeline(paths, rank=w, world_size=workers)
        shard.set_epoch(epoch)
        streams.append([b["label"].tolist() for b in shard])
    order = []
    for batches in itertools.zip_longest(*streams):
        order.extend(b for b in batches if b is not None)
    return order


def labels(batches) -> list[list[int]]:
    return [b["label"].tolist() for b in batches]


def leftovers() -> set[str]:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    mine = f"recordkit-loader-{os.getpid()}-"
    return {name for name in os.listdir(shm) if name.startswith(mine)}


@pytest.mark.parametrize("context", CONTEXTS)
def test_workers_give_each_shard_in_turns(examples, context):
    before = leftovers()
    got = labels(loader(pipeline(examples), num_workers=3, multiprocessing_context=context))
    assert got == in_turns(examples, 3)
    assert sorted(v for b in got for v in b) == list(range(101))
    assert leftovers() == before


def test_no_workers_reads_in_this_process(examples):
    assert labels(loader(pipeline(examples))) == labels(pipeline(examples))


def test_values_survive_while_batches_are_kept(examples):
    """Every batch kept alive at once: no slot is written while a batch still views it."""
    ds = Dataset(examples, seed=1).batch(3).map(parse)
    kept = list(loader(ds, num_workers=2, prefetch_factor=1))
    assert sorted(int(v) for b in kept for v in b["label"]) == list(range(101))
    for batch in kept:
        np.testing.assert_array_equal(
            batch["x"], batch["label"][:, None].astype(np.float32) * np.float32([1, 2, 3])
        )


def test_batches_of_changing_size(examples):
    """Batches that outgrow their slot get a larger one; each arrives whole."""
    ds = Dataset(examples, seed=2).batch(5).map(ragged)
    got = list(loader(ds, num_workers=2))
    assert sorted(int(v) for b in got for v in b["label"]) == list(range(101))
    for batch in got:
        labels_ = batch["label"]
        np.testing.assert_array_equal(
            batch["wide"], np.repeat(labels_, int(labels_.max()) * 50 + 1)
        )


@pytest.fixture
def kinds(monkeypatch) -> list[str]:
    """How each item reached the main process ("slot" or "inline"), in order."""
    seen: list[str] = []
    unpack = SlotReader.unpack

    def spy(self, message):
        seen.append({SLOT: "slot", INLINE: "inline"}[message[0]])
        return unpack(self, message)

    monkeypatch.setattr(SlotReader, "unpack", spy)
    return seen


def test_arrays_are_released_when_collected(examples, kinds):
    """A loop that drops each batch reuses the slots: no batch falls back to the pipe."""
    ds = Dataset(examples, seed=3).batch(2).map(parse)
    seen = 0
    for batch in loader(ds, num_workers=1, prefetch_factor=1):
        seen += len(batch["label"])
        del batch
    assert seen == 101
    assert kinds == ["slot"] * 51


def test_batches_kept_alive_fall_back_to_the_pipe(examples, kinds):
    kept = list(
        loader(Dataset(examples, seed=3).batch(2).map(parse), num_workers=1, prefetch_factor=1)
    )
    assert len(kept) == 51
    assert kinds[:3] == ["slot"] * 3  # prefetch + 2 slots, then every one is held
    assert "inline" in kinds


def _one_slot(tmp_path):
    """A worker's writer and the main process's reader of one pass, made in this process."""
    directory = str(tmp_path)
    control = Control.create(directory, 1, 2)
    return SlotWriter(directory, control, 0, 2, os.getpid()), SlotReader(directory, control, 0, 2)


@pytest.mark.parametrize("first", ["item", "reader"])
def test_a_dropped_reader_and_its_maps_are_freed_without_the_cycle_collector(tmp_path, first):
    writer, reader = _one_slot(tmp_path)
    _, item = reader.unpack(writer.pack(0, np.arange(100_000)))
    assert item.sum() == np.arange(100_000).sum()
    gone, states = weakref.ref(reader), reader._states
    gc.collect()
    gc.disable()
    try:
        if first == "item":
            del item  # the slot is given back
            assert states[0] == FREE
            del reader
        else:
            del reader
            del item
            assert states[0] == FREE
        # By reference counting alone: the lease's callback, which refers to the reader, is dropped
        # when it is called.
        assert gone() is None
    finally:
        gc.enable()
        writer.close()


def test_a_full_shared_memory_sends_items_through_the_pipe(tmp_path, monkeypatch):
    # Writing a slot that a full /dev/shm (Docker's default is 64 MB) cannot hold kills the worker with
    # SIGBUS: a worker that finds too little room sends the item through the pipe instead.
    writer, reader = _one_slot(tmp_path)
    real = os.statvfs

    def full(path):
        found = real(path)
        return os.statvfs_result((*found[:4], 10, *found[5:]))  # 10 blocks free

    monkeypatch.setattr(os, "statvfs", full)
    message = writer.pack(0, np.arange(100_000))
    assert message[0] == INLINE
    np.testing.assert_array_equal(reader.unpack(message)[1], np.arange(100_000))
    assert os.listdir(tmp_path) == ["control"]
    monkeypatch.setattr(os, "statvfs", real)
    assert writer.pack(0, np.arange(100_000))[0] == SLOT
    writer.close()


def test_a_worker_killed_by_sigbus_names_shared_memory():
    class Killed:
        pid, exitcode = 1234, -signal.SIGBUS

        def join(self, timeout):
            pass

    with pytest.raises(RuntimeError, match=r"SIGBUS.*/dev/shm|SIGBUS.*shm-size"):
        WorkerPool._died(0, Killed())


def test_raw_records_come_through(examples):
    ds = Dataset(examples, seed=4).batch(8)
    got = list(loader(ds, num_workers=2))
    expected = sorted(r for f in examples for r in rk.open(f))
    assert sorted(r for b in got for r in b) == expected


def test_epochs_advance_and_differ(examples):
    ld = loader(pipeline(examples), num_workers=2)
    first, second = labels(ld), labels(ld)
    assert ld.epoch == 2
    assert first == in_turns(examples, 2, epoch=0)
    assert second == in_turns(examples, 2, epoch=1)
    assert first != second


@pytest.mark.parametrize(("saved", "resumed"), [(2, 2), (2, 3), (3, 0)])
def test_resume_delivers_exactly_the_rest(examples, saved, resumed):
    ld = loader(pipeline(examples), num_workers=saved)
    iterator = iter(ld)
    head = [next(iterator)["label"].tolist() for _ in range(7)]
    state = json.loads(json.dumps(ld.state_dict()))
    iterator.close()
    again = loader(pipeline(examples), num_workers=resumed)
    again.load_state_dict(state)
    rest = labels(again)
    delivered = sorted(v for b in head + rest for v in b)
    assert delivered == list(range(101))
    assert again.epoch == 1


def test_length_matches_what_is_delivered(examples):
    ld = loader(pipeline(examples), num_workers=3)
    assert len(ld) == len(labels(ld))


def test_worker_errors_keep_their_attributes(tmp_path, examples):
    good = rk.encode_example({"x": np.zeros(3, np.float32), "label": 0})
    path = write(tmp_path / "bad.tfrecord", [good] * 5)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # the last record's payload
    path.write_bytes(bytes(data))
    ds = Dataset([str(path)], seed=0).batch(2).map(parse)
    with pytest.raises(ChecksumError) as caught:
        list(loader(ds, num_workers=2))
    assert caught.value.path == str(path)
    assert caught.value.index == 4
    assert "in loader worker" in str(caught.value.__cause__)


def test_a_worker_that_dies_is_reported(examples):
    ds = Dataset(examples, seed=0).batch(4).map(exit_in_worker)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(loader(ds, num_workers=2))


def test_stopping_early_stops_the_workers(examples):
    before = leftovers()
    ld = loader(Dataset(examples, seed=0).batch(1).map(parse), num_workers=2, prefetch_factor=1)
    first = next(iter(ld))
    assert first["label"].shape == (1,)
    gc.collect()
    assert leftovers() == before


def test_worker_init_fn_runs_in_each_worker(tmp_path, examples):
    marker = str(tmp_path / "worker")
    init = functools.partial(_touch, marker)
    list(loader(pipeline(examples), num_workers=2, worker_init_fn=init))
    assert sorted(os.listdir(tmp_path)) == ["worker-0", "worker-1"]


def _touch(prefix: str, worker: int) -> None:
    with open(f"{prefix}-{worker}", "w"):
        pass


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_workers": -1}, "num_workers"),
        ({"prefetch_factor": 0}, "prefetch_factor"),
        ({"timeout": -1}, "timeout"),
    ],
)
def test_bad_settings_are_refused(examples, kwargs, match):
    with pytest.raises(ValueError, match=match):
        loader(pipeline(examples), **kwargs)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
@pytest.mark.parametrize("where", ["map", "filter", "worker_init_fn"])
def test_a_function_that_cannot_be_pickled_is_named(examples, context, where):
    # spawn and forkserver pickle the pipeline for each worker: a lambda cannot be (no importable name).
    before = leftovers()
    ds, init = Dataset(examples, seed=0), None
    if where == "map":
        ds = ds.map(lambda record: record)
    elif where == "filter":
        ds = ds.filter(lambda record: True)
    else:
        init = lambda worker: None
    ld = loader(ds, num_workers=2, multiprocessing_context=context, worker_init_fn=init)
    with pytest.raises(TypeError, match=r"<lambda>.*module level.*multiprocessing_context") as info:
        list(ld)
    assert (where + "()" if where != "worker_init_fn" else where) in str(info.value)
    assert leftovers() == before


def test_only_datasets_are_loaded():
    with pytest.raises(TypeError, match="Dataset"):
        Loader([b"x"])  # type: ignore[arg-type]


def test_a_resumed_pass_continues_the_turns(examples):
    """Restored with as many workers, the rest of the pass comes in the interrupted order."""
    whole = labels(loader(pipeline(examples), num_workers=3))
    for stop in (4, 5, 7):
        interrupted = loader(pipeline(examples), num_workers=3)
        iterator = iter(interrupted)
        head = [next(iterator)["label"].tolist() for _ in range(stop)]
        state = interrupted.state_dict()
        iterator.close()
        again = loader(pipeline(examples), num_workers=3)
        again.load_state_dict(state)
        assert head + labels(again) == whole


def sleepy(records: list[bytes]) -> list[bytes]:
    """Take longer than the loader's timeout."""
    time.sleep(3)
    return records


def test_timeout(examples):
    ds = Dataset(examples[:1], seed=0).batch(4).map(sleepy)
    with pytest.raises(TimeoutError, match=r"within 0\.5 seconds"):
        list(loader(ds, num_workers=1, timeout=0.5))


def test_the_slot_directory_is_private_and_leftovers_are_removed(tmp_path, monkeypatch):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    stale = os.path.join(shm, f"recordkit-loader-{int(gone.stdout)}-stale")
    os.makedirs(stale, exist_ok=True)
    directory = make_directory()
    try:
        assert os.stat(directory).st_mode & 0o777 == 0o700
        assert not os.path.exists(stale)
    finally:
        os.rmdir(directory)


KILLED = """
import os, signal, sys, functools
import numpy as np
import recordkit as rk
from recordkit.data import Dataset, loader

parse = functools.partial(rk.parse_examples, features={"label": rk.FixedLen((), np.int64)})

def note(folder, worker):
    with open(os.path.join(folder, f"worker-{worker}"), "w") as f:
        f.write(str(os.getpid()))

if __name__ == "__main__":
    folder, context, *paths = sys.argv[1:]
    ds = Dataset(paths, seed=0).batch(1).map(parse)  # arrays: each item takes a slot
    it = iter(loader(ds, num_workers=2, multiprocessing_context=context, prefetch_factor=1,
                     worker_init_fn=functools.partial(note, folder)))
    next(it)
    while len(os.listdir(folder)) < 2:
        pass
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("context", CONTEXTS)
def test_workers_of_a_killed_main_process_exit_and_clean_up(tmp_path, examples, context):
    """Workers still reading when the main process is killed stop and remove the pass's directory."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    folder = tmp_path / "pids"
    folder.mkdir()
    main = subprocess.Popen([sys.executable, str(script), str(folder), context, *examples])
    assert main.wait(timeout=120) == -signal.SIGKILL
    workers = [int((folder / name).read_text()) for name in sorted(os.listdir(folder))]
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    left = f"recordkit-loader-{main.pid}-"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        any(_running(pid) for pid in workers) or any(n.startswith(left) for n in os.listdir(shm))
    ):
        time.sleep(0.1)
    assert [pid for pid in workers if _running(pid)] == []
    assert [n for n in os.listdir(shm) if n.startswith(left)] == []


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (an exited process not yet reaped by its new parent does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return alive(pid)


def test_an_endless_loader_restored_at_the_end_of_an_epoch_goes_on(tmp_path):
    path = str(tmp_path / "four.tfrecord")
    with rk.open(path, "w") as writer:
        writer.write_many([b"%d" % i for i in range(4)])
    first = loader(Dataset(path).repeat())
    items = iter(first)
    assert [next(items) for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    state = first.state_dict()
    restored = loader(Dataset(path).repeat())
    restored.load_state_dict(state)
    assert list(itertools.islice(restored, 6)) == [b"0", b"1", b"2", b"3", b"0", b"1"]


def test_a_resumed_pass_keeps_the_turns_when_a_worker_finished_early(tmp_path):
    # Sequential files of 1, 3 and 3 records, one per worker: worker 0 is done after its first turn.
    paths = []
    for f, n in enumerate([1, 3, 3]):
        paths.append(str(tmp_path / f"f{f}.tfrecord.gz"))
        with rk.open(paths[-1], "w") as writer:
            writer.write_many([b"%d-%d" % (f, i) for i in range(n)])

    def make():
        return loader(Dataset(paths), num_workers=3, multiprocessing_context="fork")

    full = list(make())
    assert sorted(full) == sorted(
        b"%d-%d" % (f, i) for f, n in enumerate([1, 3, 3]) for i in range(n)
    )
    for k in range(1, len(full)):
        interrupted = make()
        items = iter(interrupted)
        head = [next(items) for _ in range(k)]
        state = interrupted.state_dict()
        items.close()
        restored = make()
        restored.load_state_dict(state)
        assert head + list(restored) == full, (k, state["delivered"])


def test_every_unknown_length_of_a_pipeline_is_a_no_length_error(tmp_path):
    path = str(tmp_path / "one.tfrecord.gz")
    with rk.open(path, "w") as writer:
        writer.write(b"x")
    for unknown in (
        lambda: len(rk.open(path)),
        lambda: len(Dataset(path)),
        lambda: len(Dataset(path).repeat()),
        lambda: len(loader(Dataset(path).repeat())),
        lambda: len(Dataset(path).filter(bool)),
    ):
        with pytest.raises(rk.errors.NoLengthError):
            unknown()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_saved_after_a_whole_pass_restores_the_next_epoch(tmp_path, workers):
    path = str(tmp_path / "ten.ffr")
    with rk.open(path, "w") as writer:
        writer.write_many([b"%d" % i for i in range(10)])

    def pipeline(repeat=1):
        return Dataset(path, seed=1).shuffle(4).repeat(repeat)

    for make in (
        lambda: pipeline(),
        lambda: loader(pipeline(), num_workers=workers, multiprocessing_context="fork"),
        lambda: loader(pipeline(2), num_workers=workers, multiprocessing_context="fork"),
    ):
        reference = make()
        first, second = list(reference), list(reference)
        saved = make()
        assert list(saved) == first
        state = saved.state_dict()
        restored = make()
        restored.load_state_dict(state)
        assert list(restored) == second
        assert restored.epoch == reference.epoch
