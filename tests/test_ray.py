"""recordkit.integrations.ray: Ray Data reads and writes record shards, and Ray's own TFRecord reader agrees."""

from __future__ import annotations

import collections
import glob
import json
import os
import shutil

import numpy as np
import pytest

import recordkit as rk
from recordkit.datasets import MANIFEST_NAME

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
rkray = pytest.importorskip("recordkit.integrations.ray")

pytestmark = [
    pytest.mark.ray,
    # Ray's own modules warn about their own deprecated settings.
    pytest.mark.filterwarnings(r"ignore::DeprecationWarning:ray\..*"),
]

FORMATS = ["ffrecord", "tfrecord", "ofrecord"]
SUFFIX = {"ffrecord": ".ffr", "tfrecord": ".tfrecord", "ofrecord": ".ofrecord"}


@pytest.fixture(scope="module", autouse=True)
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def _features(rng, i):
    """Varied features: present or missing, empty lists, several list types and lengths."""
    features = {"id": i, "label": int(rng.integers(-(2**40), 2**40))}
    kind = i % 4
    if kind == 0:
        features["emb"] = rng.standard_normal(int(rng.integers(0, 6))).astype(np.float32)
    elif kind == 1:
        features["tokens"] = [bytes(rng.bytes(int(rng.integers(0, 9)))) for _ in range(i % 3)]
    elif kind == 2:
        features["text"] = "ünïcode-" + str(i)
        features["empty"] = []
    else:
        features["ids"] = rng.integers(0, 1000, int(rng.integers(1, 4)))
    return features


def _records(n, encode):
    rng = np.random.default_rng(12)
    return [encode(_features(rng, i)) for i in range(n)]


def _dataset(records, blocks=4):
    """A Ray dataset of ``blocks`` Arrow blocks with a binary ``bytes`` column."""
    return ray.data.from_arrow(
        [pa.table({"bytes": pa.array(records[i::blocks], pa.binary())}) for i in range(blocks)]
    )


def _read_bytes(dataset):
    return collections.Counter(row["bytes"] for row in dataset.iter_rows())


@pytest.fixture(scope="module")
def examples():
    return _records(100_000, rk.encode_example)


@pytest.fixture(scope="module")
def ofrecords():
    return _records(100_000, rk.encode_ofrecord)


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_then_read_gives_the_same_multiset(fmt, examples, ofrecords, tmp_path):
    records = ofrecords if fmt == "ofrecord" else examples
    out = tmp_path / "out"
    manifest = rkray.write_records(_dataset(records), out, format=fmt)

    # The manifest lists each shard once, with the count its file holds, and nothing else is left.
    paths = [shard.path for shard in manifest.shards]
    assert len(paths) == len(set(paths)) >= 2
    for shard in manifest.shards:
        assert shard.path == f"part-{shard.path[5:10]}{SUFFIX[fmt]}"
        with rk.open(out / shard.path, format=fmt) as reader:
            assert len(reader) == shard.records > 0
    assert sum(shard.records for shard in manifest.shards) == len(records)
    sidecars = [] if fmt == "ffrecord" else [f".{path}.idx" for path in paths]
    assert sorted(os.listdir(out)) == sorted([MANIFEST_NAME, *paths, *sidecars])
    assert json.loads((out / MANIFEST_NAME).read_text())["format"] == fmt

    expected = collections.Counter(records)
    with rk.open(out) as reader:
        assert len(reader) == len(records)
        assert collections.Counter(reader) == expected
    assert _read_bytes(rkray.read_records(str(out))) == expected
    # The shard files alone, without the manifest, as another reader would list them.
    files = sorted(str(out / path) for path in paths)
    assert _read_bytes(rkray.read_records(files, check_crc=False)) == expected


def _tf_rows(rows):
    return sorted((row["id"], row["name"], row["text"], tuple(row["emb"])) for row in rows)


@pytest.mark.interop
@pytest.mark.parametrize("writer", ["write_records", "ShardWriter"])
def test_ray_read_tfrecords_reads_recordkit_shards(tmp_path, writer):
    pytest.importorskip("tensorflow")
    # Ray's reader unwraps one-element lists and cannot mix them with longer ones in a column, so
    # every feature keeps one length here.
    records = [
        rk.encode_example(
            {
                "id": i,
                "name": b"n" * (i % 5),
                "text": f"t{i}é",
                "emb": np.arange(3, dtype=np.float32) * i,
            }
        )
        for i in range(2_000)
    ]
    out = tmp_path / "out"
    if writer == "write_records":
        rkray.write_records(_dataset(records), out, format="tfrecord")
    else:
        with rk.ShardWriter(str(out / "train-{shard:05d}.tfrecord"), max_records=300) as shards:
            shards.write_many(records)
    assert any(name.endswith(".idx") for name in os.listdir(out))  # the indexes are there, hidden
    # The directory itself, as users pass it: recordkit's own files (the sidecar indexes, the manifest)
    # have names Ray passes by, so it reads the shards and nothing else.
    theirs = ray.data.read_tfrecords(str(out)).take_all()
    spec = {
        "id": rk.FixedLen((), np.int64),
        "name": rk.FixedLen((), bytes),
        "text": rk.FixedLen((), bytes),
        "emb": rk.FixedLen((3,), np.float32),
    }
    ours = rk.parse_examples(records, spec)
    expected = [
        (int(ours["id"][i]), ours["name"][i], ours["text"][i], tuple(ours["emb"][i].tolist()))
        for i in range(len(records))
    ]
    assert _tf_rows(theirs) == sorted(expected)


@pytest.mark.parametrize("writer", ["write_records", "ShardWriter"])
def test_ray_reads_only_the_new_shards_after_a_rewrite_with_fewer(tmp_path, writer):
    out = tmp_path / "out"

    def write(ids, shards):
        records = [rk.encode_example({"id": i}) for i in ids]
        if writer == "write_records":
            manifest = rkray.write_records(_dataset(records, blocks=shards), out, format="tfrecord")
        else:
            pattern = str(out / "part-{shard:05d}.tfrecord")
            with rk.ShardWriter(pattern, max_records=len(ids) // shards) as shard_writer:
                shard_writer.write_many(records)
            manifest = shard_writer.manifest
        assert len(manifest.shards) == shards

    write(range(30), 6)
    write(range(100, 110), 2)
    # Ray lists the directory itself, not the manifest: only the new shards are left for it to read.
    rows = ray.data.read_tfrecords(str(out)).take_all()
    assert sorted(int(row["id"]) for row in rows) == list(range(100, 110))


SPEC = {
    "id": rk.FixedLen((), np.int64),
    "label": rk.FixedLen((), np.int64, default=-1),
    "emb": rk.VarLen(np.float32),
    "tokens": rk.VarLen(bytes),
    "text": rk.FixedLen((), str, default=""),
    "ids": rk.VarLen(np.int64),
}


def _by_id(columns):
    order = np.argsort(columns["id"])
    return {name: [columns[name][i] for i in order] for name in columns}


def _assert_same_columns(ours, expected):
    assert ours.keys() == expected.keys()
    for name in expected:
        assert len(ours[name]) == len(expected[name])
        for got, want in zip(ours[name], expected[name], strict=True):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)


@pytest.mark.parametrize("fmt", ["tfrecord", "ofrecord"])
def test_spec_columns_equal_parse(fmt, tmp_path, examples, ofrecords):
    records = (ofrecords if fmt == "ofrecord" else examples)[:3_000]
    parse = rk.parse_ofrecords if fmt == "ofrecord" else rk.parse_examples
    out = tmp_path / "out"
    rkray.write_records(_dataset(records), out, format=fmt)
    read = rkray.read_records(str(out), features=SPEC, records_per_range=700)
    batches = list(read.iter_batches(batch_format="numpy", batch_size=None))
    ours = {name: np.concatenate([b[name] for b in batches]) for name in SPEC}
    parsed = parse(records, SPEC)
    expected = {name: list(value) for name, value in parsed.items()}
    _assert_same_columns(_by_id(ours), _by_id(expected))


def test_fixed_shapes_are_tensor_columns_and_fixed_size_lists(tmp_path):
    rng = np.random.default_rng(3)
    grids = rng.standard_normal((500, 2, 3)).astype(np.float32)
    records = [
        rk.encode_example({"grid": grid, "pair": [b"a" * i, b"b"], "id": i})
        for i, grid in enumerate(grids)
    ]
    path = tmp_path / "grids.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many(records)
    spec = {
        "grid": rk.FixedLen((2, 3), np.float32),
        "pair": rk.FixedLen((2,), bytes),
        "id": rk.FixedLen((), np.int64),
    }
    read = rkray.read_records(str(path), features=spec)
    assert str(read.schema().types[1]) == "fixed_size_list<item: binary>[2]"
    batch = read.take_batch(500, batch_format="numpy")
    assert batch["grid"].shape == (500, 2, 3)
    np.testing.assert_array_equal(batch["grid"][np.argsort(batch["id"])], grids)
    rows = read.take_all()
    assert sorted((row["id"], tuple(row["pair"])) for row in rows) == [
        (i, (b"a" * i, b"b")) for i in range(500)
    ]


def test_sequence_specs_are_refused():
    with pytest.raises(TypeError, match="FixedLenSequence"):
        rkray.read_records("x.tfrecord", features={"s": rk.FixedLenSequence((), np.int64)})


def _task_rows(source, parallelism):
    return [task.metadata.num_rows for task in source.get_read_tasks(parallelism)]


@pytest.mark.parametrize("fmt", ["ffrecord", "tfrecord"])
def test_a_large_shard_is_read_by_several_tasks(fmt, tmp_path, examples):
    records = examples[:10_000]
    if fmt == "ffrecord":  # a bare FFRecord file: its header gives the count
        source = str(tmp_path / "one.ffr")
        with rk.open(source, "w") as writer:
            writer.write_many(records)
    else:  # a TFRecord shard listed in a manifest with its count
        rkray.write_records(_dataset(records, blocks=1), tmp_path / "one", format=fmt)
        source = str(tmp_path / "one")
    datasource = rkray.RecordDatasource(source, records_per_range=1_500)
    assert _task_rows(datasource, 1) == [1_500] * 6 + [1_000]
    assert _task_rows(rkray.RecordDatasource(source), 4) == [2_500] * 4
    # Ray asked for 4 blocks gets 4 read tasks, each one block (records of a few MB fit in one).
    dataset = rkray.read_records(source, override_num_blocks=4).materialize()
    assert dataset.num_blocks() == 4
    assert "4 tasks executed" in dataset.stats()
    assert _read_bytes(dataset) == collections.Counter(records)
    assert _read_bytes(rkray.read_records(source, records_per_range=1_500)) == collections.Counter(
        records
    )


def test_tfrecord_without_manifest_is_one_task_per_file(tmp_path, examples):
    for i in range(3):
        with rk.open(tmp_path / f"f{i}.tfrecord", "w") as writer:
            writer.write_many(examples[i * 100 : (i + 1) * 100])
    tasks = rkray.RecordDatasource(str(tmp_path), records_per_range=10).get_read_tasks(8)
    assert [task.metadata.num_rows for task in tasks] == [None] * 3
    assert [task.metadata.size_bytes for task in tasks] == [
        os.path.getsize(tmp_path / f"f{i}.tfrecord") for i in range(3)
    ]
    assert len(rkray.RecordDatasource(str(tmp_path)).get_read_tasks(2)) == 2


def _flip_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x55
    path.write_bytes(bytes(data))


def test_a_corrupt_shard_raises_recordkits_error(tmp_path, examples):
    out = tmp_path / "out"
    manifest = rkray.write_records(_dataset(examples[:2_000]), out, format="tfrecord")
    damaged = out / manifest.shards[1].path
    _flip_byte(damaged, damaged.stat().st_size - 10)
    with pytest.raises(rk.ChecksumError) as caught:
        rkray.read_records(str(out)).materialize()
    # Ray raises its RayTaskError, made to derive from the task's error class too.
    assert isinstance(caught.value, ray.exceptions.RayTaskError)
    original = rkray.recordkit_error(caught.value)
    assert type(original) is rk.ChecksumError
    assert original.path == str(damaged)
    assert original.index is not None


def test_a_missing_shard_raises_manifest_error(tmp_path, examples):
    out = tmp_path / "out"
    manifest = rkray.write_records(_dataset(examples[:400]), out, format="ffrecord")
    (out / manifest.shards[0].path).unlink()
    with pytest.raises(rk.ManifestError) as caught:
        rkray.read_records(str(out)).materialize()
    assert type(rkray.recordkit_error(caught.value)) is rk.ManifestError


def test_recordkit_error_finds_nothing_in_other_errors():
    assert rkray.recordkit_error(ValueError("x")) is None
    inner = rk.DecodeError("inner")
    outer = RuntimeError("outer")
    outer.__cause__ = inner
    assert rkray.recordkit_error(outer) is inner


def test_a_retried_write_task_leaves_one_shard_and_one_entry(tmp_path, examples):
    records = examples[:1_000]
    marker = tmp_path / "failed-once"
    victim = records[500]

    def encode(row):
        # The first attempt of one task dies halfway through its shard; Ray runs it again.
        if row["bytes"] == victim and not marker.exists():
            marker.touch()
            raise RuntimeError("the first attempt fails")
        return row["bytes"]

    out = tmp_path / "out"
    manifest = rkray.write_records(
        _dataset(records),
        out,
        format="tfrecord",
        encode=encode,
        ray_remote_args={"retry_exceptions": True, "max_retries": 2},
    )
    assert marker.exists()
    paths = [shard.path for shard in manifest.shards]
    assert len(paths) == len(set(paths))
    assert sorted(os.listdir(out)) == sorted(
        [MANIFEST_NAME, *paths, *(f".{path}.idx" for path in paths)]
    )
    with rk.open(out) as reader:
        assert collections.Counter(reader) == collections.Counter(records)


def test_encode_example_from_columns(tmp_path):
    dataset = ray.data.from_items(
        [{"id": i, "name": f"n{i}", "emb": np.full(2, i, np.float32)} for i in range(300)]
    )
    out = tmp_path / "out"
    rkray.write_records(dataset, out, format="ffrecord", encode="example", min_records=100)
    spec = {
        "id": rk.FixedLen((), np.int64),
        "name": rk.FixedLen((), str),
        "emb": rk.FixedLen((2,), np.float32),
    }
    with rk.open(out) as reader:
        columns = rk.parse_examples(list(reader), spec)
    order = np.argsort(columns["id"])
    assert columns["id"][order].tolist() == list(range(300))
    assert columns["name"][order].tolist() == [f"n{i}" for i in range(300)]
    np.testing.assert_array_equal(columns["emb"][order][:, 0], np.arange(300, dtype=np.float32))


def test_a_second_write_replaces_the_dataset(tmp_path, examples):
    out = tmp_path / "out"
    rkray.write_records(_dataset(examples[:100], blocks=1), out, format="tfrecord")
    rkray.write_records(_dataset(examples[:10], blocks=1), out, format="tfrecord")
    assert collections.Counter(rk.open(out)) == collections.Counter(examples[:10])


def test_a_write_that_fails_leaves_no_manifest(tmp_path, examples):
    out = tmp_path / "out"
    rkray.write_records(_dataset(examples[:100], blocks=1), out, format="tfrecord")

    def broken(row):
        raise RuntimeError("cannot encode")

    with pytest.raises(Exception, match="cannot encode"):
        rkray.write_records(
            _dataset(examples[:10], blocks=1), out, format="tfrecord", encode=broken
        )
    assert not (out / MANIFEST_NAME).exists()


def test_options_reach_each_shards_writer(tmp_path):
    module = pytest.importorskip("array_record.python.array_record_module")
    records = [b"r%d" % i for i in range(60)]
    manifest = rkray.write_records(
        _dataset(records, blocks=2), tmp_path, format="arrayrecord", options="group_size:7,snappy"
    )
    found = []
    for shard in manifest.shards:
        reader = module.ArrayRecordReader(str(tmp_path / shard.path))
        assert reader.writer_options_string().startswith("group_size:7,")
        assert ",snappy," in reader.writer_options_string()
        found += reader.read_all()
        reader.close()
    assert sorted(found) == sorted(records)
    with pytest.raises(rk.errors.OptionsError, match="takes no writer options"):
        rkray.write_records(_dataset(records), tmp_path / "t", format="tfrecord", options="zstd")
    assert not (tmp_path / "t").exists()


def test_a_missing_or_non_binary_column_is_refused(tmp_path):
    with pytest.raises(KeyError, match="no column 'bytes'"):
        rkray.write_records(ray.data.range(10), tmp_path / "a", format="tfrecord")
    with pytest.raises(TypeError, match="not binary records"):
        rkray.write_records(ray.data.range(10), tmp_path / "b", format="tfrecord", column="id")
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_reading_a_compressed_tfrecord_and_writing_one(tmp_path, examples):
    records = examples[:500]
    out = tmp_path / "gz"
    manifest = rkray.write_records(_dataset(records), out, format="tfrecord", compression="gzip")
    assert all(shard.path.endswith(".tfrecord.gz") for shard in manifest.shards)
    assert manifest.compression == "gzip"
    shards = glob.glob(str(out / "*.gz"))
    assert _read_bytes(rkray.read_records(shards)) == collections.Counter(records)


def _png(pixels):
    pil = pytest.importorskip("PIL.Image")
    import io

    buffer = io.BytesIO()
    pil.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def test_images_are_decoded_into_tensor_columns(tmp_path):
    """rk.Image: images of their own sizes as a variable-shaped tensor column, resized ones as a tensor."""
    rng = np.random.default_rng(5)
    shapes = [
        (4, 5),
        (4, 5),
        (4, 5),
        (6, 3),
        (2, 7),
        (2, 7),
        (9, 1),
    ]  # the first task's block: one shape
    pixels = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in shapes]
    path = tmp_path / "images.ffr"
    with rk.open(path, "w") as writer:
        writer.write_many(
            rk.encode_example({"id": i, "image": _png(p)}) for i, p in enumerate(pixels)
        )
    spec = {"id": rk.FixedLen((), np.int64), "image": rk.Image()}
    read = rkray.read_records(str(path), features=spec, records_per_range=3)
    assert "VariableShapedTensor" in str(read.schema().types[1])
    rows = sorted(read.take_all(), key=lambda row: row["id"])
    assert [row["id"] for row in rows] == list(range(len(pixels)))
    for row, want in zip(rows, pixels, strict=True):
        assert row["image"].dtype == np.uint8
        np.testing.assert_array_equal(row["image"], want)
    # The same arrays as parse_examples gives outside Ray.
    with rk.open(path) as reader:
        expected = rk.parse_examples(list(reader), spec)["image"]
    batch = read.take_batch(len(pixels), batch_format="numpy")
    got = [batch["image"][i] for i in np.argsort(batch["id"])]
    for image, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(image, want)

    gray = rkray.read_records(
        str(path),
        features={"image": rk.Image(size=(8, 8), color_space="GRAY")},
        records_per_range=3,
    )
    images = gray.take_batch(len(pixels), batch_format="numpy")["image"]
    assert images.shape == (len(pixels), 8, 8, 1)
    assert images.dtype == np.uint8


def test_suffixless_oneflow_parts_are_parsed_as_ofrecords(tmp_path):
    records = [rk.encode_ofrecord({"id": i}) for i in range(6)]
    for k in range(2):  # OneFlow's part files carry no suffix
        with rk.open(tmp_path / f"part-{k}", "w", format="ofrecord") as writer:
            writer.write_many(records[3 * k : 3 * k + 3])
    features = {"id": rk.FixedLen((), np.int64)}
    rows = rkray.read_records(str(tmp_path), features=features).take_all()
    expected = rk.parse_ofrecords(records, features)["id"].tolist()
    assert sorted(int(row["id"]) for row in rows) == expected


def test_a_dataset_at_a_url_is_read_on_the_workers(examples, tmp_path):
    pytest.importorskip("aiohttp")  # fsspec's HTTP file system
    from _http_server import served

    out = tmp_path / "out"
    rkray.write_records(_dataset(examples), out, format="tfrecord")
    with served(out) as server:
        assert _read_bytes(rkray.read_records(server.url(""))) == collections.Counter(examples)
    shards = sum(path.stat().st_size for path in out.glob("*.tfrecord"))
    assert shards <= server.sent <= 1.5 * shards, (server.sent, shards)
