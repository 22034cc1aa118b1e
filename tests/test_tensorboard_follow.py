"""recordkit.tensorboard.follow on log directories that are still being written, and the static readers on
event files that end inside a record.

A child process logs with PyTorch's or tensorboardX's SummaryWriter and opens a second run partway; the
follower's DataFrames, joined, must hold the rows ``scalars`` reads from the finished directory (and
EventAccumulator's values). An event file written a byte at a time must give the same rows at every cut.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import recordkit as rk
from recordkit._proto.tensorboard import event_pb2
from recordkit.errors import ChecksumError, DecodeError, FileChangedError, TruncatedRecordError
from recordkit.formats.tfrecord import frame

pd = pytest.importorskip("pandas")


def rows(df, run=None):
    """A DataFrame's rows as tuples (arrays as lists), of one run or all."""
    if run is not None:
        df = df[df.run.astype(str) == run]
    return [
        tuple(v.tolist() if isinstance(v, np.ndarray) else v for v in row)
        for row in df.astype({key: str for key in ("run", "tag") if key in df}).itertuples(
            index=False
        )
    ]


def joined(batches, columns):
    """The rows of every batch, in order; each batch has exactly ``columns``."""
    for batch in batches:
        assert list(batch.columns) == columns
        assert len(batch)
    return [row for batch in batches for row in rows(batch)]


def per_run(found, static):
    """``found`` (rows) reordered run by run as ``static`` orders runs, each run's rows kept in order."""
    names = list(dict.fromkeys(row[0] for row in rows(static)))
    assert sorted(names) == sorted({row[0] for row in found})
    return [row for name in names for row in found if row[0] == name]


# -- a writer in another process ------------------------------------------------------------------

CHILD = r"""
import os, sys

kind, logdir = sys.argv[1], sys.argv[2]
if kind == "torch":
    from torch.utils.tensorboard import SummaryWriter
    extra = {"new_style": True}
else:
    from tensorboardX import SummaryWriter
    extra = {}


def open_run(name):
    # tensorboardX's flush() does not wait for what its thread queued: that thread writes every second.
    return SummaryWriter(os.path.join(logdir, name), flush_secs=1 if kind == "tensorboardX" else 3600)


def log(writer, step):
    writer.add_scalar("loss", 1.0 / (step + 1), step)
    # PyTorch's new-style scalars carry the scalars plugin's metadata on the first event of the tag only
    writer.add_scalar("acc", step / 8, step, **extra)
    writer.flush()


a = open_run("a")
for step in range(3):
    log(a, step)
print("phase 1", flush=True)
sys.stdin.readline()
b = open_run("b")
for step in range(3, 6):
    log(a, step)
    log(b, step)
print("phase 2", flush=True)
sys.stdin.readline()
a.close()
b.close()
print("done", flush=True)
"""

WRITERS = {"torch": "torch.utils.tensorboard", "tensorboardX": "tensorboardX"}


@pytest.mark.interop
@pytest.mark.parametrize("kind", list(WRITERS))
def test_follow_a_log_directory_that_another_process_writes(kind, tmp_path):
    pytest.importorskip(WRITERS[kind])
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    phase_1, total = 3 * 2, 3 * 2 + 2 * 3 * 2  # rows written before run b exists, and in all
    batches = []
    try:
        assert child.stdout.readline().strip() == "phase 1"
        follower = rk.tensorboard.follow(tmp_path, poll_interval=0.01)
        guard = threading.Timer(
            120, follower.close
        )  # a follower that misses rows would wait forever
        guard.start()
        try:
            for batch in follower:
                batches.append(batch)
                seen = sum(map(len, batches))
                if seen == phase_1:
                    child.stdin.write("\n")  # now run b, and more rows of run a
                    child.stdin.flush()
                    assert child.stdout.readline().strip() == "phase 2"
                elif seen >= total:
                    break
        finally:
            guard.cancel()
            follower.close()
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        assert child.wait(60) == 0
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()
    assert follower.closed
    columns = ["run", "tag", "step", "wall_time", "value"]
    found = joined(batches, columns)
    assert len(found) == total
    with_b = [i for i, batch in enumerate(batches) if "b" in set(batch.run.astype(str))]
    assert sum(map(len, batches[: with_b[0]])) == phase_1  # run b came in a later batch
    static = rk.tensorboard.scalars(tmp_path)
    assert per_run(found, static) == rows(static)
    # the oracle: tensorboard's EventAccumulator on the finished runs (legacy scalars)
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    for run in ("a", "b"):
        acc = accumulator.EventAccumulator(str(tmp_path / run), size_guidance={"scalars": 0})
        acc.Reload()
        expected = [(e.step, e.wall_time, e.value) for e in acc.Scalars("loss")]
        mine = [
            (step, wall, value) for r, tag, step, wall, value in found if (r, tag) == (run, "loss")
        ]
        assert mine == expected
        assert [row[1] for row in found if row[0] == run].count("acc") == len(expected)


# -- the same rows at every cut ---------------------------------------------------------------------


def _event(tag, step, *, simple=None, tensor=None, plugin=None, wall_time=None):
    event = event_pb2.Event(
        wall_time=wall_time if wall_time is not None else 100.0 + step, step=step
    )
    value = event.summary.value.add(tag=tag)
    if simple is not None:
        value.simple_value = simple
    if tensor is not None:
        value.tensor.CopyFrom(tensor)
    if plugin is not None:
        value.metadata.plugin_data.plugin_name = plugin
    return frame(event.SerializeToString())


def _scalar_tensor(x):
    tensor = event_pb2.Event().summary.value.add().tensor
    tensor.dtype = 1
    tensor.tensor_shape.SetInParent()
    tensor.float_val.append(x)
    return tensor


def _text_tensor(s):
    tensor = event_pb2.Event().summary.value.add().tensor
    tensor.dtype = 7
    tensor.tensor_shape.SetInParent()
    tensor.string_val.append(s.encode())
    return tensor


def _log(steps):
    version = event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()
    data = frame(version)
    for step in steps:
        data += _event("loss", step, simple=0.5 * step)
        # the plugin is named on the tag's first event only, as PyTorch writes new-style scalars
        first = step == steps[0]
        data += _event(
            "acc", step, tensor=_scalar_tensor(step / 4), plugin="scalars" if first else None
        )
        data += _event(
            "note", step, tensor=_text_tensor(f"step {step}"), plugin="text" if first else None
        )
    return data


def test_every_cut_of_a_growing_log_directory_gives_the_rows_once(tmp_path):
    """Two runs written 5 bytes at a time (the second created partway), a poll after each write: the rows
    so far are always those of the complete records (what scalars(growing=True) reads then), and all the
    polls' rows together those of the finished directory, for scalars and text."""
    a = _log(range(3))
    b = _log(range(5, 7))
    (tmp_path / "a").mkdir()
    path_a = tmp_path / "a" / "events.out.tfevents.1.host"
    path_b = tmp_path / "b" / "events.out.tfevents.2.host"
    path_a.write_bytes(b"")
    followers = {kind: rk.tensorboard.follow(tmp_path, kind) for kind in ("scalars", "text")}
    found = {kind: [] for kind in followers}
    for cut in range(0, len(a) + len(b), 5):
        path, data, at = (path_a, a, cut) if cut < len(a) else (path_b, b, cut - len(a))
        path.parent.mkdir(exist_ok=True)
        with open(path, "ab") as file:
            file.write(data[at : at + 5])
        for kind, follower in followers.items():
            found[kind].extend(rows(follower.poll()))
        now = rk.tensorboard.scalars(tmp_path, growing=True)
        assert per_run(found["scalars"], now) == rows(now)
    for kind, follower in followers.items():
        assert [run for run, _ in follower.files] == ["a", "b"]
        follower.close()
        static = getattr(rk.tensorboard, kind)(tmp_path)
        assert per_run(found[kind], static) == rows(static)
    assert len(found["scalars"]) == 2 * 5
    assert [row[1:3] for row in found["text"]][:2] == [("note", 0), ("note", 1)]


def test_follow_ends_after_idle_timeout_with_what_the_readers_read(tmp_path):
    tensorboardx = pytest.importorskip("tensorboardX")
    pytest.importorskip("PIL")
    for run in ("x", "y/z"):
        writer = tensorboardx.SummaryWriter(str(tmp_path / run))
        for step in range(3):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
            writer.add_histogram("weights", np.arange(10.0) * step, step)
            writer.add_text("note", f"step {step}", step)
            writer.add_image("img", np.full((3, 4, 5), step * 40, np.uint8), step)
        writer.add_hparams({"lr": 0.5}, {"hparam/acc": 0.75}, name="hp")
        writer.close()
    for kind in ("scalars", "tensors", "histograms", "images", "text", "hparams"):
        static = getattr(rk.tensorboard, kind)(tmp_path)
        assert len(static), kind
        with rk.tensorboard.follow(tmp_path, kind, idle_timeout=0, poll_interval=0.01) as follower:
            batches = list(follower)  # ends: nothing grows
        assert rows(pd.concat(batches)) == rows(static), kind
        assert follower.closed
    loss = list(rk.tensorboard.follow(tmp_path, tags="loss", idle_timeout=0, poll_interval=0.01))
    assert rows(pd.concat(loss)) == rows(rk.tensorboard.scalars(tmp_path, tags=["loss"]))


def test_close_from_another_thread_ends_a_waiting_follow(tmp_path):
    follower = rk.tensorboard.follow(tmp_path, poll_interval=30)  # an empty log directory: it waits
    threading.Timer(0.05, follower.close).start()
    assert list(follower) == []
    assert follower.closed
    assert len(follower.poll()) == 0


def test_follow_refuses_bad_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="waited"):
        list(rk.tensorboard.follow(tmp_path / "missing", idle_timeout=0))
    with pytest.raises(ValueError, match="kind must be one of"):
        rk.tensorboard.follow(tmp_path, "audio")
    with pytest.raises(ValueError, match="hparams have no tags"):
        rk.tensorboard.follow(tmp_path, "hparams", tags="x")
    with pytest.raises(ValueError, match="poll"):
        rk.tensorboard.follow(tmp_path, poll_interval=0)
    with pytest.raises(ValueError, match="idle_timeout"):
        rk.tensorboard.follow(tmp_path, idle_timeout=-1)


def test_errors_in_appended_records_name_the_record_in_the_file(tmp_path):
    """Decoding errors locate the record by its index and byte offset in the whole file, not in the part
    read by the last poll; damage raises; a replaced file raises FileChangedError."""
    path = tmp_path / "events.out.tfevents.1.host"
    good = _event("loss", 1, simple=1.0) + _event("loss", 2, simple=2.0)
    path.write_bytes(good)
    follower = rk.tensorboard.follow(tmp_path)
    assert rows(follower.poll())[1][1:] == ("loss", 2, 102.0, 2.0)
    with open(path, "ab") as file:
        file.write(_event("loss", 3, simple=3.0) + frame(b"\x0a\xff\xff"))
    with pytest.raises(DecodeError, match=f"record 3 at byte {len(good) * 3 // 2}"):
        follower.poll()
    follower.close()

    path.write_bytes(good)
    follower = rk.tensorboard.follow(path)  # one file: run "."
    assert list(follower.poll().run) == [".", "."]
    damaged = bytearray(good)
    damaged[len(good) // 2 + 14] ^= 1
    with open(path, "ab") as file:
        file.write(damaged)
    assert len(follower.poll()) == 1  # the record before the damaged one first
    with pytest.raises(ChecksumError):
        follower.poll()
    with pytest.raises(ChecksumError):  # and from then on
        follower.poll()
    follower.close()

    path.write_bytes(good)
    with rk.tensorboard.follow(tmp_path, poll_interval=0.01) as follower:
        assert len(follower.poll()) == 2
        replacement = tmp_path / "new"
        replacement.write_bytes(good)
        os.replace(replacement, path)
        with pytest.raises(FileChangedError):
            follower.poll()


# -- the static readers on a file still being written ---------------------------------------------


def test_a_partial_last_record_raises_and_says_what_to_do_or_is_left_out(tmp_path):
    """A file that ends inside a record raises TruncatedRecordError naming growing=True and follow;
    with growing=True the complete records are read (and damage still raises)."""
    path = Path(tmp_path) / "events.out.tfevents.1.host"
    data = _log(range(2))
    complete = _log(range(2)[:1]) + _event("loss", 1, simple=0.5)
    path.write_bytes(complete + data[len(complete) : len(complete) + 20])
    with pytest.raises(
        TruncatedRecordError, match=r"growing=True.*recordkit\.tensorboard\.follow"
    ) as info:
        rk.tensorboard.scalars(tmp_path)
    assert (info.value.path, info.value.offset) == (str(path), len(complete))
    for kind in ("scalars", "text", "tensors"):
        partial = getattr(rk.tensorboard, kind)(tmp_path, growing=True)
        path.write_bytes(complete)
        assert rows(partial) == rows(getattr(rk.tensorboard, kind)(tmp_path)), kind
        path.write_bytes(complete + data[len(complete) : len(complete) + 20])
    assert len(rk.tensorboard.scalars(tmp_path, growing=True)) == 3
    bad = bytearray(path.read_bytes())
    bad[len(complete) + 1] ^= 1  # the partial record's length: its checksum is there
    path.write_bytes(bytes(bad))
    with pytest.raises(ChecksumError, match="length checksum"):
        rk.tensorboard.scalars(tmp_path, growing=True)


def test_follow_a_glob_and_a_list_of_runs(tmp_path):
    """A pattern is matched at every poll (it may match nothing at first): runs created later are followed,
    named as the readers name them; a list of run directories is followed as the readers read it."""

    def write(run, step, tag="loss"):
        event = event_pb2.Event(wall_time=1.0 + step, step=step)
        event.summary.value.add(tag=tag, simple_value=step / 2)
        directory = tmp_path / "logs" / run
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / "events.out.tfevents.1.host", "ab") as file:
            file.write(frame(event.SerializeToString()))

    pattern = str(tmp_path / "logs" / "*")
    with rk.tensorboard.follow(pattern, poll_interval=0.01) as follower:
        assert follower.sources == pattern
        assert len(follower.poll()) == 0
        write("a", 1)
        assert rows(follower.poll()) == [("a", "loss", 1, 2.0, 0.5)]
        write("b", 2)
        write("a", 3)
        assert rows(follower.poll()) == [("a", "loss", 3, 4.0, 1.5), ("b", "loss", 2, 3.0, 1.0)]
        assert [run for run, _ in follower.files] == ["a", "b"]
    runs = [tmp_path / "logs" / "a", tmp_path / "logs" / "b"]
    batches = list(rk.tensorboard.follow(runs, idle_timeout=0))
    static = rk.tensorboard.scalars(pattern)
    assert joined(batches, list(static.columns)) == rows(static)
    assert [row[0] for row in rows(static)] == ["a", "a", "b"]
    with pytest.raises(FileNotFoundError) as missing:
        list(rk.tensorboard.follow([runs[0], tmp_path / "logs" / "c"], idle_timeout=0))
    assert missing.value.filename == str(tmp_path / "logs" / "c")


def test_follow_text_tags_select_what_add_text_logged_under_them(tmp_path):
    event = event_pb2.Event(wall_time=1.0, step=1)
    value = event.summary.value.add(tag="note/text_summary")
    value.metadata.plugin_data.plugin_name = "text"
    value.tensor.dtype = 7  # DT_STRING
    value.tensor.string_val.append(b"hello")
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(frame(event.SerializeToString()))
    batches = list(rk.tensorboard.follow(tmp_path, "text", tags=["note"], idle_timeout=0))
    assert joined(batches, ["run", "tag", "step", "wall_time", "value"]) == [
        (".", "note/text_summary", 1, 1.0, "hello")
    ]


def test_follow_waits_for_a_log_directory_created_after_it_started(tmp_path):
    logs = tmp_path / "logs"
    event = event_pb2.Event(wall_time=1.5, step=1)
    event.summary.value.add(tag="loss", simple_value=0.5)

    def start_training() -> None:
        (logs / "run").mkdir(parents=True)
        with rk.open(logs / "run" / "events.out.tfevents.1.host", "w") as writer:
            writer.write(event.SerializeToString())

    with rk.tensorboard.follow(logs, idle_timeout=30, poll_interval=0.01) as follower:
        assert len(follower.poll()) == 0  # no log directory yet: nothing, and no error
        threading.Timer(0.1, start_training).start()
        batch = next(follower)
    assert rows(batch) == [("run", "loss", 1, 1.5, 0.5)]
    with pytest.raises(FileNotFoundError, match="waited") as caught:
        list(rk.tensorboard.follow(tmp_path / "never", idle_timeout=0.05, poll_interval=0.01))
    assert caught.value.filename == str(tmp_path / "never")


def test_a_recordkit_writers_temporary_file_is_not_read_as_a_second_log(tmp_path):
    from recordkit.io.atomic import temporary_name

    event = event_pb2.Event(wall_time=1.5, step=1)
    event.summary.value.add(tag="loss", simple_value=0.5)
    final = tmp_path / "run" / "events.out.tfevents.1.host"
    final.parent.mkdir()
    with rk.open(final, "w") as writer:
        writer.write(event.SerializeToString())
    # What a writer of the same name has open at this moment, with the same events: hidden, then renamed.
    Path(temporary_name(str(final))).write_bytes(final.read_bytes())
    assert rows(rk.tensorboard.scalars(tmp_path)) == [("run", "loss", 1, 1.5, 0.5)]
    with rk.tensorboard.follow(tmp_path, idle_timeout=0.2, poll_interval=0.01) as follower:
        assert rows(follower.poll()) == [("run", "loss", 1, 1.5, 0.5)]
