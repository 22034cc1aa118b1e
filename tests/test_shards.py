"""ShardWriter, the dataset manifest, and reading a dataset directory through it.

Expectations come from outside the code under test where possible: file sizes and SHA-256 from the files
themselves (hashlib, os.stat), record contents from TensorFlow's reader, counts from what was written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import recordkit as rk
from recordkit import datasets as shards
from recordkit.data import Dataset
from recordkit.datasets import MANIFEST_NAME, Manifest
from recordkit.errors import StaleIndexWarning
from recordkit.formats.sequential import SequentialFrameReader
from tests._cli import run_cli

FORMATS = ["tfrecord", "ofrecord", "ffrecord"]
SUFFIX = {"tfrecord": ".tfrecord", "ofrecord": ".ofrecord", "ffrecord": ".ffr"}


def payloads(n: int, seed: int = 0) -> list[bytes]:
    """Records of varied sizes (empty ones included where every format allows them)."""
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice([1, 7, 100, 3000])) for _ in range(n)]


def check_against_files(directory: Path, manifest: Manifest) -> None:
    """Every entry agrees with the file it names, measured independently."""
    for shard in manifest.shards:
        data = (directory / shard.path).read_bytes()
        assert shard.size == len(data)
        assert shard.sha256 == hashlib.sha256(data).hexdigest()
        if shard.index is not None:
            index = (directory / shard.index.path).read_bytes()
            assert shard.index.sha256 == hashlib.sha256(index).hexdigest()
            assert len(index.splitlines()) == shard.records


# -- ShardWriter -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_max_records_cuts_shards_and_the_manifest_matches_the_files(
    tmp_path: Path, fmt: str
) -> None:
    records = payloads(23)
    pattern = str(tmp_path / f"part-{{shard:03d}}{SUFFIX[fmt]}")
    with rk.ShardWriter(pattern, max_records=5) as writer:
        assert writer.write_many(records) == 23
    manifest = shards.load_manifest(tmp_path)
    assert manifest == writer.manifest
    assert [s.records for s in manifest.shards] == [5, 5, 5, 5, 3]
    assert [s.path for s in manifest.shards] == [f"part-{i:03d}{SUFFIX[fmt]}" for i in range(5)]
    assert manifest.format == fmt
    check_against_files(tmp_path, manifest)
    assert [s.index is not None for s in manifest.shards] == [fmt != "ffrecord"] * 5
    read = [r for s in manifest.shards for r in rk.open(tmp_path / s.path)]
    assert read == records
    assert list(rk.open(tmp_path)) == records


def test_max_bytes_counts_payload_and_framing(tmp_path: Path) -> None:
    records = [bytes(100)] * 10  # 116 bytes each as TFRecord frames
    with rk.ShardWriter(str(tmp_path / "p-{shard}.tfrecord"), max_bytes=350) as writer:
        writer.write_many(records)
    sizes = [s.size for s in writer.manifest.shards]  # type: ignore[union-attr]
    assert sizes == [348, 348, 348, 116]
    assert all(size <= 350 for size in sizes)


def test_a_record_larger_than_max_bytes_gets_its_own_shard(tmp_path: Path) -> None:
    with rk.ShardWriter(str(tmp_path / "p-{shard}.tfrecord"), max_bytes=50) as writer:
        writer.write_many([b"a", bytes(200), b"b"])
    assert [s.records for s in writer.manifest.shards] == [1, 1, 1]  # type: ignore[union-attr]


def test_tfds_naming_is_read_by_tensorflow(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    records = [rk.encode_example({"id": i, "v": [float(i)] * (i % 4)}) for i in range(50)]
    pattern = str(tmp_path / "mydata-train.tfrecord-{shard:05d}-of-{num_shards:05d}")
    with rk.ShardWriter(pattern, max_records=16, split="train") as writer:
        writer.write_many(records)
    names = sorted(p.name for p in tmp_path.iterdir())
    expected = [f"mydata-train.tfrecord-{i:05d}-of-00004" for i in range(4)]
    assert names == sorted([MANIFEST_NAME, *expected, *(f".{n}.idx" for n in expected)])
    files = [str(tmp_path / n) for n in expected]
    from_tf = [t.numpy() for t in tf.data.TFRecordDataset(files)]
    assert from_tf == records
    assert [s.split for s in writer.manifest.shards] == ["train"] * 4  # type: ignore[union-attr]


def test_pattern_needs_a_shard_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shard"):
        rk.ShardWriter(str(tmp_path / "data.tfrecord"))
    with pytest.raises(ValueError, match="only"):
        rk.ShardWriter(str(tmp_path / "{split}-{shard}.tfrecord"))


def test_abort_leaves_no_manifest_and_no_pending_shard(tmp_path: Path) -> None:
    pattern = str(tmp_path / "p-{shard}-of-{num_shards}.tfrecord")
    writer = rk.ShardWriter(pattern, max_records=2)
    writer.write_many([b"a", b"b", b"c"])
    writer.__exit__(RuntimeError, RuntimeError("stop"), None)
    assert list(tmp_path.iterdir()) == []


def test_a_second_split_keeps_the_first_in_the_manifest(tmp_path: Path) -> None:
    for split, n in (("train", 7), ("test", 3)):
        pattern = str(tmp_path / f"ds-{split}.tfrecord-{{shard:05d}}-of-{{num_shards:05d}}")
        with rk.ShardWriter(pattern, max_records=4, split=split) as writer:
            writer.write_many(f"{split}{i}".encode() for i in range(n))
    manifest = shards.load_manifest(tmp_path)
    assert manifest.splits == ["train", "test"]
    assert len(rk.open(tmp_path, split="train")) == 7
    assert list(rk.open(tmp_path, split="test")) == [b"test0", b"test1", b"test2"]
    # Rewriting one split replaces its entries only.
    pattern = str(tmp_path / "ds-test.tfrecord-{shard:05d}-of-{num_shards:05d}")
    with rk.ShardWriter(pattern, split="test") as writer:
        writer.write(b"new")
    assert list(rk.open(tmp_path, split="test")) == [b"new"]
    assert len(rk.open(tmp_path, split="train")) == 7


def test_a_writer_of_another_format_is_refused_by_the_manifest(tmp_path: Path) -> None:
    with rk.ShardWriter(str(tmp_path / "a-{shard}.tfrecord")) as writer:
        writer.write(b"x")
    with pytest.raises(rk.ManifestError, match="tfrecord"):
        rk.ShardWriter(str(tmp_path / "b-{shard}.ffr"))


def test_fsspec_url_dataset_round_trip() -> None:
    pytest.importorskip("fsspec")
    root = f"memory://shards-{random.randrange(1 << 30)}"
    with rk.ShardWriter(root + "/p-{shard:02d}-of-{num_shards:02d}.tfrecord", max_records=3) as w:
        w.write_many(b"%d" % i for i in range(8))
    reader = rk.open(root + "/")
    assert len(reader) == 8
    assert list(reader) == [b"%d" % i for i in range(8)]
    assert reader[5] == b"5"


# -- crashes ---------------------------------------------------------------------------------------

CRASHING_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import recordkit as rk

    directory, kill_at = sys.argv[1], int(sys.argv[2])
    events = 0

    def event():
        global events
        events += 1
        if events == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    real_replace, real_write = os.replace, rk.ShardWriter.write

    def replace(*args, **kwargs):
        event()
        real_replace(*args, **kwargs)
        event()

    def write(self, record):
        event()
        real_write(self, record)

    os.replace = replace
    rk.ShardWriter.write = write
    pattern = os.path.join(directory, "c-{shard:03d}-of-{num_shards:03d}.tfrecord")
    with rk.ShardWriter(pattern, max_records=3, split="train") as writer:
        writer.write_many(b"record %d" % i for i in range(10))
    print("finished", events)
    """
)


def test_a_crash_at_any_point_leaves_no_manifest_or_a_complete_one(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(CRASHING_WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(directory: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
        directory.mkdir()
        return subprocess.run(
            [sys.executable, str(script), str(directory), str(kill_at)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    finished = run(tmp_path / "whole", 0)
    assert finished.returncode == 0, finished.stderr
    total_events = int(finished.stdout.split()[-1])
    assert total_events > 20
    outcomes = Counter()
    for kill_at in range(1, total_events + 1):
        directory = tmp_path / f"kill-{kill_at}"
        result = run(directory, kill_at)
        assert result.returncode == -9, (kill_at, result.stderr)
        manifest_file = directory / MANIFEST_NAME
        if not manifest_file.exists():
            outcomes["no manifest"] += 1
            continue
        outcomes["complete"] += 1
        manifest = shards.load_manifest(directory)
        assert manifest.records == 10
        check_against_files(directory, manifest)
        assert all(check.ok for check in shards.verify_dataset(directory))
        assert list(rk.open(directory)) == [b"record %d" % i for i in range(10)]
    assert outcomes["no manifest"] > 0
    assert outcomes["complete"] > 0


# -- reading through the manifest ------------------------------------------------------------------


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    with rk.ShardWriter(str(tmp_path / "d-{shard:02d}.tfrecord"), max_records=10) as writer:
        writer.write_many(b"r%03d" % i for i in range(35))
    return tmp_path


def test_len_and_random_access_need_no_header_walk(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_scan(self: SequentialFrameReader) -> None:
        raise AssertionError("the headers were walked")

    monkeypatch.setattr(SequentialFrameReader, "scan", no_scan)
    reader = rk.open(dataset)
    assert len(reader) == 35
    assert reader[33] == b"r033"
    assert reader.read([0, 34, 17]) == [b"r000", b"r034", b"r017"]


def test_an_index_changed_after_the_manifest_is_checked_against_the_headers(dataset: Path) -> None:
    index = dataset / ".d-01.tfrecord.idx"
    lines = index.read_text().splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    index.write_text("\n".join(lines) + "\n")
    reader = rk.open(dataset)
    assert len(reader) == 35  # the manifest's count
    with pytest.warns(StaleIndexWarning, match="d-01.tfrecord"):
        assert reader[12] == b"r012"  # the index is ignored: the shard's headers are scanned


def test_a_missing_shard_is_named(dataset: Path) -> None:
    (dataset / "d-02.tfrecord").unlink()
    with pytest.raises(rk.ManifestError, match=r"d-02\.tfrecord.*missing") as info:
        rk.open(dataset)
    assert info.value.shard == 2
    with pytest.raises(rk.ManifestError, match="missing"):
        list(Dataset(dataset))


def test_a_shard_whose_size_changed_is_named(dataset: Path) -> None:
    with open(dataset / "d-01.tfrecord", "ab") as file:
        file.write(b"\0")
    with pytest.raises(rk.ManifestError, match="bytes, but the manifest says") as info:
        rk.open(dataset)
    assert info.value.path == str(dataset / "d-01.tfrecord")


def test_split_selection(dataset: Path) -> None:
    with pytest.raises(rk.ManifestError, match=r"no split 'train'; it has no splits"):
        rk.open(dataset, split="train")
    with pytest.raises(ValueError, match="dataset directory"):
        rk.open(dataset / "d-00.tfrecord", split="train")


def test_the_manifest_file_itself_can_be_opened(dataset: Path) -> None:
    assert len(rk.open(dataset / MANIFEST_NAME)) == 35


def test_dataset_shuffles_every_record_once_from_the_manifest(dataset: Path) -> None:
    got = list(Dataset(dataset, seed=5).shuffle())
    assert sorted(got) == [b"r%03d" % i for i in range(35)]
    assert got != sorted(got)
    ranks = [list(Dataset(dataset, seed=5, rank=r, world_size=3).shuffle()) for r in range(3)]
    assert sorted(r for rank in ranks for r in rank) == sorted(got)


def test_manifest_format_conflicts_are_refused(dataset: Path) -> None:
    with pytest.raises(rk.ManifestError, match="format="):
        rk.open(dataset, format="ffrecord")


def test_a_manifest_format_in_another_case_is_read_under_its_registered_name(dataset: Path) -> None:
    manifest = json.loads((dataset / MANIFEST_NAME).read_text())
    manifest["format"] = "TFRecord"
    (dataset / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert shards.load_manifest(dataset).format == "tfrecord"
    with rk.open(dataset, format="tfrecord") as reader:
        assert reader.format == "tfrecord"
        assert reader.read([34, 0]) == [b"r034", b"r000"]
    assert len(rk.open(dataset, format="TFRECORD")) == 35
    manifest["format"] = "parquet"
    (dataset / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(rk.ManifestError, match="unknown record format 'parquet'"):
        rk.open(dataset)


# -- manifest files --------------------------------------------------------------------------------


def valid_document() -> dict[str, object]:
    return {
        "kind": "recordkit.manifest",
        "version": 1,
        "format": "tfrecord",
        "compression": "none",
        "records": 3,
        "shards": [{"path": "a.tfrecord", "records": 3, "bytes": 60, "split": "train"}],
    }


BROKEN = {
    "not a manifest": lambda d: d.pop("kind"),
    "future version": lambda d: d.update(version=2),
    "version as text": lambda d: d.update(version="1"),
    "unknown compression": lambda d: d.update(compression="brotli"),
    "shards not a list": lambda d: d.update(shards={}),
    "negative records": lambda d: d["shards"][0].update(records=-1),
    "records as bool": lambda d: d["shards"][0].update(records=True),
    "absolute path": lambda d: d["shards"][0].update(path="/etc/passwd"),
    "parent path": lambda d: d["shards"][0].update(path="../x.tfrecord"),
    "backslash path": lambda d: d["shards"][0].update(path="a\\b.tfrecord"),
    "drive path": lambda d: d["shards"][0].update(path="C:x.tfrecord"),
    "bad sha256": lambda d: d["shards"][0].update(sha256="ABC"),
    "index without sha": lambda d: d["shards"][0].update(index={"path": "a.idx"}),
    "total disagrees": lambda d: d.update(records=4),
    "duplicate shard": lambda d: d["shards"].append(dict(d["shards"][0])),
    "missing bytes": lambda d: d["shards"][0].pop("bytes"),
    "Infinity, not JSON": lambda d: d.update(schema={"x": float("inf")}),
    "NaN, not JSON": lambda d: d["shards"][0].update(records=float("nan")),
}


def test_a_valid_document_parses() -> None:
    manifest = Manifest.from_json(json.dumps(valid_document()))
    assert manifest.records == 3
    assert manifest.splits == ["train"]
    assert Manifest.from_json(manifest.to_json()) == manifest


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_malformed_manifests_raise_manifest_error(tmp_path: Path, name: str) -> None:
    document = valid_document()
    BROKEN[name](document)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(document))
    with pytest.raises(rk.ManifestError) as info:
        rk.open(tmp_path)
    assert info.value.path == str(tmp_path / MANIFEST_NAME)


@pytest.mark.parametrize("text", [b"", b"{", b"\xff\xfe", b"[]", b"1e999999", b"[" * 100000])
def test_manifest_garbage_raises_manifest_error(tmp_path: Path, text: bytes) -> None:
    (tmp_path / MANIFEST_NAME).write_bytes(text)
    with pytest.raises(rk.ManifestError):
        shards.load_manifest(tmp_path)


def test_merge_writers_of_subdirectories(tmp_path: Path) -> None:
    for worker in range(3):
        pattern = str(tmp_path / f"w{worker}" / "part-{shard}.ffr")
        os.makedirs(os.path.dirname(pattern))
        with rk.ShardWriter(pattern, max_records=4) as writer:
            writer.write_many(b"%d-%d" % (worker, i) for i in range(6))
    merged = shards.merge_manifests([tmp_path / f"w{w}" for w in range(3)], tmp_path)
    merged.save(tmp_path)
    assert [s.path for s in merged.shards][:2] == ["w0/part-0.ffr", "w0/part-1.ffr"]
    assert Counter(rk.open(tmp_path)) == Counter(
        b"%d-%d" % (w, i) for w in range(3) for i in range(6)
    )
    check_against_files(tmp_path, merged)


def test_merge_refuses_mixed_formats_and_outside_shards(tmp_path: Path) -> None:
    for name, suffix in (("a", ".ffr"), ("b", ".tfrecord")):
        os.makedirs(tmp_path / name)
        with rk.ShardWriter(str(tmp_path / name / f"p-{{shard}}{suffix}")) as writer:
            writer.write(b"x")
    with pytest.raises(rk.ManifestError, match="cannot merge"):
        shards.merge_manifests([tmp_path / "a", tmp_path / "b"], tmp_path)
    with pytest.raises(rk.ManifestError, match="outside"):
        shards.merge_manifests([tmp_path / "a"], tmp_path / "b")


# -- manifests for files written by others; verify -------------------------------------------------


@pytest.mark.interop
def test_build_describes_shards_written_by_tensorflow(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    written: dict[str, list[bytes]] = {}
    for split, n in (("train", 3), ("test", 2)):
        for i in range(n):
            name = f"tfds-{split}.tfrecord-{i:05d}-of-{n:05d}"
            records = payloads(5 + i, seed=i)
            with tf.io.TFRecordWriter(str(tmp_path / name)) as writer:
                for record in records:
                    writer.write(record)
            written[name] = records
    manifest = shards.build_manifest(tmp_path)
    assert manifest.splits == ["test", "train"]
    assert {s.path: s.records for s in manifest.shards} == {k: len(v) for k, v in written.items()}
    check_against_files(tmp_path, manifest)
    train = [r for name in sorted(written) if "train" in name for r in written[name]]
    assert list(rk.open(tmp_path, split="train")) == train


def test_cli_manifest_build_show_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with rk.open(tmp_path / "a.tfrecord", "w") as writer:
        writer.write_many(payloads(12))
    with rk.open(tmp_path / "b.tfrecord", "w") as writer:
        writer.write_many(payloads(5, seed=1))
    result = run_cli(capsys, "manifest", "build", tmp_path)
    assert result.code == 0
    assert "2 shards, 17 records" in result.out
    result = run_cli(capsys, "manifest", "show", tmp_path)
    assert result.code == 0
    assert "a.tfrecord" in result.out
    result = run_cli(capsys, "verify", tmp_path)
    assert result.code == 0
    assert "2 OK, 0 bad" in result.out
    # Same size, different content: only the checksums catch it.
    data = bytearray((tmp_path / "b.tfrecord").read_bytes())
    data[-5] ^= 1
    (tmp_path / "b.tfrecord").write_bytes(bytes(data))
    result = run_cli(capsys, "verify", tmp_path)
    assert result.code == 1
    assert "b.tfrecord: CORRUPT" in result.out
    assert "1 OK, 1 bad" in result.out


def test_verify_reports_a_changed_payload_of_equal_length_by_sha256(tmp_path: Path) -> None:
    with rk.ShardWriter(str(tmp_path / "p-{shard}.ffr")) as writer:
        writer.write_many([b"aaaa", b"bbbb"])
    # Rewrite the file with the same framing but other payload bytes: CRCs are right, the SHA-256 is not.
    with rk.open(tmp_path / "p-0.ffr", "w") as rewrite:
        rewrite.write_many([b"aaaa", b"bbbc"])
    checks = shards.verify_dataset(tmp_path)
    assert [c.ok for c in checks] == [False]
    assert "SHA-256" in (checks[0].problem or "")


def test_the_documented_example_is_what_shard_writer_writes(tmp_path: Path) -> None:
    page = (Path(__file__).parent.parent / "docs" / "formats" / "manifest.md").read_text()
    documented = page.split("```json\n", 1)[1].split("```", 1)[0]
    pattern = str(tmp_path / "train-{shard:05d}-of-{num_shards:05d}.tfrecord")
    with rk.ShardWriter(pattern, max_records=2, split="train") as writer:
        writer.write_many([b"alpha", b"beta", b"gamma"])
    written = (tmp_path / MANIFEST_NAME).read_text()
    # The fingerprints are the files' own (modification time, inode): compared with stat(), not the page.
    for entry in json.loads(written)["shards"]:
        info = os.stat(tmp_path / entry["path"])
        assert entry["fingerprint"] == {"mtime_ns": info.st_mtime_ns, "inode": info.st_ino}

    def without_fingerprints(text: str) -> str:
        return re.sub(r'"(mtime_ns|inode)": -?\d+', r'"\1": N', text)

    assert without_fingerprints(written) == without_fingerprints(documented)
    assert written.count('"fingerprint"') == documented.count('"fingerprint"') == 2


def test_a_writer_dropped_without_close_leaves_no_manifest_and_no_hidden_shards(
    tmp_path: Path,
) -> None:
    writer = rk.ShardWriter(str(tmp_path / "p-{shard}-of-{num_shards}.tfrecord"), max_records=1)
    writer.write_many([b"a", b"b", b"c"])
    assert len(list(tmp_path.iterdir())) > 0  # two finished shards wait, one is being written
    with pytest.warns(ResourceWarning, match="without close"):
        del writer  # no reference cycle: the finalizer runs here
    assert list(tmp_path.iterdir()) == []
    # Without {num_shards}, finished shards are in place; the warning says they stay unlisted.
    writer = rk.ShardWriter(str(tmp_path / "q-{shard}.tfrecord"), max_records=2)
    writer.write_many([b"a", b"b", b"c"])
    with pytest.warns(ResourceWarning) as caught:
        del writer  # no reference cycle: the finalizer runs here
    messages = sorted(str(warning.message) for warning in caught)
    assert "1 shards it finished stay" in messages[0]
    assert "q-1.tfrecord was dropped without close(): nothing was written" in messages[1]
    assert not (tmp_path / MANIFEST_NAME).exists()


def test_fields_may_name_directories(tmp_path: Path) -> None:
    with rk.ShardWriter(str(tmp_path / "{shard:02d}" / "data.tfrecord"), max_records=2) as writer:
        writer.write_many([b"a", b"b", b"c"])
    assert [s.path for s in writer.manifest.shards] == ["00/data.tfrecord", "01/data.tfrecord"]  # type: ignore[union-attr]
    assert list(rk.open(tmp_path)) == [b"a", b"b", b"c"]


def test_plain_forms(dataset: Path) -> None:
    assert next(iter(rk.open(dataset))) == b"r000"
    assert len([r for r in rk.open(dataset)]) == 35  # noqa: C416 - the comprehension is the form tested
    assert len(rk.open(str(dataset / MANIFEST_NAME))) == 35
    assert sum(1 for _ in Dataset(str(dataset))) == 35


def _rewrite_with_more_records(path: Path, extra: int) -> None:
    records = list(rk.open(path))
    with rk.open(path, "w") as writer:
        writer.write_many(records + [b"extra"] * extra)


@pytest.mark.parametrize("extra", [2, -1])
def test_a_shard_whose_count_changed_is_never_read_silently(tmp_path: Path, extra: int) -> None:
    """The size check cannot see it when the manifest records no size (TFDS) or sizes collide."""
    with rk.ShardWriter(str(tmp_path / "d-{shard}.ffr"), max_records=10) as writer:
        writer.write_many(b"r%03d" % i for i in range(25))
    manifest = shards.load_manifest(tmp_path)
    victim = tmp_path / "d-1.ffr"
    if extra > 0:
        _rewrite_with_more_records(victim, extra)
    else:
        records = list(rk.open(victim))[:-1]
        with rk.open(victim, "w") as writer:
            writer.write_many(records)
    # Record the new size, as a TFDS directory would (its sizes come from the file system).
    entries = [
        dataclasses.replace(s, size=(tmp_path / s.path).stat().st_size) for s in manifest.shards
    ]
    dataclasses.replace(manifest, shards=tuple(entries)).save(tmp_path)
    with pytest.raises(rk.ManifestError, match="manifest says 10") as info:
        list(rk.open(tmp_path))
    assert info.value.shard == 1
    with pytest.raises(rk.ManifestError, match="manifest says 10"):
        rk.open(tmp_path)[15]
    with pytest.raises(rk.ManifestError, match="manifest says 10"):
        list(Dataset(tmp_path).shuffle())
    assert len(rk.open(tmp_path)[:10]) == 10  # the first shard is intact


def test_rebuilding_a_manifest_keeps_the_splits(tmp_path: Path) -> None:
    for split in ("train", "test"):
        pattern = str(tmp_path / f"{split}-{{shard:05d}}-of-{{num_shards:05d}}.tfrecord")
        with rk.ShardWriter(pattern, max_records=3, split=split) as writer:
            writer.write_many(b"%s%d" % (split.encode(), i) for i in range(5))
    _rewrite_with_more_records(tmp_path / "train-00001-of-00002.tfrecord", 1)
    with pytest.raises(rk.ManifestError, match="manifest build"):
        rk.open(tmp_path, split="train")
    rebuilt = shards.build_manifest(tmp_path)
    assert rebuilt.splits == ["test", "train"]
    expected = [b"train%d" % i for i in range(5)] + [b"extra"]
    assert list(rk.open(tmp_path, split="train")) == expected


def test_a_manifest_of_another_name_is_read_and_verified(tmp_path: Path) -> None:
    with rk.ShardWriter(
        str(tmp_path / "p-{shard}.tfrecord"), manifest=str(tmp_path / "w0.json")
    ) as w:
        w.write_many([b"a", b"b"])
    assert list(rk.open(tmp_path / "w0.json")) == [b"a", b"b"]
    assert [check.ok for check in shards.verify_dataset(tmp_path / "w0.json")] == [True]


def test_merge_into_a_new_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for worker in range(2):
        with rk.ShardWriter(str(tmp_path / "parts" / f"w{worker}" / "p-{shard}.ffr")) as writer:
            writer.write(b"%d" % worker)
    result = run_cli(
        capsys,
        "manifest",
        "merge",
        tmp_path / "parts",
        tmp_path / "parts/w0",
        tmp_path / "parts/w1",
    )
    assert result.code == 0, result.err
    assert sorted(rk.open(tmp_path / "parts")) == [b"0", b"1"]
    # A destination that is not a directory yet is one (unless it ends with .json): shards outside it are refused.
    result = run_cli(capsys, "manifest", "merge", tmp_path / "elsewhere", tmp_path / "parts/w0")
    assert result.code != 0
    assert "outside" in result.err
    assert not (tmp_path / "elsewhere").exists()


def test_cli_reads_the_shards_a_manifest_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with rk.ShardWriter(str(tmp_path / "p-{shard}.ffr"), max_records=3) as writer:
        writer.write_many([b"a"] * 7)
    with rk.open(tmp_path / "stale-9.ffr", "w") as stale:  # not in the manifest
        stale.write(b"zzz")
    result = run_cli(capsys, "count", tmp_path)
    assert result.out.splitlines()[-1].split() == ["7", "total"]
    result = run_cli(capsys, "cat", tmp_path, "--raw")
    assert len(result.out.splitlines()) == 7


def test_an_empty_dataset_reads_as_empty(tmp_path: Path) -> None:
    with rk.ShardWriter(str(tmp_path / "p-{shard}.tfrecord")):
        pass
    reader = rk.open(tmp_path)
    assert len(reader) == 0
    assert list(reader) == []
    assert list(Dataset(tmp_path)) == []
    assert [check.ok for check in shards.verify_dataset(tmp_path)] == []


# -- rewriting a dataset directory -------------------------------------------------------------------

NEW_IDS = list(range(100, 110))


def _examples(ids: list[int]) -> list[bytes]:
    return [rk.encode_example({"id": i}) for i in ids]


def _write_dataset(
    how: str, directory: Path, ids: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    """Write Examples ``ids`` into ``directory``, five per shard, with one of the dataset writers."""
    records = _examples(ids)
    chunks = [records[i : i + 5] for i in range(0, len(records), 5)]
    if how == "ShardWriter":
        with rk.ShardWriter(str(directory / "part-{shard:05d}.tfrecord"), max_records=5) as writer:
            writer.write_many(records)
    elif how == "tasks":
        shards.prepare_output(directory)
        entries = [
            shards.write_shard(
                chunk, shards.task_shard_path(directory, i, format="tfrecord"), root=str(directory)
            )
            for i, chunk in enumerate(chunks)
        ]
        shards.commit_manifest(directory, entries, format="tfrecord")
    elif how == "dask":
        dask = pytest.importorskip("dask")
        import dask.bag as db

        from recordkit.integrations import dask as rkd

        with dask.config.set(scheduler="synchronous"):
            rkd.write_records(
                db.from_sequence(records, npartitions=len(chunks)), directory, format="tfrecord"
            )
    else:
        source = directory.parent / f"source-{len(ids)}.tfrecord"
        with rk.open(source, "w") as out:
            out.write_many(records)
        result = run_cli(
            capsys, "convert", source, directory, "--shards", str(len(chunks)), "--force"
        )
        assert result.code == 0, result.err


def _tensorflow_ids(directory: Path) -> Counter[int]:
    """The ids TensorFlow reads from the files a glob of the docs matches (every shard not hidden)."""
    tf = pytest.importorskip("tensorflow")
    files = sorted(tf.io.gfile.glob(f"{directory}/[!._]*.tfrecord"))
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    return Counter(
        int(tf.io.parse_single_example(record, spec)["id"])
        for record in tf.data.TFRecordDataset(files)
    )


@pytest.mark.interop
@pytest.mark.parametrize("how", ["ShardWriter", "tasks", "dask", "convert"])
def test_a_rewrite_with_fewer_shards_leaves_only_the_new_ones_for_other_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    directory = tmp_path / "ds"
    _write_dataset(how, directory, list(range(30)), capsys)  # six shards
    assert _tensorflow_ids(directory) == Counter(range(30))
    # A file recordkit did not write stays, even with a shard's name and suffix.
    with rk.open(directory / "zz-mine.tfrecord", "w") as mine:
        mine.write_many(_examples([7, 8]))
    _write_dataset(how, directory, NEW_IDS, capsys)  # two shards
    # TensorFlow, with the glob the docs recommend, reads the new records and the user's file only.
    assert _tensorflow_ids(directory) == Counter([*NEW_IDS, 7, 8])
    assert len(rk.open(directory)) == 10
    manifest = shards.load_manifest(directory)
    named = {shard.path for shard in manifest.shards} | {
        shard.index.path for shard in manifest.shards if shard.index is not None
    }
    assert {path.name for path in directory.iterdir()} == named | {
        MANIFEST_NAME,
        "zz-mine.tfrecord",
    }


def test_a_rewrite_deletes_only_what_the_old_manifest_named(tmp_path: Path) -> None:
    train = str(tmp_path / "train-{shard}.tfrecord")
    with rk.ShardWriter(train, max_records=1) as writer:
        writer.write_many([b"a", b"b", b"c"])
    with rk.ShardWriter(str(tmp_path / "test-{shard}.tfrecord"), split="test") as writer:
        writer.write(b"t")
    # Shards no manifest named (an older write, a copy by hand) are not recordkit's to delete.
    with rk.open(tmp_path / "train-7.tfrecord", "w") as stray:
        stray.write(b"stray")
    (tmp_path / "notes.txt").write_text("mine")
    with rk.ShardWriter(train, max_records=1) as writer:
        writer.write(b"A")
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == sorted(
        [
            MANIFEST_NAME,
            "notes.txt",
            "train-0.tfrecord",
            ".train-0.tfrecord.idx",
            "train-7.tfrecord",
            "test-0.tfrecord",
            ".test-0.tfrecord.idx",
        ]
    )
    assert sorted(rk.open(tmp_path, split="test")) == [b"t"]
    # Without a manifest there is nothing to compare with: nothing is deleted.
    with rk.ShardWriter(train, manifest=False) as writer:
        writer.write(b"x")
    assert (tmp_path / "train-7.tfrecord").exists()


def test_shards_a_failed_write_left_are_deleted_by_the_next_write(tmp_path: Path) -> None:
    pattern = str(tmp_path / "part-{shard}.tfrecord")
    with rk.ShardWriter(pattern, max_records=1) as writer:
        writer.write_many([b"a", b"b", b"c", b"d"])
    # A distributed write that fails for good: the old manifest is gone, its shards are still there.
    shards.prepare_output(tmp_path)
    assert not (tmp_path / MANIFEST_NAME).exists()
    assert (tmp_path / "part-3.tfrecord").exists()
    # So is an aborted ShardWriter's.
    aborted = rk.ShardWriter(pattern, max_records=1)
    aborted.write(b"x")
    aborted.abort()
    with rk.ShardWriter(pattern, max_records=1) as writer:
        writer.write_many([b"A", b"B"])
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith(".")) == [
        MANIFEST_NAME,
        "part-0.tfrecord",
        "part-1.tfrecord",
    ]
    assert not any(path.name.startswith(".rk-") for path in tmp_path.iterdir())
    assert list(rk.open(tmp_path)) == [b"A", b"B"]


def test_convert_into_a_dataset_directory_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "ds"
    _write_dataset("ShardWriter", directory, list(range(10)), capsys)
    source = tmp_path / "source.tfrecord"
    with rk.open(source, "w") as out:
        out.write_many(_examples(NEW_IDS))
    result = run_cli(capsys, "convert", source, directory, "--shards", "3")
    assert result.code != 0
    assert "_recordkit_manifest.json exists; pass --force" in result.err
    assert len(rk.open(directory)) == 10


@pytest.mark.parametrize(
    "pattern",
    ["new/deeper/p-{shard}-of-{num_shards}.tfrecord", "new/{shard:03d}/p-{num_shards}.tfrecord"],
)
@pytest.mark.parametrize("records", [0, 3])
def test_a_dropped_writer_removes_the_directories_it_made_and_left_empty(
    tmp_path: Path, pattern: str, records: int
) -> None:
    writer = rk.ShardWriter(str(tmp_path / pattern), max_records=2)
    writer.write_many([b"x"] * records)
    assert (tmp_path / "new").is_dir()
    with pytest.warns(ResourceWarning) as caught:
        del writer  # no reference cycle: the finalizer runs here
    assert any(str(tmp_path / pattern) in str(warning.message) for warning in caught)
    assert list(tmp_path.iterdir()) == []


def test_an_aborted_writer_keeps_directories_that_hold_files(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "mine.txt").write_text("kept")
    writer = rk.ShardWriter(str(tmp_path / "old" / "new" / "p-{shard}.tfrecord"), max_records=1)
    writer.write_many([b"a", b"b"])  # one shard finished under its name, one being written
    writer.abort()
    assert sorted(p.name for p in (tmp_path / "old" / "new").iterdir()) == [
        ".p-0.tfrecord.idx",
        "p-0.tfrecord",
    ]
    empty = rk.ShardWriter(str(tmp_path / "old" / "other" / "p-{shard}.tfrecord"))
    empty.abort()
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["mine.txt", "new"]


@pytest.mark.parametrize(
    "pattern", ["train-{shard:03d}.tfrecord", "train-{shard}-of-{num_shards}.tfrecord"]
)
def test_a_file_url_pattern_creates_its_directories(tmp_path, pattern):
    url = (tmp_path / "new" / "deeper").as_uri() + "/" + pattern
    with rk.ShardWriter(url, max_records=2, split="train") as writer:
        writer.write_many([b"%d" % i for i in range(5)])
    assert list(rk.open(tmp_path / "new" / "deeper", split="train")) == [
        b"%d" % i for i in range(5)
    ]
