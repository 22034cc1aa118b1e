"""on_error="skip": reading goes on through damaged records, exactly the intact records come out, once each.

The damage is made here, in random places from a seeded generator, and the intact records are worked out
from where it was made (not from recordkit's own recovery): a bit flipped in a record's header or payload
loses that record, garbage inserted between two records loses none, garbage inserted inside a record loses
it, and a cut file loses every record that does not end before the cut.
"""

from __future__ import annotations

import re
import struct
import threading
import warnings
from collections import Counter

import numpy as np
import pytest

import recordkit as rk
from recordkit import recover
from recordkit.data import Dataset
from recordkit.errors import ChecksumError, CorruptRecordError, DataLossWarning
from recordkit.formats.tfrecord import frame

N = 40


def _records(rng: np.random.Generator, tag: int, n: int = N) -> list[bytes]:
    return [f"{tag:02d}-{i:03d}:".encode() + rng.bytes(int(rng.integers(4, 40))) for i in range(n)]


def _flip(data: bytearray, at: int, rng: np.random.Generator) -> None:
    data[at] ^= 1 << int(rng.integers(8))


def damaged_tfrecord(rng: np.random.Generator, records: list[bytes]) -> tuple[bytes, set[int]]:
    """A TFRecord file of ``records`` with 1 to 4 damaged places; returns it and the lost indexes."""
    frames = [bytearray(frame(r)) for r in records]
    after: dict[int, bytes] = {}
    lost: set[int] = set()
    n = len(records)
    sites = rng.choice(n - 1, size=int(rng.integers(1, 4)), replace=False)
    for k in map(int, sites):
        kind = rng.choice(["header", "payload", "crc", "garbage-between", "garbage-inside"])
        f = frames[k]
        if kind == "header":
            _flip(f, int(rng.integers(0, 12)), rng)
        elif kind == "payload":
            _flip(f, int(rng.integers(12, len(f) - 4)), rng)
        elif kind == "crc":
            _flip(f, int(rng.integers(len(f) - 4, len(f))), rng)
        elif kind == "garbage-between":
            after[k] = bytes(rng.integers(1, 256, size=int(rng.integers(1, 30)), dtype=np.uint8))
            continue
        else:
            at = int(rng.integers(1, len(f)))
            f[at:at] = rng.bytes(int(rng.integers(1, 20)))
        lost.add(k)
    data = b"".join(bytes(f) + after.get(k, b"") for k, f in enumerate(frames))
    if rng.random() < 0.4:  # cut inside the last record
        start = len(data) - len(frames[-1])
        data = data[: start + int(rng.integers(1, len(frames[-1])))]
        lost.add(n - 1)
    return data, lost


def damaged_ffrecord(
    rng: np.random.Generator, records: list[bytes], path: str
) -> tuple[bytes, set[int]]:
    """An FFRecord file of ``records`` with damaged samples (payload, checksum entry) or a cut end."""
    with rk.open(path, "w", format="ffrecord") as writer:
        writer.write_many(records)
    with open(path, "rb") as file:
        data = bytearray(file.read())
    n = struct.unpack_from("<q", data, 4)[0]
    assert n == len(records)
    crcs_at = 12
    offsets = struct.unpack_from(f"<{n}q", data, 12 + 4 * n)
    ends = [*offsets[1:], len(data)]
    lost: set[int] = set()
    for k in map(int, rng.choice(n, size=int(rng.integers(1, 4)), replace=False)):
        if rng.random() < 0.5:
            _flip(data, int(rng.integers(offsets[k], ends[k])), rng)
        else:
            _flip(data, crcs_at + 4 * k + int(rng.integers(4)), rng)
        lost.add(k)
    if rng.random() < 0.4:
        k = int(rng.integers(n // 2, n))
        cut = int(rng.integers(offsets[k] + 1, ends[k]))
        data = data[:cut]
        lost.update(range(k, n))
    return bytes(data), lost


def make_files(tmp_path, fmt: str, seed: int, files: int = 4):
    """``files`` files (the first one intact), their records, and the records expected to survive."""
    rng = np.random.default_rng(seed)
    paths, expected, damaged = [], [], []
    for tag in range(files):
        records = _records(rng, tag)
        path = str(tmp_path / f"part-{tag}.{'tfrecord' if fmt == 'tfrecord' else 'ffr'}")
        if tag == 0:
            with rk.open(path, "w", format=fmt) as writer:
                writer.write_many(records)
            lost: set[int] = set()
        elif fmt == "tfrecord":
            data, lost = damaged_tfrecord(rng, records)
            with open(path, "wb") as file:
                file.write(data)
        else:
            data, lost = damaged_ffrecord(rng, records, path)
            with open(path, "wb") as file:
                file.write(data)
        paths.append(path)
        expected.extend(r for i, r in enumerate(records) if i not in lost)
        if lost or tag:
            damaged.append(path)
    return paths, expected, damaged


def _read(ds: Dataset) -> tuple[list[bytes], list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = list(ds)
    return items, [w for w in caught if issubclass(w.category, DataLossWarning)]


def _flat(items):
    return [r for item in items for r in (item if isinstance(item, list) else [item])]


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
@pytest.mark.parametrize("seed", range(3))
def test_skip_yields_exactly_the_intact_records_once_each(tmp_path, fmt, seed):
    paths, expected, damaged = make_files(tmp_path, fmt, seed)
    # The damage is where it was made: recovery of each file at rest agrees (a cross-check).
    salvaged = []
    for path in paths:
        with recover.scan(path, warn=False) as scanned:
            salvaged.extend(scanned)
    assert salvaged == expected

    with pytest.raises(CorruptRecordError):
        list(Dataset(paths))  # on_error="raise" is the default

    ds = Dataset(paths, on_error="skip")
    items, caught = _read(ds)
    assert items == expected  # in file order, nothing else
    assert sorted(str(w.message).split(":")[0] for w in caught) == sorted(damaged)
    for w in caught:
        assert "skipped" in str(w.message)
    skipped = ds.state_dict()["skipped"]
    assert skipped["files"] == sorted(damaged)
    assert skipped["records"] + skipped["ranges"] >= len(damaged)

    # Shuffled globally and split between 3 shards: together, each intact record once.
    together: Counter[bytes] = Counter()
    for rank in range(3):
        shard = Dataset(paths, on_error="skip", rank=rank, world_size=3, seed=seed).shuffle()
        together.update(_read(shard)[0])
    assert together == Counter(expected)


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
def test_max_skipped_raises_the_original_error(tmp_path, fmt):
    paths, expected, damaged = make_files(tmp_path, fmt, seed=7)
    total = Dataset(paths, on_error="skip")
    _read(total)
    counts = total.state_dict()["skipped"]
    limit = counts["records"] + counts["ranges"]
    # Exactly the limit: no error.
    assert _read(Dataset(paths, on_error="skip", max_skipped=limit))[0] == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        with pytest.raises(CorruptRecordError) as caught:
            list(Dataset(paths, on_error="skip", max_skipped=limit - 1))
    assert caught.value.path in damaged
    with pytest.raises(ValueError, match="on_error"):
        Dataset(paths, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_skipped"):
        Dataset(paths, on_error="skip", max_skipped=-1)
    with pytest.raises(ValueError, match='pass on_error="skip" with it'):
        Dataset(paths, max_skipped=3)


def _resume_case(paths, make, stop_at):
    """Read ``stop_at`` items, save, restore in a fresh pipeline: the rest is exactly what was left."""
    whole = _read(make())[0]
    first = make()
    it = iter(first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        head = [next(it) for _ in range(stop_at)]
        state = first.state_dict()
        it.close()
    second = make()
    second.load_state_dict(state)
    rest = _read(second)[0]
    assert head + rest == whole
    return whole


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
def test_resume_after_a_skip_gives_exactly_the_rest(tmp_path, fmt):
    paths, expected, _ = make_files(tmp_path, fmt, seed=11)
    # Stop after the first damaged file, in order, batched, and through a shuffle buffer.
    n_first_two = len([r for r in expected if r.startswith((b"00-", b"01-"))])
    whole = _resume_case(paths, lambda: Dataset(paths, on_error="skip"), n_first_two + 3)
    assert whole == expected
    whole = _resume_case(
        paths, lambda: Dataset(paths, on_error="skip", seed=3).shuffle(16).batch(5), 9
    )
    assert sorted(_flat(whole)) == sorted(expected)
    whole = _resume_case(paths, lambda: Dataset(paths, on_error="skip", seed=3).shuffle(), 50)
    assert sorted(whole) == sorted(expected)


def test_payload_errors_of_map_are_not_skipped(tmp_path):
    paths, expected, _ = make_files(tmp_path, "tfrecord", seed=2)

    def decode(record: bytes) -> bytes:
        if record == expected[5]:
            raise rk.DecodeError("not an Example")
        return record

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        with pytest.raises(rk.DecodeError):
            list(Dataset(paths, on_error="skip").map(decode))


def test_a_hole_keeps_the_numbering_of_a_file_whose_index_is_intact(tmp_path):
    # Only a payload is damaged: the file keeps its numbering (split between shards by its index) and the
    # record is a hole; the DataLossWarning names the record and its byte offset.
    records = [f"r{i}".encode() * 3 for i in range(20)]
    data = bytearray(b"".join(frame(r) for r in records))
    at = sum(len(frame(r)) for r in records[:7]) + 13
    data[at] ^= 0x10
    path = tmp_path / "one.tfrecord"
    path.write_bytes(bytes(data))
    first = Dataset(str(path), on_error="skip", rank=0, world_size=2)
    with pytest.warns(DataLossWarning, match=r"record 7 at byte \d+\)") as caught:
        got = list(first)
    assert len(caught) == 1
    assert first.state_dict()["skipped"]["records"] == 1
    got += list(Dataset(str(path), on_error="skip", rank=1, world_size=2))  # no damage, no warning
    assert got == records[:7] + records[8:]
    with pytest.raises(ChecksumError):
        list(Dataset(str(path)))


def _loader_run(paths, num_workers, stop_at=None, state=None, context="fork"):
    from recordkit.data import loader

    got = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Planning the workers' shares may already find a damaged file: warned about here too.
        ld = loader(
            Dataset(paths, on_error="skip", seed=5).shuffle(8).batch(4),
            num_workers=num_workers,
            multiprocessing_context=context,
        )
        if state is not None:
            ld.load_state_dict(state)
        for item in ld:
            got.append(list(item))
            if stop_at is not None and len(got) == stop_at:
                break
    losses = [w for w in caught if issubclass(w.category, DataLossWarning)]
    return got, ld.state_dict(), losses


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
def test_loader_with_two_workers_skips_counts_and_resumes_exactly(tmp_path, fmt):
    paths, expected, damaged = make_files(tmp_path, fmt, seed=21)
    whole, state, losses = _loader_run(paths, 2)
    assert sorted(_flat(whole)) == sorted(expected)
    # The workers' damage is warned about in this process, once per file, and counted in its state.
    assert sorted(str(w.message).split(":")[0] for w in losses) == sorted(damaged)
    assert state["skipped"]["files"] == sorted(damaged)
    head, saved, _ = _loader_run(paths, 2, stop_at=5)
    rest, _, _ = _loader_run(paths, 2, state=saved)
    assert head + rest == whole
    # Resumed with one worker instead of two: still every intact record once.
    rest1, _, _ = _loader_run(paths, 1, state=saved)
    assert sorted(_flat(head + rest1)) == sorted(expected)


def test_loader_max_skipped_counts_every_worker(tmp_path):
    # Two damaged samples, one in each worker's half of the file: each worker alone stays within
    # max_skipped=1, the loader (all workers together) does not.
    records = [f"sample {i}".encode() * 4 for i in range(20)]
    path = str(tmp_path / "two.ffr")
    with rk.open(path, "w", format="ffrecord") as writer:
        writer.write_many(records)
    with open(path, "rb") as file:
        data = bytearray(file.read())
    offsets = struct.unpack_from("<20q", data, 12 + 4 * 20)
    for k in (3, 15):
        data[offsets[k] + 2] ^= 0x01
    with open(path, "wb") as file:
        file.write(bytes(data))
    from recordkit.data import loader

    def run(max_skipped):
        ds = Dataset(path, on_error="skip", max_skipped=max_skipped)
        return list(loader(ds, num_workers=2, multiprocessing_context="fork"))

    with pytest.warns(DataLossWarning):
        assert sorted(run(2)) == sorted(records[:3] + records[4:15] + records[16:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        with pytest.raises(ChecksumError):
            run(1)


def test_nearby_holes_of_an_ffrecord_file_cost_a_bounded_number_of_reads(tmp_path, monkeypatch):
    # Three holes within a few hundred samples: every sample is read (and its checksum computed) a
    # bounded number of times, not once more per sample between two holes.
    from recordkit.formats import ffrecord

    n = 3000
    records = [b"s%05d" % i * 10 for i in range(n)]
    path = tmp_path / "holes.ffr"
    with rk.open(path, "w", format="ffrecord") as writer:
        writer.write_many(records)
    data = bytearray(path.read_bytes())
    offsets = struct.unpack_from(f"<{n}q", data, 12 + 4 * n)
    holes = (100, 400, 700)
    for k in holes:
        data[offsets[k] + 40] ^= 1
    path.write_bytes(bytes(data))
    checked = Counter()
    crc32 = ffrecord._crc.crc32
    samples = {r[:6] for r in records}

    def counting(buffer, *args):
        if bytes(buffer[:6]) in samples:  # not the header's checksum
            checked[bytes(buffer[:6])] += 1
        return crc32(buffer, *args)

    monkeypatch.setattr(ffrecord._crc, "crc32", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        got = list(Dataset(str(path), on_error="skip"))
    assert got == [r for i, r in enumerate(records) if i not in holes]
    assert set(checked) == samples
    # At most read in order, then in a chunk, then alone; a damaged sample's checksum is computed twice a
    # read (once more for the error).
    damaged = {records[k][:6] for k in holes}
    assert max(n for key, n in checked.items() if key not in damaged) <= 3, checked.most_common(6)
    assert max(checked[key] for key in damaged) <= 6, checked.most_common(3)


def _named_holes(caught) -> list[int]:
    """The record numbers the DataLossWarnings name, in order, with repeats."""
    named = []
    for w in caught:
        if issubclass(w.category, DataLossWarning):
            where = re.search(r"\((?:records?) ([^)]*)\)", str(w.message))
            assert where is not None, str(w.message)
            named += [int(part.split()[0]) for part in where.group(1).split(", ")]
    return named


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_warnings_name_every_hole_once_with_or_without_workers(tmp_path, num_workers):
    # Holes 3 and 22 of one file: with two workers each reads one half, and finds one hole.
    from recordkit.data import loader

    records = [f"r{i}".encode() * 3 for i in range(30)]
    data = bytearray(b"".join(frame(r) for r in records))
    for k in (3, 22):
        data[sum(len(frame(r)) for r in records[:k]) + 13] ^= 0x10
    path = tmp_path / "holes.tfrecord"
    path.write_bytes(bytes(data))
    ld = loader(
        Dataset(str(path), on_error="skip"), num_workers=num_workers, multiprocessing_context="fork"
    )
    for epoch in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = list(ld)
        assert sorted(got) == sorted(records[:3] + records[4:22] + records[23:])
        assert ld.state_dict()["skipped"]["records"] == 2  # counted every epoch, named once
        assert sorted(_named_holes(caught)) == ([3, 22] if epoch == 0 else [])


class _TakenMidAppend(list):
    """A list of reports whose append lets another thread take the reports first (the interleaving of a
    worker whose .prefetch() thread reports a hole just as the worker's main thread takes them)."""

    def __init__(self, log) -> None:
        super().__init__()
        self.log = log
        self.taken: list[list[dict]] = []

    def append(self, event) -> None:
        def take() -> None:
            # Copied at once, as a worker pickles what it takes.
            self.taken.append(list(self.log.take_pending()))

        taker = threading.Thread(target=take)
        taker.start()
        taker.join(0.5)  # done unless the hand-over waits for this append (then it takes it after)
        super().append(event)
        self.thread = taker


def test_a_report_added_while_the_reports_are_taken_is_not_lost():
    from recordkit.datasets.damage import DamageLog

    log = DamageLog()
    log.forward = True
    log.pending = pending = _TakenMidAppend(log)
    log.hole("f.tfrecord", 3, ChecksumError("bad", path="f.tfrecord", index=3, offset=60))
    pending.thread.join()
    reported = [e for taken in pending.taken for e in taken] + list(log.take_pending())
    assert [e["records"] for e in reported] == [[[3, 60]]]


def test_map_dataset_leaves_damaged_records_out_of_a_batch(tmp_path):
    pytest.importorskip("torch")
    import recordkit.integrations.torch as torch_integration

    paths, expected, damaged = make_files(tmp_path, "ffrecord", seed=5)
    with warnings.catch_warnings(
        record=True
    ) as caught:  # when planning (a cut file), reading (holes)
        warnings.simplefilter("always")
        ds = torch_integration.MapDataset(paths, on_error="skip")
        batch = ds[list(range(len(ds)))]
        ds.close()
    assert all(issubclass(w.category, DataLossWarning) for w in caught)
    assert sorted(batch) == sorted(expected)
    assert sorted({str(w.message).split(":")[0] for w in caught}) == sorted(damaged)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = torch_integration.dataloader(
            torch_integration.MapDataset(paths, on_error="skip"), batch_size=8, to="numpy"
        )
        got = [r for b in loader for r in b]
    assert sorted(got) == sorted(expected)
    assert {str(w.message).split(":")[0] for w in caught} == set(damaged)


def test_map_dataset_workers_forward_what_they_skip(tmp_path):
    pytest.importorskip("torch")
    import recordkit.integrations.torch as torch_integration

    # Files recovered whole when the dataset is made, and one with holes that the workers find as they
    # read (an FFRecord sample's payload damaged: its header and checksums still read).
    paths, expected, damaged = make_files(tmp_path, "ffrecord", seed=5)
    records = _records(np.random.default_rng(1), 9)
    holes = tmp_path / "holes.ffr"
    with rk.open(holes, "w", format="ffrecord") as writer:
        writer.write_many(records)
    data = bytearray(holes.read_bytes())
    for k in (7, 30):
        data[struct.unpack_from("<q", data, 12 + 4 * N + 8 * k)[0] + 2] ^= 1
    holes.write_bytes(data)
    paths, damaged = [*paths, str(holes)], sorted([*damaged, str(holes)])
    expected += [r for i, r in enumerate(records) if i not in (7, 30)]

    def make(workers: int, **options):
        ds = torch_integration.MapDataset(paths, on_error="skip", **options)
        return (
            torch_integration.dataloader(ds, batch_size=8, to="numpy", num_workers=workers)
            if workers
            else torch_integration.dataloader(ds, batch_size=8, to="numpy")
        )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        alone = make(0)
        assert sorted(r for b in alone for r in b) == sorted(expected)
        alone.dataset.close()  # warns about the holes its readers found

    loader = None
    for epoch in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader = loader or make(2)  # a file cut short is recovered when the dataset is made
            got = [r for b in loader for r in b]
        assert sorted(got) == sorted(expected)
        # In the main process, once per damaged file (and process): the workers forward, not warn. The
        # holes file is read by both workers, and every hole is named, once.
        warned = sorted({str(w.message).split(":")[0] for w in caught})
        assert warned == (sorted(damaged) if epoch == 0 else [])
        of_holes = [w for w in caught if str(w.message).startswith(f"{holes}:")]
        assert sorted(_named_holes(of_holes)) == ([7, 30] if epoch == 0 else [])
        assert all(issubclass(w.category, DataLossWarning) for w in caught)
        counts = alone.state_dict()["skipped"]
        assert counts["files"] == sorted(damaged)
        assert loader.state_dict()["skipped"] == counts  # every worker's, counted once per epoch
    limit = counts["records"] + counts["ranges"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        assert sorted(r for b in make(2, max_skipped=limit) for r in b) == sorted(expected)
        with pytest.raises(CorruptRecordError):
            list(make(2, max_skipped=limit - 1))


@pytest.mark.parametrize("fmt", ["tfrecord", "ffrecord"])
def test_dask_reads_the_intact_records(tmp_path, fmt):
    rkdask = pytest.importorskip("recordkit.integrations.dask")
    paths, expected, damaged = make_files(tmp_path, fmt, seed=31)
    bag = rkdask.read_records(paths, on_error="skip", records_per_range=16)
    with pytest.warns(DataLossWarning) as caught:
        got = bag.compute(scheduler="sync")
    assert sorted(got) == sorted(expected)
    assert {str(w.message).split(":")[0] for w in caught} == set(damaged)
    with pytest.raises(CorruptRecordError):
        rkdask.read_records(paths).compute(scheduler="sync")
    strict = rkdask.read_records(paths, on_error="skip", max_skipped=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataLossWarning)
        with pytest.raises(CorruptRecordError):
            strict.compute(scheduler="sync")


@pytest.mark.slow
@pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\..*")
def test_ray_reads_the_intact_records(tmp_path):
    ray = pytest.importorskip("ray")
    rkray = pytest.importorskip("recordkit.integrations.ray")
    paths, expected, _ = make_files(tmp_path, "tfrecord", seed=41)
    (tmp_path / "ffr").mkdir()
    ffr, ffr_expected, _ = make_files(tmp_path / "ffr", "ffrecord", seed=42)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        for files, intact in ((paths, expected), (ffr, ffr_expected)):
            rows = rkray.read_records(files, on_error="skip").take_all()
            assert sorted(row["bytes"] for row in rows) == sorted(intact)
        with pytest.raises(Exception, match=r"checksum|truncated|ends"):
            rkray.read_records(paths).take_all()
    finally:
        ray.shutdown()


def test_arrayrecord_skips_damaged_chunks(tmp_path):
    from _array_record import write_array_record

    from recordkit.formats import get_format

    rng = np.random.default_rng(51)
    records = _records(rng, 0, 30)
    # One record per uncompressed chunk: a record's bytes sit 43 bytes after its chunk's start (a 40-byte
    # chunk header, then the data's compression byte and the varint and byte of its one record size).
    clean = write_array_record(
        tmp_path / "clean.array_record", records, "group_size:1,uncompressed"
    )
    with open(clean, "rb") as file:
        data = bytearray(file.read())
    whole = bytes(data)
    starts = [data.find(r) - 43 for r in records]
    assert all(
        s > 0 and s >> 16 == (s + 43 + len(r)) >> 16 for s, r in zip(starts, records, strict=True)
    )
    headers, payloads = [3, 11], [20]
    for k in headers:
        _flip(data, starts[k] + int(rng.integers(0, 40)), rng)  # a chunk header: always checked
    for k in payloads:
        _flip(data, starts[k] + 43 + int(rng.integers(0, len(records[k]))), rng)  # its data
    damaged = str(tmp_path / "damaged.array_record")
    with open(damaged, "wb") as file:
        file.write(bytes(data))
    cut = str(tmp_path / "cut.array_record")  # cut inside record 25's chunk: footer and tail lost
    with open(cut, "wb") as file:
        file.write(whole[: starts[25] + 50])

    lost = set(headers + payloads)
    intact = [r for i, r in enumerate(records) if i not in lost]
    with pytest.warns(DataLossWarning):
        got = list(Dataset([damaged, cut], on_error="skip"))
    assert got == intact + records[:25]  # the data hashes are checked by default
    fmt = get_format("arrayrecord")
    fmt.check_data = False
    try:
        with pytest.warns(DataLossWarning, match="damaged record"):
            got = list(Dataset(damaged, on_error="skip"))
    finally:
        fmt.check_data = True
    # Without the data hashes the damaged data is read as is: what turning them off costs.
    assert [r for r in got if r not in records] != []


# -- a file recovered whole is held as byte ranges, read on demand ------------------------------------


def _of_payload(i: int) -> bytes:
    return rk.encode_ofrecord({"id": [i], "text": [f"sample {i}".encode()]})


def _damaged_file(rng: np.random.Generator, tmp_path, fmt: str, name: str) -> str:
    """A TFRecord or OFRecord file with damage in random places (framing too)."""
    if fmt == "tfrecord":
        data, _ = damaged_tfrecord(rng, _records(rng, 0))
    else:
        clean = tmp_path / f"{name}-clean.ofrecord"
        with rk.open(clean, "w", format="ofrecord") as writer:
            writer.write_many(_of_payload(i) for i in range(N))
        raw = bytearray(clean.read_bytes())
        for _ in range(int(rng.integers(1, 4))):
            _flip(raw, int(rng.integers(len(raw))), rng)
        cut = int(rng.integers(len(raw) - 20, len(raw) + 1))
        data = bytes(raw[:cut])
    path = tmp_path / f"{name}.{fmt}"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("fmt", ["tfrecord", "ofrecord"])
def test_recovered_reads_by_range_equal_what_recover_scan_yields(tmp_path, fmt):
    from recordkit.datasets.damage import DAMAGED, DamageLog, SkippingReader

    rng = np.random.default_rng(5)
    framing = 0
    for case in range(12):
        path = _damaged_file(rng, tmp_path, fmt, f"f{case}")
        with recover.scan(path, format=fmt, warn=False) as scanned:
            expected = list(scanned)
        log = DamageLog()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataLossWarning)
            with SkippingReader(lambda p=path: rk.open(p, format=fmt), path, log, fmt) as reader:
                got = [r for r in reader if r is not DAMAGED]
                if fmt == "tfrecord":  # checksummed: in order, exactly the intact records
                    assert got == expected
                if path in log.recovered:  # read as recovered: numbered by the intact records
                    framing += 1
                    assert list(reader) == expected
                    assert len(reader) == len(expected)
                    order = rng.permutation(len(expected)).tolist()
                    assert reader.read(order) == [expected[i] for i in order]
                    assert (
                        list(reader.iter_from(len(expected) // 2)) == expected[len(expected) // 2 :]
                    )
                    assert log.recovered[path].payloads is None  # byte ranges only
                else:
                    assert got == expected
    assert framing >= 6


def test_a_big_file_with_damaged_framing_is_not_held_in_memory(tmp_path):
    import tracemalloc

    from recordkit.datasets.damage import DamageLog, SkippingReader

    rng = np.random.default_rng(0)
    records = [rng.bytes(10_000) for _ in range(1600)]  # 16 MB
    frames = [bytearray(frame(r)) for r in records]
    frames[3][2] ^= 0x40  # a bad length byte: the framing is lost, the file is recovered whole
    path = str(tmp_path / "big.tfrecord")
    with open(path, "wb") as file:
        file.write(b"".join(map(bytes, frames)))
    del frames
    log = DamageLog()
    tracemalloc.start()
    try:
        sizes = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with SkippingReader(lambda: rk.open(path), path, log) as reader:
                sizes.extend(len(record) for record in reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [w.category for w in caught] == [DataLossWarning]
    assert sizes == [10_000] * 1599
    # The 16 MB of intact payloads were never held at once (the resynchronisation's own work is bounded,
    # a few MB; the recovered file is kept as 16 bytes a record).
    assert peak < 8_000_000
    assert log.recovered[path].spans.nbytes == 16 * 1599  # type: ignore[union-attr]
    # Read again (in a new epoch, shuffled: by range, in any order): the same records.
    again = Dataset(path, on_error="skip", seed=1).shuffle()
    with pytest.warns(DataLossWarning):
        assert sorted(again) == sorted(records[:3] + records[4:])


def test_a_damaged_compressed_file_beyond_the_limit_is_refused(tmp_path, monkeypatch):
    import gzip

    from recordkit.datasets import damage
    from recordkit.errors import UnsupportedOperationError

    rng = np.random.default_rng(1)
    records = _records(rng, 0)
    frames = [bytearray(frame(r)) for r in records]
    frames[5][1] ^= 0x10  # a bad length inside a GZIP file: recovered from the inflated stream
    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.tfrecord.gz"
        path.write_bytes(gzip.compress(b"".join(map(bytes, frames))))
        paths.append(str(path))
    expected = records[:5] + records[6:]
    size = sum(len(f) for f in frames)
    monkeypatch.setattr(damage, "HELD_LIMIT", size)  # one file's payloads fit, not two
    ds = Dataset(paths, on_error="skip")
    with pytest.warns(DataLossWarning):
        assert list(ds) == expected + expected
    log = ds._catalog.damage
    assert [found.payloads is not None for found in log.recovered.values()] == [False, True]
    assert list(ds) == expected + expected  # the first one recovered again (warned once only)
    assert [found.payloads is not None for found in log.recovered.values()] == [False, True]
    monkeypatch.setattr(damage, "HELD_LIMIT", size - 1)
    with pytest.raises(UnsupportedOperationError, match=r"a\.tfrecord\.gz.*exceed the limit"):
        list(Dataset(paths, on_error="skip"))


@pytest.mark.parametrize("start", [0, 31, 50])
def test_reading_from_a_position_past_a_damaged_length_skips_it(tmp_path, start):
    """A reader started past record 0 of an unindexed TFRecord scans up to there, and meets the damage
    then (a spawned loader worker, which knows nothing the main process found, starts so)."""
    from recordkit.datasets.damage import DamageLog, SkippingReader

    records = [b"record %d" % i for i in range(60)]
    path = tmp_path / "length.tfrecord"
    frames = [frame(r) for r in records]
    data = bytearray(b"".join(frames))
    data[sum(map(len, frames[:30]))] ^= 0x40  # the length field of record 30
    path.write_bytes(data)
    reader = SkippingReader(lambda: rk.open(path), str(path), DamageLog())
    with pytest.warns(DataLossWarning, match="damaged range"):
        got = list(reader.iter_from(start))
    reader.close()
    intact = (
        records[:30] + records[31:]
    )  # the damaged record is lost, the numbering is the intact one
    assert got == intact[start:]
