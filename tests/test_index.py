"""Sidecar offset indexes: the tfrecord2idx text format, staleness checks, interop with vahidk tfrecord.

An index is a cache: one that does not describe its file is ignored with a StaleIndexWarning, and the file's
headers are scanned instead.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import subprocess
import sys
import warnings

import pytest

import recordkit as rk
from recordkit.errors import StaleIndexError, StaleIndexWarning, UnsupportedOperationError
from recordkit.formats.tfrecord import frame
from recordkit.io import write_index
from recordkit.io.index import load_index

RECORDS = [b"alpha", b"", b"gamma" * 100, b"delta"]


def _write(path, records=RECORDS):
    with rk.open(path, "w") as writer:
        writer.write_many(records)


def _expected_lines(records, overhead):
    lines, offset = [], 0
    for record in records:
        lines.append(f"{offset} {len(record) + overhead}")
        offset += len(record) + overhead
    return lines


@pytest.mark.parametrize(("name", "overhead"), [("a.tfrecord", 16), ("a.ofrecord", 8)])
def test_index_file_format(tmp_path, name, overhead):
    records = [r for r in RECORDS if r] if name.endswith("ofrecord") else RECORDS
    _write(tmp_path / name, records)
    index_path = write_index(tmp_path / name)
    assert index_path == os.fspath(tmp_path / f"{name}.idx")  # a lone file: where DALI's tools look
    assert (tmp_path / f"{name}.idx").read_text().splitlines() == _expected_lines(records, overhead)
    hidden = write_index(tmp_path / name, hidden=True)  # other readers of the directory pass it by
    assert hidden == os.fspath(tmp_path / f".{name}.idx")
    assert (tmp_path / f".{name}.idx").read_text().splitlines() == _expected_lines(
        records, overhead
    )
    assert not (tmp_path / f"{name}.idx").exists()  # one index per file: the other name is removed


def test_an_index_written_inside_a_dataset_directory_is_hidden(tmp_path):
    with rk.ShardWriter(tmp_path / "part-{shard:02d}.tfrecord", max_records=2) as writer:
        writer.write_many(RECORDS)
    assert write_index(tmp_path / "part-00.tfrecord") == os.fspath(
        tmp_path / ".part-00.tfrecord.idx"
    )
    assert not any(name.endswith(".idx") and name[0] != "." for name in os.listdir(tmp_path))


def test_default_sidecar_is_used_and_checked_against_the_headers(tmp_path, monkeypatch):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord")
    loaded = []
    original = load_index

    def spy(*args, **kwargs):
        loaded.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr("recordkit.io.reader.load_index", spy)
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert len(reader) == 4
        assert reader[2] == RECORDS[2]
    assert loaded == [os.fspath(tmp_path / "a.tfrecord.idx")]
    with rk.open(tmp_path / "a.tfrecord", index=False) as reader:
        assert len(reader) == 4
    assert len(loaded) == 1


def test_an_index_under_the_old_name_is_found_used_and_replaced(tmp_path, monkeypatch):
    """Earlier versions (and DALI's tfrecord2idx) name the index ``a.tfrecord.idx``: still used."""
    path = tmp_path / "a.tfrecord"
    _write(path)
    legacy = write_index(path, tmp_path / "a.tfrecord.idx")
    loaded = []
    original = load_index
    monkeypatch.setattr(
        "recordkit.io.reader.load_index", lambda *a, **k: loaded.append(a[0]) or original(*a, **k)
    )
    with rk.open(path) as reader:
        assert reader.read([3, 1]) == [RECORDS[3], RECORDS[1]]
    assert loaded == [legacy]
    # write_index(hidden=True) writes the hidden name and removes the old one, which other readers of the
    # directory would take as data.
    assert write_index(path, hidden=True) == os.fspath(tmp_path / ".a.tfrecord.idx")
    assert sorted(os.listdir(tmp_path)) == [".a.tfrecord.idx", "a.tfrecord"]
    # With both present, recordkit's own name wins.
    write_index(path, legacy)
    (tmp_path / "a.tfrecord.idx").write_text("garbage\n")
    with rk.open(path) as reader:
        assert reader[2] == RECORDS[2]
    assert loaded[-1] == os.fspath(tmp_path / ".a.tfrecord.idx")


def _nested_file(tmp_path):
    """A file whose first record's payload holds a valid frame, and an index that points at that frame.

    The index tiles the file: record 0 is cut short before the inner frame, record 1 is the inner frame,
    record 2 is the rest of the outer record plus the real second record.
    """
    inner = frame(b"inner")
    outer = b"xxxx" + inner + b"yyyy"
    data = frame(outer) + frame(b"second")
    (tmp_path / "a.tfrecord").write_bytes(data)
    first = 12 + 4
    lines = [(0, first), (first, len(inner)), (first + len(inner), len(data) - first - len(inner))]
    (tmp_path / "a.tfrecord.idx").write_text("".join(f"{o} {n}\n" for o, n in lines))
    return tmp_path / "a.tfrecord"


@pytest.mark.parametrize(
    ("how", "expected"),
    [(lambda r: r[1], b"second"), (lambda r: r.read([1]), [b"second"]), (len, 2)],
    ids=["index", "read", "len"],
)
def test_an_index_entry_pointing_inside_a_payload_never_returns_that_payload(
    tmp_path, how, expected
):
    path = _nested_file(tmp_path)
    with rk.open(path) as reader:
        with pytest.warns(StaleIndexWarning, match=r"record 0 spans bytes 0-16.*ignored") as caught:
            assert how(reader) == expected
        assert reader.read([0, 1]) == [b"xxxx" + frame(b"inner") + b"yyyy", b"second"]
    assert len(caught) == 1
    assert os.fspath(path) in str(caught[0].message)


@pytest.mark.parametrize("name", ["a.tfrecord", "a.ofrecord"])
@pytest.mark.parametrize("how", ["index", "read"])
def test_an_index_entry_shorter_than_a_header_is_a_stale_index(tmp_path, name, how):
    records = [b"a" * 10, b"b" * 10]
    _write(tmp_path / name, records)
    size = (tmp_path / name).stat().st_size
    half = size // 2
    (tmp_path / (name + ".idx")).write_text(f"0 {half}\n{half} {half - 5}\n{size - 5} 5\n")
    with rk.open(tmp_path / name) as reader:
        with pytest.warns(StaleIndexWarning, match=r"record 1 spans .* ignored"):
            got = reader[1] if how == "index" else reader.read([1, 0])
        assert got == (records[1] if how == "index" else [records[1], records[0]])
        with pytest.raises(IndexError):
            reader[2]  # the file holds 2 records, whatever the index said


def _hostile_indexes(rng, records, overhead):
    """Indexes that tile the file by construction, and some that do not, built from random cuts."""
    size = sum(len(r) + overhead for r in records)
    for _ in range(30):
        cuts = (
            sorted(rng.sample(range(1, size), min(size - 1, rng.randrange(1, 8))))
            if size > 1
            else []
        )
        bounds = [0, *cuts, size]
        lines = [f"{a} {b - a}\n" for a, b in itertools.pairwise(bounds)]
        if rng.random() < 0.3 and lines:
            lines[rng.randrange(len(lines))] = rng.choice(
                ["", "1 2 3\n", "x y\n", "-4 4\n", "9" * 200]
            )
        yield "".join(lines)


@pytest.mark.parametrize("name", ["a.tfrecord", "a.ofrecord"])
def test_hostile_indexes_give_the_true_records(tmp_path, rng, name):
    overhead = 16 if name.endswith("tfrecord") else 8
    records = [rng.randbytes(rng.choice([1, 3, 20, 40])) for _ in range(rng.randrange(1, 6))]
    # Payloads that hold valid frames too, the hardest case for an index check.
    records.append(frame(b"hidden") if overhead == 16 else b"\x06" + bytes(7) + b"hidden")
    _write(tmp_path / name, records)
    for text in _hostile_indexes(rng, records, overhead):
        (tmp_path / (name + ".idx")).write_text(text)
        with rk.open(tmp_path / name) as reader, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = [reader[i] for i in range(len(reader))] + reader.read(range(len(reader)))
        assert got == records * 2
        # Only an index that disagrees with the file is reported, once, naming the file.
        assert len(caught) <= 1
        assert all(w.category is StaleIndexWarning for w in caught)
        assert all(os.fspath(tmp_path / name) in str(w.message) for w in caught)


def test_explicit_index_path(tmp_path):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord", tmp_path / "elsewhere.index")
    assert not (tmp_path / "a.tfrecord.idx").exists()
    with rk.open(tmp_path / "a.tfrecord", index=tmp_path / "elsewhere.index") as reader:
        assert reader.read([3, 0]) == [RECORDS[3], RECORDS[0]]


def test_an_index_path_is_refused_for_the_shards_of_a_dataset(tmp_path):
    """One index describes one file: a dataset's shards of the same size but other records would be misread."""
    shards = [[b"ab", b"cdef"], [b"abcd", b"ef"]]  # the same bytes in all, other record boundaries
    with rk.ShardWriter(str(tmp_path / "d" / "part-{shard}.tfrecord"), max_records=2) as writer:
        for records in shards:
            writer.write_many(records)
    files = sorted((tmp_path / "d").glob("part-*.tfrecord"))
    assert len(files) == 2
    assert files[0].stat().st_size == files[1].stat().st_size
    write_index(files[0], tmp_path / "first.index")
    for source in (tmp_path / "d", files):
        with pytest.raises(ValueError, match="index= takes a path only when reading a single file"):
            rk.open(source, index=tmp_path / "first.index")
    resolved = rk.io.resolve_sources(tmp_path / "d")
    with pytest.raises(ValueError, match="index= takes a path only when reading a single file"):
        resolved.open_part(1, index=tmp_path / "first.index")
    with rk.open(tmp_path / "d") as reader:  # each shard's own index
        assert reader.read([3, 2, 1, 0]) == [b"ef", b"abcd", b"cdef", b"ab"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0 21\n21 16\n", "covers"),  # one record missing at the end
        ("0 21\n37 516\n21 16\n553 21\n", "previous records end"),  # out of order
        ("0 21\n21 16\n37 516\n553 99\n", "past the end"),
        ("0 21\nnonsense\n", "malformed"),
        ("", "covers 0 bytes"),
    ],
)
def test_stale_index(tmp_path, content, message):
    _write(tmp_path / "a.tfrecord")
    (tmp_path / "a.tfrecord.idx").write_text(content)
    with rk.open(tmp_path / "a.tfrecord") as reader:
        assert list(iter(reader)) == RECORDS  # iteration never needs the index
        with pytest.warns(StaleIndexWarning, match=message):
            assert len(reader) == len(RECORDS)
        assert reader.read([3, 0]) == [RECORDS[3], RECORDS[0]]


def test_the_index_of_a_file_rewritten_by_another_program_is_ignored(tmp_path):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord")
    (tmp_path / "a.tfrecord").write_bytes(frame(b"x" * 5) + frame(b"y"))
    with pytest.warns(StaleIndexWarning, match="past the end"):
        assert list(rk.open(tmp_path / "a.tfrecord")) == [b"x" * 5, b"y"]  # list() asks len()
    with rk.open(tmp_path / "a.tfrecord") as reader, pytest.warns(StaleIndexWarning):
        assert reader[0] == b"x" * 5


def test_index_boundaries_that_disagree_with_headers(tmp_path):
    (tmp_path / "a.tfrecord").write_bytes(frame(b"ab") + frame(b"cd"))
    (tmp_path / "a.tfrecord.idx").write_text("0 17\n17 19\n")  # covers the file, wrong split
    with rk.open(tmp_path / "a.tfrecord") as reader:
        with pytest.warns(StaleIndexWarning, match="record 0 spans bytes 0-17"):
            assert reader[0] == b"ab"
        assert reader[1] == b"cd"


def test_damage_in_the_file_still_raises_beside_a_stale_index(tmp_path):
    _write(tmp_path / "a.tfrecord")
    write_index(tmp_path / "a.tfrecord")
    data = (tmp_path / "a.tfrecord").read_bytes()
    (tmp_path / "a.tfrecord").write_bytes(data[:-3])  # cut inside the last record
    with rk.open(tmp_path / "a.tfrecord") as reader, pytest.raises(rk.TruncatedRecordError):
        len(reader)


@pytest.mark.interop
def test_a_file_rewritten_by_tensorflow_is_read_despite_the_old_index(tmp_path):
    """TensorFlow rewrites the file and leaves recordkit's old index beside it: the records are TF's."""
    tf = pytest.importorskip("tensorflow")
    from recordkit.data import Dataset

    path = tmp_path / "x.tfrecord"
    _write(path, [b"old %d" % i * 50 for i in range(20)])
    written = write_index(path)
    new = [b"tf %d" % i * 3 for i in range(7)]
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for record in new:
            writer.write(record)
    assert os.path.exists(written)  # the stale index is still there
    with pytest.warns(StaleIndexWarning, match=re.escape(os.fspath(path))):
        assert list(rk.open(path)) == new
    with pytest.warns(StaleIndexWarning):
        assert len(rk.open(path)) == len(new)
    with pytest.warns(StaleIndexWarning):
        assert list(Dataset(path)) == new
    with rk.open(path) as reader, pytest.warns(StaleIndexWarning):
        assert reader.read([6, 0]) == [new[6], new[0]]


def test_index_of_compressed_or_ffrecord_files_is_refused(tmp_path):
    _write(tmp_path / "a.tfrecord.gz")
    with pytest.raises(UnsupportedOperationError):
        write_index(tmp_path / "a.tfrecord.gz")
    _write(tmp_path / "a.ffr")
    with pytest.raises(TypeError, match="own index"):
        write_index(tmp_path / "a.ffr")


@pytest.mark.interop
def test_vahidk_tfrecord_reads_our_index(tmp_path):
    if importlib.util.find_spec("tfrecord") is None:  # not imported here: see below
        pytest.skip("the tfrecord package is not installed")
    encode_example = pytest.importorskip("recordkit.decode.messages").encode_example
    records = [encode_example({"label": [i], "name": [b"n%d" % i]}) for i in range(10)]
    _write(tmp_path / "a.tfrecord", records)
    index_path = write_index(tmp_path / "a.tfrecord")
    # In a subprocess: vahidk tfrecord registers its own "tensorflow" protos, which would clash with
    # TensorFlow's in this process.
    script = (
        "import sys; from tfrecord.reader import tfrecord_loader; "
        "items = tfrecord_loader(sys.argv[1], sys.argv[2], {'label': 'int'}, shard=(1, 2)); "
        "print(' '.join(str(int(item['label'][0])) for item in items))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, os.fspath(tmp_path / "a.tfrecord"), index_path],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.split() == ["5", "6", "7", "8", "9"]


def test_rewriting_a_file_removes_its_sidecar_index(tmp_path):
    path = tmp_path / "data.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many([b"first", b"second", b"third"])
    write_index(path, hidden=True)
    write_index(path, f"{path}.idx")  # and one under the other name
    with rk.open(path, "w") as writer:
        writer.write(b"only")
    assert os.listdir(tmp_path) == ["data.tfrecord"]  # both indexes described the old file
    assert list(rk.open(path)) == [b"only"]
    assert len(rk.open(path)) == 1


def test_an_aborted_rewrite_keeps_the_file_and_its_index(tmp_path):
    path = tmp_path / "data.tfrecord"
    with rk.open(path, "w") as writer:
        writer.write_many([b"first", b"second"])
    write_index(path)
    writer = rk.open(path, "w")
    writer.write(b"new")
    writer.abort()  # what leaving a with block by an exception does
    assert list(rk.open(path)) == [b"first", b"second"]
    assert os.path.exists(tmp_path / "data.tfrecord.idx")


def test_load_index_itself_still_raises_for_a_stale_index(tmp_path):
    """The low-level loader reports; readers turn its error into a StaleIndexWarning and scan."""
    _write(tmp_path / "a.tfrecord")
    (tmp_path / "a.tfrecord.idx").write_text("0 21\n")
    size = (tmp_path / "a.tfrecord").stat().st_size
    with pytest.raises(StaleIndexError, match="covers 21 bytes"):
        load_index(tmp_path / "a.tfrecord.idx", size=size, path=os.fspath(tmp_path / "a.tfrecord"))


def _stale(tmp_path):
    """A file rewritten by another program after its index was written: the index no longer fits."""
    path = tmp_path / "stale.tfrecord"
    _write(path, [b"old %d" % i * 30 for i in range(6)])
    write_index(path)
    path.write_bytes(b"".join(frame(b"new %d" % i) for i in range(3)))
    return path


@pytest.mark.parametrize(
    "how",
    [
        lambda path: len(rk.open(path)),
        lambda path: rk.open(path)[2],
        lambda path: rk.open(path).read([2, 0]),
        lambda path: list(rk.open(path)),
        lambda path: list(rk.data.Dataset(path)),
    ],
    ids=["len", "index", "read", "iterate", "Dataset"],
)
def test_a_stale_index_warning_points_at_the_line_of_the_user(tmp_path, how):
    import recordkit.data  # noqa: F401  (rk.data in the lambda)

    path = _stale(tmp_path)
    with pytest.warns(StaleIndexWarning, match=re.escape(os.fspath(path))) as caught:
        how(path)
    assert {warning.filename for warning in caught} == {__file__}
