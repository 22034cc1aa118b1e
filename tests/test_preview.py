"""The notebook views (``_repr_html_``) of readers, datasets and parsed batches: escaping, limits, embedded
images and damaged records. The rendered page in a real browser is tests/test_notebook_preview.py."""

from __future__ import annotations

import base64
import html.parser
import io
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.data import Dataset
from recordkit.decode import preview
from recordkit.decode.preview import MAX_IMAGE_BYTES, MAX_PAGE_IMAGE_BYTES, MAX_RECORDS

HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
# The tags a preview may contain: anything else would be markup taken from a record.
TAGS = {"style", "div", "b", "i", "p", "br", "table", "tr", "th", "td", "code", "span", "img"}


class Page(html.parser.HTMLParser):
    """The tags, attributes and text of an HTML fragment, as a browser's tokenizer sees them."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def images(self) -> list[bytes]:
        found = []
        for tag, attrs in self.tags:
            if tag == "img":
                src = attrs["src"] or ""
                head, _, data = src.partition(",")
                assert head in ("data:image/jpeg;base64", "data:image/png;base64"), src[:60]
                found.append(base64.b64decode(data))
        return found


def check_safe(text: str) -> Page:
    """Assert that ``text`` holds only the preview's own markup, and return it parsed."""
    page = Page(text)
    assert {tag for tag, _ in page.tags} <= TAGS, {tag for tag, _ in page.tags} - TAGS
    for _, attrs in page.tags:
        assert set(attrs) <= {"class", "colspan", "rowspan", "src", "title", "alt"}, attrs
    return page


def example(features: dict[str, Any]) -> bytes:
    ex = example_pb2.Example()
    for name, values in features.items():
        feature = ex.features.feature[name]
        if isinstance(values[0], bytes):
            feature.bytes_list.value.extend(values)
        elif isinstance(values[0], float):
            feature.float_list.value.extend(values)
        else:
            feature.int64_list.value.extend(values)
    return ex.SerializeToString()


def write(path: Path, records: list[bytes], **options: Any) -> str:
    with rk.open(path, "w", **options) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    pixels = bytes(range(width * height * 3))
    return preview._png(pixels, width, height, 3)


def test_hostile_feature_names_and_values_are_escaped(tmp_path: Path) -> None:
    records = [example({HOSTILE: [HOSTILE.encode()], "n": [1, 2]}), HOSTILE.encode()]
    path = write(tmp_path / "x.tfrecord", records)
    with rk.open(path) as reader:
        text = reader._repr_html_()
    page = check_safe(text)
    assert "<script" not in text
    words = "".join(page.text)
    # The hostile name and value are there, as text: the name in full, the value as its Python repr.
    assert HOSTILE in words
    assert repr(HOSTILE) in words
    # The second record is no Example: its bytes are text, shown as such (also escaped).
    assert words.count(repr(HOSTILE)) == 2
    batch = preview.batch_html({HOSTILE: np.array([HOSTILE.encode()], dtype=object)}, title=HOSTILE)
    assert "".join(check_safe(batch).text).count(HOSTILE) >= 2


def test_limits_bound_records_values_and_text(tmp_path: Path) -> None:
    long_text = b"a" * 1_000_000
    records = [example({"big": list(range(10_000)), "text": [long_text]}) for _ in range(50)]
    path = write(tmp_path / "x.tfrecord", records)
    with rk.open(path) as reader:
        text = reader._repr_html_()
    page = check_safe(text)
    body = [tag for tag, _ in page.tags if tag == "tr"]
    assert len(text) < 20_000
    words = "".join(page.text)
    assert "… more records" in words
    assert words.count("(9992 more)") == MAX_RECORDS  # 8 of the 10,000 values, in each record shown
    assert "a" * 80 + "…" in words
    assert "a" * 81 not in words  # the megabyte of text cut
    # The facts, the records table's two head rows, a row per record and one for the rest: none per value.
    assert len(body) == 5 + 2 + MAX_RECORDS + 1
    # A feature with many names: the first ones only.
    many = example({f"f{i:04}": [i] for i in range(1000)})
    cells = preview.records_html("t", [], [many])
    assert "f0000" in cells
    assert "f0999" not in cells
    assert "968 more features" in cells


def test_images_are_embedded_as_they_are_stored(tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    buffer = io.BytesIO()
    image.new("RGB", (40, 30), (200, 10, 10)).save(buffer, "JPEG")
    jpeg = buffer.getvalue()
    png = png_bytes()
    path = write(tmp_path / "x.tfrecord", [example({"image": [jpeg], "mask": [png]})])
    with rk.open(path) as reader:
        page = check_safe(reader._repr_html_())
    assert page.images() == [jpeg, png]
    titles = [attrs["title"] for tag, attrs in page.tags if tag == "img"]
    assert titles == [f"JPEG 40x30, {len(jpeg)} B", f"PNG 4x3, {len(png)} B"]
    with image.open(io.BytesIO(page.images()[1])) as decoded:
        assert decoded.size == (4, 3)
        assert decoded.tobytes() == bytes(range(36))


def test_image_size_caps() -> None:
    big = png_bytes() + b"\0" * MAX_IMAGE_BYTES
    page = check_safe(preview.records_html("t", [], [example({"image": [big]})]))
    assert page.images() == []
    assert "not shown: over 256 KiB" in "".join(page.text)
    # Many images below the cap each: the page holds at most MAX_PAGE_IMAGE_BYTES of them.
    near = png_bytes() + b"\0" * (MAX_IMAGE_BYTES - 1000)
    page = check_safe(preview.records_html("t", [], [example({"image": [near] * 8})] * 3))
    embedded = page.images()
    assert 0 < len(embedded) < 24
    assert sum(map(len, embedded)) <= MAX_PAGE_IMAGE_BYTES


def test_a_damaged_record_shows_its_error(tmp_path: Path) -> None:
    records = [example({"n": [i]}) for i in range(4)]
    path = write(tmp_path / "x.tfrecord", records)
    data = bytearray(Path(path).read_bytes())
    second = 16 + len(records[0])
    data[second + 12 + 2] ^= 0xFF  # a byte of record 1's payload: its CRC no longer matches
    Path(path).write_bytes(bytes(data))
    with rk.open(path) as reader:
        with pytest.raises(rk.ChecksumError):
            list(reader)
        page = check_safe(reader._repr_html_())
    words = "".join(page.text)
    assert "ChecksumError" in words
    assert path in words
    assert "record 1" in words
    assert [attrs for tag, attrs in page.tags if attrs.get("class") == "rk-error"]
    # A file cut inside a record: the records before it, then the TruncatedRecordError.
    Path(path).write_bytes(bytes(data[: second + 5]))
    with rk.open(path) as reader:
        words = "".join(check_safe(reader._repr_html_()).text)
    assert "TruncatedRecordError" in words


def test_payload_kinds(tmp_path: Path) -> None:
    raw = bytes(range(200))
    path = write(tmp_path / "x.tfrecord", [raw])
    with rk.open(path) as reader:
        words = "".join(check_safe(reader._repr_html_()).text)
    assert "raw" in words
    assert "00 01 02 03" in words
    assert "…" in words
    seq = example_pb2.SequenceExample()
    seq.context.feature["id"].int64_list.value.append(7)
    for step in range(3):
        seq.feature_lists.feature_list["tokens"].feature.add().int64_list.value.extend([step, step])
    words = "".join(check_safe(preview.records_html("t", [], [seq.SerializeToString()])).text)
    assert "SequenceExample" in words
    assert "3 steps" in words
    assert "tokens" in words
    record = record_pb2.OFRecord()
    record.feature["label"].int32_list.value.append(3)
    of = write(tmp_path / "x.ofrecord", [record.SerializeToString()])
    with rk.open(of) as reader:
        words = "".join(check_safe(reader._repr_html_()).text)
    assert "OFRecord" in words
    assert "int32_list" in words
    assert "ofrecord" in words


def test_reader_view_reads_nothing_it_should_not(tmp_path: Path) -> None:
    records = [example({"n": [i]}) for i in range(10)]
    path = write(tmp_path / "x.tfrecord", records)

    class Stream(io.BytesIO):
        def seekable(self) -> bool:
            return False

    stream = Stream(Path(path).read_bytes())
    reader = rk.open(stream, format="tfrecord")
    words = "".join(check_safe(reader._repr_html_()).text)
    assert "a stream" in words
    assert list(reader) == records  # nothing consumed
    with rk.open(path) as reader:
        it = iter(reader)
        assert next(it) == records[0]
        assert "10" in "".join(Page(reader._repr_html_()).text)
        assert next(it) == records[1]  # the view's iteration is its own
    assert "closed" in reader._repr_html_()


def test_reader_view_counts_a_large_file_only_where_its_format_holds_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over COUNT_BYTES, TFRecord (whose count is a scan of every header) is not counted, FFRecord (whose
    header holds the count) is; a manifest's counts are used for any format."""
    from recordkit.io import preview as reader_preview

    monkeypatch.setattr(reader_preview, "COUNT_BYTES", 0)
    records = [example({"n": [i]}) for i in range(7)]
    with rk.open(write(tmp_path / "x.tfrecord", records)) as reader:
        assert "not counted here" in "".join(Page(reader._repr_html_()).text)
    with rk.open(write(tmp_path / "x.ffr", records)) as reader:
        words = "".join(Page(reader._repr_html_()).text)
    assert "not counted" not in words
    assert "7" in words
    with rk.ShardWriter(
        str(tmp_path / "ds" / "part-{shard:05d}.tfrecord"), max_records=3
    ) as writer:
        writer.write_many(records)
    with rk.open(tmp_path / "ds") as reader:
        words = "".join(Page(reader._repr_html_()).text)
    assert "not counted" not in words


def test_dataset_view_does_not_run_the_pipeline(tmp_path: Path) -> None:
    records = [example({"n": [i]}) for i in range(10)]
    path = write(tmp_path / "x.tfrecord", records)
    calls = []
    ds = Dataset(path).shuffle(4).map(calls.append)
    page = check_safe(ds._repr_html_())
    words = "".join(page.text)
    assert repr(ds) in words
    assert path in words
    assert "int64_list" in words
    assert calls == []
    assert len(re.findall("Example", words)) == MAX_RECORDS


def test_parsed_batch_is_a_dict_with_a_view() -> None:
    image = pytest.importorskip("PIL.Image")
    pixels = np.arange(200 * 100 * 3, dtype=np.uint8).reshape(200, 100, 3)
    buffer = io.BytesIO()
    image.fromarray(pixels).save(buffer, "PNG")
    records = [
        example({"image": [buffer.getvalue()], "n": [i], "v": [0.5] * (i + 1)}) for i in range(7)
    ]
    specs = {"image": rk.Image(), "n": rk.FixedLen((), np.int64), "v": rk.VarLen(np.float32)}
    batch = rk.parse_examples(records, specs)
    assert isinstance(batch, dict)
    assert pickle.loads(pickle.dumps(batch)).keys() == batch.keys()
    page = check_safe(batch._repr_html_())
    words = "".join(page.text)
    assert "Ragged float32" in words
    assert "(7,)" in words
    assert "2 more rows" in words
    assert "0.5, 0.5" in words
    thumbnails = page.images()
    assert len(thumbnails) == MAX_RECORDS
    with image.open(io.BytesIO(thumbnails[0])) as thumb:
        # 200x100 taken every 3rd pixel (fits 96 px): 67x34, the same pixels.
        assert thumb.size == (34, 67)
        assert np.array_equal(np.asarray(thumb), pixels[::3, ::3])


def test_sparse_columns_show_their_entries() -> None:
    from recordkit.decode.sparse import Sparse

    records = [example({"idx": [1, 3], "val": [0.5, 2.0]}), example({"idx": [0], "val": [7.0]})]
    batch = rk.parse_examples(records, {"sp": Sparse("idx", "val", np.float32, 5)})
    words = "".join(check_safe(batch._repr_html_()).text)
    assert "SparseArray float32" in words
    assert "(2, 5)" in words
    assert "(1,): 0.5, (3,): 2.0" in words
    assert "(0,): 7.0" in words
