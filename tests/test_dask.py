"""recordkit.integrations.dask on a real distributed cluster: two worker processes, one of which a test kills mid-write.

Records go out with ``write_records`` and come back with ``read_records``; the records are compared as
multisets (a lost or doubled record fails), counted on the workers so that 100,000 small items need not
travel to the test process one by one. The manifest is checked against the files themselves (SHA-256)
and against ``recordkit.open``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

import dask.bag as db
from dask.delayed import Delayed

import recordkit as rk
import recordkit.integrations.dask as rkd
from recordkit.datasets import MANIFEST_NAME, load_manifest, prepare_output
from recordkit.integrations import _reading as reading

N = 100_000
SUFFIX = {"ffrecord": ".ffr", "tfrecord": ".tfrecord", "ofrecord": ".ofrecord"}


@pytest.fixture(scope="module")
def client():
    # The workers import this module's helpers (KillOnce, the counting functions) by value: they cannot
    # import a test module by name.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with dask.config.set({"distributed.scheduler.allowed-failures": 3}):
        cluster = distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
    with cluster, distributed.Client(cluster) as connected:
        yield connected
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def features(i: int, rng: random.Random) -> dict[str, object]:
    """Varied features: int, float and bytes lists of varying length, empty lists, absent keys.

    Every 50th record is the same, so that the multiset comparison also counts duplicates.
    """
    if i % 50 == 0:
        return {"label": 0}
    found: dict[str, object] = {"label": i, "weights": [rng.random() for _ in range(i % 7)]}
    if i % 3:
        found["tokens"] = [rng.randbytes(rng.randrange(0, 40)) for _ in range(i % 4)]
    if i % 5 == 1:
        found["empty"] = []
    if i % 11 == 2:
        found["ids"] = [rng.randrange(-(2**63), 2**63) for _ in range(3)]
    return found


@pytest.fixture(scope="module")
def payloads():
    rng = random.Random(12)
    rows = [features(i, rng) for i in range(N)]
    examples = [rk.encode_example(row) for row in rows]
    return {
        "tfrecord": examples,
        "ffrecord": examples,
        "ofrecord": [rk.encode_ofrecord(row) for row in rows],
    }


@pytest.fixture(scope="module")
def written(client, payloads, tmp_path_factory):
    """``written(fmt)``: the directory that ``write_records`` wrote the format's payloads to, and its
    manifest (written once per module, from a bag of 4 partitions)."""
    done: dict[str, tuple[Path, object]] = {}

    def write(fmt: str) -> tuple[Path, object]:
        if fmt not in done:
            out = tmp_path_factory.mktemp(fmt) / "data"
            bag = db.from_sequence(payloads[fmt], npartitions=4)
            done[fmt] = (out, rkd.write_records(bag, out, format=fmt))
        return done[fmt]

    return write


def counted(bag) -> Counter:
    """The multiset of a bag's items, counted partition by partition on the workers."""
    return sum(bag.map_partitions(lambda part: [Counter(part)]).compute(), Counter())


def assert_manifest_matches_files(directory: Path, fmt: str, counts: list[int]) -> None:
    manifest = load_manifest(directory)
    names = [f"part-{number:05d}{SUFFIX[fmt]}" for number in range(len(counts))]
    assert [shard.path for shard in manifest.shards] == names
    assert [shard.records for shard in manifest.shards] == counts
    for shard in manifest.shards:
        data = (directory / shard.path).read_bytes()
        assert (shard.size, shard.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        with rk.open(directory / shard.path) as reader:
            assert len(reader) == shard.records
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]


@pytest.mark.parametrize("fmt", ["ffrecord", "tfrecord", "ofrecord"])
def test_written_shards_read_back_as_the_same_multiset(payloads, written, fmt):
    records = payloads[fmt]
    out, manifest = written(fmt)
    assert manifest == load_manifest(out)
    assert_manifest_matches_files(out, fmt, [N // 4] * 4)
    expected = Counter(records)
    bag = rkd.read_records(out)
    assert bag.npartitions == 4
    assert counted(bag) == expected
    with rk.open(out) as reader:
        assert len(reader) == N
        assert Counter(reader) == expected


def test_a_large_shard_is_read_as_several_partitions(payloads, written):
    out, _ = written("ffrecord")
    bag = rkd.read_records(out, records_per_range=10_000)
    assert bag.npartitions == 12
    assert bag.map_partitions(lambda part: [len(part)]).compute() == [10_000, 10_000, 5_000] * 4
    assert counted(bag) == Counter(payloads["ffrecord"])
    # A lone FFRecord file (no manifest) is split by its header's count too.
    single = rkd.read_records(out / "part-00001.ffr", records_per_range=7_000)
    assert single.map_partitions(lambda part: [len(part)]).compute() == [7_000] * 3 + [4_000]
    first = single.map_partitions(lambda part: [part[0]]).compute()
    assert first == [payloads["ffrecord"][N // 4 + start] for start in range(0, 25_000, 7_000)]


def test_files_without_a_known_count_are_one_partition_each(client, tmp_path):
    records = [bytes([i % 256]) * (i % 300) for i in range(4_000)]
    out = tmp_path / "data"
    rkd.write_records(db.from_sequence(records, npartitions=4), out, format="tfrecord")
    # Through the manifest the count is known and the indexed shards are split ...
    assert rkd.read_records(out, records_per_range=400).npartitions == 12
    # ... but plain files found by a glob are read whole, whatever records_per_range says.
    bag = rkd.read_records(str(out / "*.tfrecord"), records_per_range=400)
    assert bag.npartitions == 4
    assert bag.compute() == records


def test_decode_runs_on_the_workers(client, tmp_path, monkeypatch):
    out = tmp_path / "data"
    rows = [rk.encode_example({"label": i, "x": [0.5] * (i % 3)}) for i in range(5_000)]
    rkd.write_records(db.from_sequence(rows, npartitions=4), out, format="tfrecord")

    def refuse(*args, **kwargs):
        raise AssertionError("a record was read in the calling process")

    # The client's read_range is broken; the workers import their own, untouched.
    monkeypatch.setattr(reading, "read_range", refuse)
    bag = rkd.read_records(out, decode=rk.decode_example)
    labels = bag.map(lambda example: int(example["label"][0])).sum().compute()
    assert labels == sum(range(5_000))


def test_encode_runs_on_the_workers_and_compute_false_defers_everything(client, tmp_path):
    out = tmp_path / "later" / "data"
    rows = db.from_sequence([{"label": i} for i in range(1_000)], npartitions=3)
    delayed = rkd.write_records(
        rows,
        out,
        format="tfrecord",
        encode=rk.encode_example,
        split="train",
        metadata={"k": 1},
        compute=False,
    )
    assert isinstance(delayed, Delayed)
    assert not out.parent.exists()
    manifest = delayed.compute()
    assert manifest == load_manifest(out)
    assert manifest.metadata == {"k": 1}
    assert {shard.split for shard in manifest.shards} == {"train"}
    sizes = rows.map_partitions(lambda part: [len(part)]).compute()
    assert_manifest_matches_files(out, "tfrecord", sizes)
    back = rkd.read_records(out, split="train", decode=rk.decode_example)
    assert sorted(int(example["label"][0]) for example in back.compute()) == list(range(1_000))


class KillOnce:
    """``encode`` that kills its own worker process the first time it meets ``victim``.

    On the retried attempt it writes down what the directory held at that point (before the retry can
    have finished its shard), for the test to check.
    """

    def __init__(self, victim: int, marker: Path, report: Path, directory: Path) -> None:
        self.victim, self.marker, self.report, self.directory = victim, marker, report, directory

    def __call__(self, i: int) -> bytes:
        if i == self.victim:
            if not self.marker.exists():
                self.marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            else:
                self.observe()
        return record_of(i)

    def observe(self) -> None:
        name = "part-00002.tfrecord"
        temporary = {
            entry: os.path.getsize(self.directory / entry)
            for entry in os.listdir(self.directory)
            if entry.startswith(f".{name}.") and entry.endswith(".tmp")
        }
        seen = {
            "pid": os.getpid(),
            "final_exists": (self.directory / name).exists(),
            "manifest_exists": (self.directory / MANIFEST_NAME).exists(),
            "temporary": temporary,
        }
        self.report.write_text(json.dumps(seen))


def record_of(i: int) -> bytes:
    return i.to_bytes(4, "little") * 256  # 1 KiB


def test_a_worker_killed_mid_write_leaves_no_partial_shard_and_the_retry_completes(
    client, tmp_path
):
    assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) >= 1
    out = tmp_path / "data"
    marker, report = tmp_path / "killed", tmp_path / "retry.json"
    # Partition 2 holds 10,000 to 14,999: 3 MiB are written (and flushed, in 1 MiB blocks) before the kill.
    encode = KillOnce(13_000, marker, report, out)
    workers_before = set(client.scheduler_info()["workers"])
    manifest = rkd.write_records(
        db.range(20_000, npartitions=4), out, format="tfrecord", encode=encode
    )
    killed = int(marker.read_text())
    seen = json.loads(report.read_text())
    # The retry ran in another process, and found no shard under the final name and no manifest, only
    # temporary files: the killed attempt's, holding the records written before the kill, and its own.
    assert seen["pid"] != killed
    assert not seen["final_exists"]
    assert not seen["manifest_exists"]
    assert len(seen["temporary"]) == 2
    assert max(seen["temporary"].values()) >= 2 << 20
    assert set(client.scheduler_info()["workers"]) != workers_before  # the nanny started a new one
    # Every shard exactly once, complete, and the killed attempt's temporary file swept away.
    assert_manifest_matches_files(out, "tfrecord", [5_000] * 4)
    assert manifest == load_manifest(out)
    assert counted(rkd.read_records(out)) == Counter(record_of(i) for i in range(20_000))


def test_a_write_that_fails_for_good_leaves_no_manifest(client, tmp_path):
    out = tmp_path / "data"
    rkd.write_records(db.from_sequence([b"old"] * 100, npartitions=2), out, format="tfrecord")
    assert (out / MANIFEST_NAME).exists()

    def encode(i: int) -> bytes:
        if i == 2_500:
            raise ValueError(f"cannot encode {i}")
        return record_of(i)

    with pytest.raises(ValueError, match="cannot encode 2500"):
        rkd.write_records(db.range(4_000, npartitions=4), out, format="tfrecord", encode=encode)
    # The earlier manifest went before any shard was replaced; no new one was written.
    assert not (out / MANIFEST_NAME).exists()
    assert not (out / "part-00002.tfrecord").exists()


def test_a_corrupt_shard_raises_recordkit_errors_through_compute(client, tmp_path):
    out = tmp_path / "data"
    records = [bytes([i % 256]) * 100 for i in range(2_000)]
    rkd.write_records(db.from_sequence(records, npartitions=4), out, format="ffrecord")
    damaged = out / "part-00001.ffr"
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0xFF  # the last record's payload; the size is unchanged
    damaged.write_bytes(bytes(data))
    with pytest.raises(rk.ChecksumError) as caught:
        rkd.read_records(out).compute()
    assert type(caught.value) is rk.ChecksumError
    assert caught.value.path == str(damaged)
    assert caught.value.index == 499
    # Without checks the damaged byte comes through.
    unchecked = rkd.read_records(out, check_crc=False).compute()
    assert unchecked[999] != records[999]
    assert unchecked[:999] + unchecked[1000:] == records[:999] + records[1000:]
    # A shard whose size no longer matches the manifest.
    damaged.write_bytes(bytes(data[:-1]))
    with pytest.raises(rk.ManifestError, match=r"part-00001\.ffr"):
        rkd.read_records(out).compute()


def test_prepare_output_creates_the_directory_and_drops_an_old_manifest(tmp_path):
    out = tmp_path / "a" / "b"
    assert prepare_output(out) == str(out)
    assert out.is_dir()
    (out / MANIFEST_NAME).write_text("{}")
    (out / "part-00000.tfrecord").write_bytes(b"")
    prepare_output(out)
    assert os.listdir(out) == ["part-00000.tfrecord"]


def test_bad_options_fail_before_anything_runs(client, tmp_path):
    bag = db.from_sequence([b"x"], npartitions=1)
    with pytest.raises(ValueError, match="compression"):
        rkd.write_records(bag, tmp_path / "out", format="ffrecord", compression="gzip")
    with pytest.raises(rk.UnknownFormatError):
        rkd.write_records(bag, tmp_path / "out", format="nope")
    assert not (tmp_path / "out").exists()


def test_options_reach_each_partitions_writer(client, tmp_path):
    module = pytest.importorskip("array_record.python.array_record_module")
    records = [b"r%d" % i for i in range(60)]
    bag = db.from_sequence(records, npartitions=2)
    manifest = rkd.write_records(bag, tmp_path, format="arrayrecord", options="group_size:7,snappy")
    found = []
    for shard in manifest.shards:
        reader = module.ArrayRecordReader(str(tmp_path / shard.path))
        assert reader.writer_options_string().startswith("group_size:7,")
        assert ",snappy," in reader.writer_options_string()
        found += reader.read_all()
        reader.close()
    assert found == records
    with pytest.raises(rk.errors.OptionsError, match="takes no writer options"):
        rkd.write_records(bag, tmp_path / "t", format="tfrecord", options="zstd")
    assert not (tmp_path / "t").exists()


def test_without_a_cluster_the_local_schedulers_work_too(tmp_path):
    # recordkit.integrations.dask needs no distributed: the synchronous and the threaded schedulers run it as well.
    records = [rk.encode_example({"label": i}) for i in range(300)]
    with dask.config.set(scheduler="sync"):
        manifest = rkd.write_records(
            db.from_sequence(records, npartitions=3), tmp_path, format="ofrecord"
        )
    assert [shard.records for shard in manifest.shards] == [100, 100, 100]
    assert rkd.read_records(tmp_path).compute(scheduler="threads") == records


def test_relative_paths_are_the_callers(client, tmp_path, monkeypatch):
    # The workers' working directory is not the caller's: paths are made absolute where the bag is made.
    monkeypatch.chdir(tmp_path)
    records = [b"%d" % i for i in range(100)]
    rkd.write_records(db.from_sequence(records, npartitions=2), "rel/out", format="tfrecord")
    assert (tmp_path / "rel" / "out" / MANIFEST_NAME).is_file()
    assert rkd.read_records("rel/out").compute() == records
    assert rkd.read_records("rel/out/*.tfrecord").compute() == records


class FailOnce:
    """``encode`` that raises the first time it meets ``victim`` (a transient error)."""

    def __init__(self, victim: int, marker: Path) -> None:
        self.victim, self.marker = victim, marker

    def __call__(self, i: int) -> bytes:
        if i == self.victim and not self.marker.exists():
            self.marker.touch()
            raise OSError("transient")
        return record_of(i)


def test_client_retries_rewrite_a_failed_shard(client, tmp_path):
    out = tmp_path / "data"
    encode = FailOnce(1_500, tmp_path / "failed")
    bag = db.range(2_000, npartitions=2)
    write = rkd.write_records(bag, out, format="tfrecord", encode=encode, compute=False)
    manifest = client.compute(write, retries=2).result()
    assert (tmp_path / "failed").exists()  # the first attempt did fail
    assert_manifest_matches_files(out, "tfrecord", [1_000, 1_000])
    assert counted(rkd.read_records(out)) == Counter(record_of(i) for i in range(2_000))
    assert manifest == load_manifest(out)


def test_images_decode_on_the_workers_as_in_parse_examples(client, tmp_path: Path) -> None:
    """rk.Image through decode=: each item holds its image at its own size, as parse_examples gives it."""
    import functools
    import io

    import numpy as np

    pil = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(2)
    pixels = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(3, 4), (5, 2), (1, 6)]]
    records = []
    for i, image in enumerate(pixels):
        buffer = io.BytesIO()
        pil.fromarray(image).save(buffer, "PNG")
        records.append(rk.encode_example({"id": i, "image": buffer.getvalue()}))
    path = tmp_path / "images.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    spec = {"id": rk.FixedLen((), np.int64), "image": rk.Image()}
    decode = functools.partial(rk.parse_example, features=spec)
    items = sorted(rkd.read_records(str(path), decode=decode).compute(), key=lambda x: x["id"])
    expected = rk.parse_examples(records, spec)["image"]
    assert [int(item["id"]) for item in items] == [0, 1, 2]
    for item, want, original in zip(items, expected, pixels, strict=True):
        assert item["image"].dtype == np.uint8
        np.testing.assert_array_equal(item["image"], want)
        np.testing.assert_array_equal(item["image"], original)
    # features= gives the same rows, parsed a block at a time.
    rows = rkd.read_records(str(path), features=spec).compute()
    assert [int(row["id"]) for row in rows] == [0, 1, 2]
    for row, original in zip(rows, pixels, strict=True):
        np.testing.assert_array_equal(row["image"], original)


def test_features_parse_on_the_workers_into_one_row_per_record_as_ray_does(client, tmp_path):
    """features= as Ray's reader takes it: parse_examples per block (parse_ofrecords for OFRecord files),
    one item per record: a dict of feature name -> value."""
    import numpy as np

    rows = [
        {"id": i, "x": [0.5 * i] * (i % 3), "pair": [i, -i], "name": f"r{i}"} for i in range(3_000)
    ]
    spec = {
        "id": rk.FixedLen((), np.int64),
        "x": rk.VarLen(np.float32),
        "pair": rk.FixedLen((2,), np.int64),
        "name": rk.FixedLen((), bytes),
    }
    for fmt, encode in [("tfrecord", rk.encode_example), ("ofrecord", rk.encode_ofrecord)]:
        out = tmp_path / fmt
        rkd.write_records(db.from_sequence(rows, npartitions=3), out, format=fmt, encode=encode)
        bag = rkd.read_records(out, features=spec)
        assert bag.npartitions == 3
        items = bag.compute()
        assert [set(item) for item in items] == [set(spec)] * len(rows)
        parsed = (rk.parse_ofrecords if fmt == "ofrecord" else rk.parse_examples)(
            [encode(row) for row in rows], spec
        )
        for i, item in enumerate(items):
            assert item["id"] == i
            np.testing.assert_array_equal(item["x"], parsed["x"][i])
            np.testing.assert_array_equal(item["pair"], [i, -i])
            assert item["name"] == f"r{i}".encode()
    with pytest.raises(ValueError, match="not both"):
        rkd.read_records(out, features=spec, decode=rk.decode_example)
    with pytest.raises(TypeError, match="FixedLenSequence"):
        rkd.read_records(out, features={"x": rk.FixedLenSequence((), np.float32)})


def test_a_dataset_at_a_url_is_read_by_the_byte_range_on_the_workers(payloads, written):
    pytest.importorskip("aiohttp")  # fsspec's HTTP file system
    from _http_server import served

    out, _ = written("ffrecord")
    with served(out) as server:
        bag = rkd.read_records(server.url(""), records_per_range=10_000)
        assert bag.npartitions == 12
        assert counted(bag) == Counter(payloads["ffrecord"])
    # Each partition fetched its records' range and its shard's header, not whole shards.
    shards = sum(path.stat().st_size for path in out.glob("*.ffr"))
    assert shards <= server.sent <= 1.5 * shards, (server.sent, shards)
