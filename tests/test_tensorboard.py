"""recordkit.tensorboard against tensorboard's EventAccumulator and tbparse, on files the real writers write.

Each writer (TF2's tf.summary, PyTorch's and tensorboardX's SummaryWriter) logs scalars, histograms, text,
images and hyperparameters into its own run; the oracles read the same files. Damaged files raise typed errors.
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recordkit as rk
from recordkit._proto.tensorboard import event_pb2, summary_pb2
from recordkit.errors import ChecksumError, DecodeError, TruncatedRecordError

pytest.importorskip("pandas")
pytestmark = [
    pytest.mark.interop,
    # tbparse 0.0.9 calls sort_values(inplace=True), which pandas 3.1 deprecates
    pytest.mark.filterwarnings("ignore:The inplace keyword"),
]

STEPS = 4


def _tf_run(directory):
    tf = pytest.importorskip("tensorflow")
    from tensorboard.plugins.hparams import api as hp

    writer = tf.summary.create_file_writer(directory)
    with writer.as_default():
        hp.hparams({"lr": 0.25, "optimizer": "adam", "batch_norm": True})
        for step in range(STEPS):
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
            tf.summary.scalar("lr", tf.constant(0.1 * step, tf.float64), step=step)
            tf.summary.histogram("weights", np.arange(10.0) * step, step=step, buckets=5)
            tf.summary.text("note", f"step {step}", step=step)
            tf.summary.image("img", np.full((2, 4, 5, 3), step / 4, np.float32), step=step)
    writer.close()


def _torch_run(directory):
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    pytest.importorskip("PIL")  # add_image encodes with Pillow
    writer = tensorboard.SummaryWriter(directory)
    for step in range(STEPS):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_scalar("loss_new", 2.0 * step, step, new_style=True)
        writer.add_histogram("weights", np.arange(10.0) * step, step)
        writer.add_text("note", f"step {step}", step)
        writer.add_image("img", np.full((3, 4, 5), step * 40, np.uint8), step)
    writer.add_hparams({"lr": 0.5, "optimizer": "sgd"}, {"hparam/acc": 0.75}, run_name="hp")
    writer.close()


def _tbx_run(directory):
    tensorboardx = pytest.importorskip("tensorboardX")
    pytest.importorskip("PIL")  # add_image encodes with Pillow
    writer = tensorboardx.SummaryWriter(directory)
    for step in range(STEPS):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_histogram("weights", np.arange(10.0) * step, step)
        writer.add_text("note", f"step {step}", step)
        writer.add_image("img", np.full((3, 4, 5), step * 40, np.uint8), step)
    writer.close()


WRITERS = {"tf": _tf_run, "torch": _torch_run, "tbx": _tbx_run}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def run(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp("logs") / request.param
    WRITERS[request.param](str(directory))
    return request.param, str(directory)


def accumulator(path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(
        path, size_guidance={"scalars": 0, "tensors": 0, "histograms": 0, "images": 0}
    )
    acc.Reload()
    return acc


def make_ndarray(proto):
    from tensorboard.util import tensor_util

    return tensor_util.make_ndarray(proto)


def test_scalars_equal_event_accumulator(run):
    name, directory = run
    acc = accumulator(directory)
    expected = set()
    for tag in acc.Tags()["scalars"]:
        expected |= {(tag, e.step, e.wall_time, e.value) for e in acc.Scalars(tag)}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
            expected |= {
                (tag, e.step, e.wall_time, float(make_ndarray(e.tensor_proto)))
                for e in acc.Tensors(tag)
            }
    frame = rk.tensorboard.scalars(directory)
    assert list(frame.columns) == ["run", "tag", "step", "wall_time", "value"]
    assert set(frame.run) == ({".", "hp"} if name == "torch" else {"."})
    frame = frame[frame.run == "."]  # the accumulator reads one directory
    found = set(zip(frame.tag.astype(str), frame.step, frame.wall_time, frame.value, strict=True))
    assert len(found) == len(frame) == len(expected) > 0
    assert found == expected
    assert frame.step.dtype == np.int64
    assert frame.value.dtype == np.float64


def test_scalars_equal_tbparse(run):
    tbparse = pytest.importorskip("tbparse")
    name, directory = run
    theirs = tbparse.SummaryReader(directory, extra_columns={"wall_time"}).scalars
    ours = rk.tensorboard.scalars(directory)
    # tbparse lists simple_value summaries only; TF2 and new_style scalars are in its tensors
    legacy = ours[ours.tag.isin(set(theirs.tag))] if len(theirs) else ours.iloc[:0]
    if name == "tf":
        assert len(theirs) == 0
        tensors = tbparse.SummaryReader(directory, extra_columns={"wall_time"}).tensors
        tensors = tensors[tensors.tag.isin({"loss", "lr"})]
        assert sorted(zip(tensors.tag, tensors.step, tensors.value, strict=True)) == sorted(
            zip(ours.tag.astype(str), ours.step, ours.value, strict=True)
        )
        return
    expected = sorted(zip(theirs.tag, theirs.step, theirs.wall_time, theirs.value, strict=True))
    assert expected == sorted(
        zip(legacy.tag.astype(str), legacy.step, legacy.wall_time, legacy.value, strict=True)
    )


def test_tags_filter_and_plain_import(run):
    from recordkit.tensorboard import scalars

    _, directory = run
    frame = scalars(directory, tags="loss")
    assert set(frame.tag) == {"loss"}
    assert len(frame) == STEPS
    assert len(scalars(directory, tags=["nothing"])) == 0


def test_histograms_equal_event_accumulator(run):
    name, directory = run
    acc = accumulator(directory)
    frame = rk.tensorboard.histograms(directory)
    assert len(frame) == STEPS
    for row in frame.itertuples():
        assert len(row.edges) == len(row.counts) + 1
        if name == "tf":
            (event,) = [e for e in acc.Tensors(row.tag) if e.step == row.step]
            buckets = make_ndarray(event.tensor_proto)
            np.testing.assert_array_equal(row.counts, buckets[:, 2])
            np.testing.assert_array_equal(row.edges[1:], buckets[:, 1])
            assert row.edges[0] == buckets[0, 0]
        else:
            (event,) = [e for e in acc.Histograms(row.tag) if e.step == row.step]
            histo = event.histogram_value
            check_legacy_histogram(row, histo)
            assert (row.num, row.sum, row.sum_squares) == (histo.num, histo.sum, histo.sum_squares)
        assert np.all(np.diff(row.edges) >= 0)
        assert row.counts.sum() == row.num


def check_legacy_histogram(row, histo):
    """A row of a legacy HistogramProto: every stored bucket, edges that never decrease, TensorBoard's own
    edges (tensorboard.data_compat: min, inner limits, max) over the non-empty buckets, and zero-width
    buckets at min or max for the empty ones the writers put outside them."""
    from tensorboard import data_compat
    from tensorboard.compat.proto import summary_pb2 as tensorboard_summary

    np.testing.assert_array_equal(row.counts, histo.bucket)
    assert len(row.edges) == len(histo.bucket) + 1
    assert np.all(np.diff(row.edges) >= 0), row.edges
    assert (row.edges[0], row.edges[-1]) == (histo.min, histo.max)
    assert (row.min, row.max) == (histo.min, histo.max)
    inner = np.asarray(histo.bucket_limit[:-1])
    inside = (inner >= histo.min) & (inner <= histo.max)
    np.testing.assert_array_equal(row.edges[1:-1][inside], inner[inside])
    # TensorBoard's migration of the value keeps the buckets from the first non-empty one to the last
    value = tensorboard_summary.Summary.Value(tag="h")
    value.histo.MergeFrom(
        tensorboard_summary.HistogramProto(
            min=histo.min, max=histo.max, bucket_limit=histo.bucket_limit, bucket=histo.bucket
        )
    )
    migrated = make_ndarray(data_compat.migrate_value(value).tensor)
    nonzero = np.flatnonzero(row.counts)
    first, last = nonzero[0], nonzero[-1]
    ours = np.stack([row.edges[first : last + 1], row.edges[first + 1 : last + 2]], axis=1)
    np.testing.assert_allclose(ours, migrated[:, :2], rtol=1e-6)  # TensorBoard stores float32
    np.testing.assert_array_equal(row.counts[first : last + 1], migrated[:, 2])
    assert not row.counts[:first].any()
    assert not row.counts[last + 1 :].any()
    assert (row.edges[: first + 1] == histo.min).all()
    assert (row.edges[last + 1 :] == histo.max).all()


HISTOGRAM_DATA = {
    "repeats": [1.0, 2, 2, 3, 3, 3],
    "signs": [-5.0, -1, 0, 2],
    "constant": [0.0] * 5,
    "one": [7.25],
    "wide": [-1e6, -3.5, 1e-9, 0.5, 1e6],
}


def _legacy_histogram_writers(directory):
    """The same data as histograms by PyTorch, tensorboardX and TF1's C++ histogram, one run each."""
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    tensorboardx = pytest.importorskip("tensorboardX")
    for name, module in (("torch", tensorboard), ("tbx", tensorboardx)):
        writer = module.SummaryWriter(os.path.join(directory, name))
        for tag, data in HISTOGRAM_DATA.items():
            writer.add_histogram(tag, np.array(data), 0)
        writer.close()
    tf = pytest.importorskip("tensorflow")
    with tf.Graph().as_default():
        ops = [
            tf.compat.v1.summary.histogram(tag, tf.constant(data, tf.float64))
            for tag, data in HISTOGRAM_DATA.items()
        ]
        with tf.compat.v1.Session() as session:
            summaries = session.run(ops)
    records = [
        event_pb2.Event(
            wall_time=1.0, step=0, summary=summary_pb2.Summary.FromString(summary)
        ).SerializeToString()
        for summary in summaries
    ]
    os.makedirs(os.path.join(directory, "tf1"))
    write_events(os.path.join(directory, "tf1", "events.out.tfevents.1.x"), records)


def test_legacy_histogram_edges_never_decrease(tmp_path):
    """PyTorch and tensorboardX store an empty bucket whose limit is below the data's min first; TF1 one
    before and one up to the largest double after: the edges are min-clipped, as numpy's never decrease."""
    _legacy_histogram_writers(str(tmp_path))
    frame = rk.tensorboard.histograms(tmp_path)
    assert sorted(set(frame.run)) == ["tbx", "tf1", "torch"]
    assert len(frame) == 3 * len(HISTOGRAM_DATA)
    for run in ("tbx", "tf1", "torch"):
        acc = accumulator(str(tmp_path / run))
        for row in frame[frame.run == run].itertuples():
            data = np.array(HISTOGRAM_DATA[row.tag])
            (event,) = acc.Histograms(row.tag)
            check_legacy_histogram(row, event.histogram_value)
            assert row.counts.sum() == row.num == len(data)
            assert (row.min, row.max) == (data.min(), data.max())
    repeats = frame[(frame.run == "torch") & (frame.tag == "repeats")].iloc[0]
    assert repeats.edges[:3].tolist() == [1.0, 1.0, pytest.approx(1.0089710279437536)]
    assert repeats.edges[-1] == 3.0


def test_an_empty_legacy_histogram_has_edges_that_never_decrease(tmp_path):
    """TF1's histogram of no values: min the largest double, max the smallest, one empty bucket."""
    event = event_pb2.Event(wall_time=1.0, step=0)
    value = event.summary.value.add(tag="h")
    big = np.finfo(np.float64).max
    value.histo.min, value.histo.max = big, -big
    value.histo.bucket_limit.append(big)
    value.histo.bucket.append(0.0)
    path = tmp_path / "events.out.tfevents.1.x"
    write_events(path, [event.SerializeToString()])
    (row,) = rk.tensorboard.histograms(path).itertuples()
    assert row.edges.tolist() == [big, big]
    assert row.counts.tolist() == [0.0]


@functools.cache
def _torch_default_bins():
    """The bins PyTorch's add_histogram uses for bins="tensorflow" (the default)."""
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    with tempfile.TemporaryDirectory() as directory:
        writer = tensorboard.SummaryWriter(directory)
        writer.close()
    return writer.default_bins


@settings(max_examples=40)
@given(
    st.lists(
        st.floats(-1e12, 1e12, allow_nan=False, allow_subnormal=False), min_size=1, max_size=50
    )
)
def test_pytorch_histograms_read_as_numpy_bins_them(data):
    """Any data PyTorch's add_histogram bins: the edges, given to numpy.histogram, count the data into the
    stored buckets; they never decrease and run from the data's min to its max."""
    summary_module = pytest.importorskip("torch.utils.tensorboard.summary")
    values = np.array(data, np.float64)
    summary = summary_module.histogram("h", values, _torch_default_bins())
    event = event_pb2.Event(wall_time=1.0, step=0)
    event.summary.ParseFromString(summary.SerializeToString())
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "events.out.tfevents.1.x")
        write_events(path, [event.SerializeToString()])
        (row,) = rk.tensorboard.histograms(path).itertuples()
    assert np.all(np.diff(row.edges) >= 0)
    assert (row.edges[0], row.edges[-1]) == (values.min(), values.max())
    np.testing.assert_array_equal(row.counts, list(event.summary.value[0].histo.bucket))
    np.testing.assert_array_equal(np.histogram(values, row.edges)[0], row.counts)
    assert row.counts.sum() == row.num == len(values)


def test_text_equals_tbparse(run):
    tbparse = pytest.importorskip("tbparse")
    _, directory = run
    theirs = tbparse.SummaryReader(directory).text
    ours = rk.tensorboard.text(directory)
    # tbparse strips the "/text_summary" PyTorch and tensorboardX append; recordkit keeps the tag as written
    tags = [t.removesuffix("/text_summary") for t in ours.tag.astype(str)]
    assert sorted(zip(tags, ours.step, ours.value, strict=True)) == sorted(
        zip(theirs.tag, theirs.step, theirs.value, strict=True)
    )
    assert sorted(ours.value) == [f"step {s}" for s in range(STEPS)]


def test_images_decoded_as_tensorboard_stores_them(run):
    pytest.importorskip("PIL")
    import io

    from PIL import Image

    name, directory = run
    acc = accumulator(directory)
    frame = rk.tensorboard.images(directory)
    per_step = 2 if name == "tf" else 1
    assert len(frame) == STEPS * per_step
    for row in frame.itertuples():
        if name == "tf":
            (event,) = [e for e in acc.Tensors(row.tag) if e.step == row.step]
            encoded = make_ndarray(event.tensor_proto)[2 + row.index]
        else:
            (event,) = [e for e in acc.Images(row.tag) if e.step == row.step]
            encoded = event.encoded_image_string
        expected = np.asarray(Image.open(io.BytesIO(encoded)).convert("RGB"))
        np.testing.assert_array_equal(row.image, expected)
        assert row.image.shape == (row.height, row.width, 3) == (4, 5, 3)


def test_hparams_equal_tbparse(run):
    tbparse = pytest.importorskip("tbparse")
    name, directory = run
    ours = rk.tensorboard.hparams(directory)
    theirs = tbparse.SummaryReader(directory).hparams
    expected = {"tf": {"lr": 0.25, "optimizer": "adam", "batch_norm": True}, "tbx": {}}
    expected["torch"] = {"lr": 0.5, "optimizer": "sgd"}
    assert dict(zip(ours.name, ours.value, strict=True)) == expected[name]
    if len(theirs):
        assert dict(zip(theirs.tag, theirs.value, strict=True)) == expected[name]
    if name == "torch":
        assert set(ours.run) == {"hp"}


def test_tensors_list_every_tensor_summary_with_its_plugin(run):
    _name, directory = run
    acc = accumulator(directory)
    frame = rk.tensorboard.tensors(directory)
    expected = sum(len(acc.Tensors(tag)) for tag in acc.Tags()["tensors"])
    assert len(frame) == expected
    for row in frame.itertuples():
        assert row.plugin == acc.SummaryMetadata(row.tag).plugin_data.plugin_name
        (event,) = [e for e in acc.Tensors(row.tag) if e.step == row.step]
        np.testing.assert_array_equal(np.asarray(row.value), make_ndarray(event.tensor_proto))


def test_runs_are_named_as_tensorboard_names_them(tmp_path):
    for run in (".", "a", "a/b"):
        directory = tmp_path / run
        directory.mkdir(parents=True, exist_ok=True)
        write_events(directory / "events.out.tfevents.1.x", [_scalar(run, 1, 0.5)])
    (tmp_path / "notes.txt").write_text("not an event file")
    frame = rk.tensorboard.scalars(tmp_path)
    assert list(frame.run) == [".", "a", "a/b"]
    assert list(frame.tag) == [".", "a", "a/b"]
    with pytest.raises(FileNotFoundError):
        rk.tensorboard.scalars(tmp_path / "missing")


def _scalar(tag, step, value, wall_time=1.5):
    event = event_pb2.Event(wall_time=wall_time, step=step)
    event.summary.value.add(tag=tag, simple_value=value)
    return event.SerializeToString()


def write_events(path, records):
    with rk.open(str(path), "w", format="tfrecord") as writer:
        writer.write_many(records)


def test_irregular_records_are_read_as_protobuf_reads_them(tmp_path):
    """Several values in one event, a negative step, non-summary events and a scalar tensor written with
    float_val: the columnar walk hands them to protobuf."""
    many = event_pb2.Event(wall_time=2.0, step=3)
    many.summary.value.add(tag="a", simple_value=1.0)
    many.summary.value.add(tag="b", simple_value=2.0)
    tensor = event_pb2.Event(wall_time=3.0, step=4)
    value = tensor.summary.value.add(tag="t")
    value.metadata.plugin_data.plugin_name = "scalars"
    value.tensor.dtype = 2
    value.tensor.double_val.append(0.125)
    value.tensor.tensor_shape.SetInParent()
    later = event_pb2.Event(wall_time=4.0, step=5)
    later.summary.value.add(tag="t").tensor.CopyFrom(value.tensor)
    records = [
        event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString(),
        _scalar("a", -7, 0.5),
        many.SerializeToString(),
        tensor.SerializeToString(),
        later.SerializeToString(),
        _scalar("a", 0, 0.25),
    ]
    path = tmp_path / "events.out.tfevents.1.x"
    write_events(path, records)
    frame = rk.tensorboard.scalars(path)
    assert list(zip(frame.tag, frame.step, frame.value, strict=True)) == [
        ("a", -7, 0.5),
        ("a", 3, 1.0),
        ("b", 3, 2.0),
        ("t", 4, 0.125),
        ("t", 5, 0.125),
        ("a", 0, 0.25),
    ]


@pytest.fixture
def event_file(tmp_path):
    path = tmp_path / "events.out.tfevents.1.x"
    write_events(path, [_scalar("loss", step, step / 2) for step in range(1, 6)])
    return path


def test_a_bad_payload_checksum_names_the_record(event_file):
    data = bytearray(event_file.read_bytes())
    record = len(_scalar("loss", 1, 0.0)) + 16
    data[2 * record + 14] ^= 1  # inside record 2's payload
    event_file.write_bytes(bytes(data))
    with pytest.raises(ChecksumError) as info:
        rk.tensorboard.scalars(event_file)
    assert (info.value.path, info.value.index, info.value.offset) == (
        str(event_file),
        2,
        2 * record + 12,
    )
    assert len(rk.tensorboard.scalars(event_file, check_crc=False)) == 5


def test_a_bad_length_names_the_record(event_file):
    data = bytearray(event_file.read_bytes())
    record = len(_scalar("loss", 1, 0.0)) + 16
    data[3 * record] ^= 0x40
    event_file.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="length checksum") as info:
        rk.tensorboard.scalars(event_file)
    assert (info.value.index, info.value.offset) == (3, 3 * record)


@pytest.mark.parametrize("cut", [1, 5, 14])
def test_a_truncated_file_raises(event_file, cut):
    data = event_file.read_bytes()
    event_file.write_bytes(data[:-cut])
    with pytest.raises(TruncatedRecordError) as info:
        rk.tensorboard.scalars(event_file)
    assert info.value.index == 4


def test_a_record_that_is_not_an_event_raises_decode_error(tmp_path):
    path = tmp_path / "events.out.tfevents.1.x"
    write_events(path, [_scalar("a", 1, 1.0), b"\x0a\xff\xff"])
    with pytest.raises(DecodeError, match="record 1 at byte"):
        rk.tensorboard.scalars(path)
    bad_tag = bytearray(_scalar("ab", 1, 1.0))
    bad_tag[bad_tag.index(b"ab")] = 0xFF
    write_events(path, [bytes(bad_tag)])
    with pytest.raises(DecodeError, match="not UTF-8"):
        rk.tensorboard.scalars(path)


def test_bulk_frames_match_the_record_reader(event_file):
    from recordkit.formats.bulk import tfrecord_frames

    data = event_file.read_bytes()
    frames = tfrecord_frames(data)
    records = [data[a : a + n] for a, n in zip(frames.starts, frames.lengths, strict=True)]
    with rk.open(str(event_file), format="tfrecord") as reader:
        assert records == list(reader)
    partial = tfrecord_frames(data[:-3], final=False)
    assert len(partial.starts) == 4
    assert partial.end == 4 * (len(data) // 5)
    assert struct.unpack_from("<Q", data, partial.end)[0] == frames.lengths[-1]
    assert os.path.basename(str(event_file)).startswith("events.out.tfevents")


@pytest.mark.parametrize("first", ["recordkit", "tensorboard"])
def test_event_protos_load_beside_tensorboards(first):
    """recordkit's Event classes live in their own proto package: tensorboard's load in the same process,
    in either order, and both read each other's bytes."""
    import subprocess
    import sys
    import textwrap

    pytest.importorskip("tensorboard")
    script = textwrap.dedent(
        f"""
        if {first!r} == "recordkit":
            import recordkit.tensorboard
        from tensorboard.compat.proto import event_pb2 as theirs
        from recordkit._proto.tensorboard import event_pb2 as ours
        import recordkit.tensorboard

        event = theirs.Event(step=3, wall_time=1.5)
        event.summary.value.add(tag="x", simple_value=0.5)
        assert ours.Event.FromString(event.SerializeToString()).summary.value[0].simple_value == 0.5
        assert ours.Event.DESCRIPTOR.full_name == "recordkit.tensorboard.Event"
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def _log_tree(root):
    """logs/ with runs a, a/sub and b, and an event file in logs itself; each value's tag names its run."""
    for run in (".", "a", "a/sub", "b"):
        directory = root / "logs" / run
        directory.mkdir(parents=True, exist_ok=True)
        write_events(directory / "events.out.tfevents.1.x", [_scalar(run, 1, 0.5)])
    return root / "logs"


def test_lists_and_globs_name_runs_relative_to_their_common_parent(tmp_path, monkeypatch):
    logs = _log_tree(tmp_path)
    everything = rk.tensorboard.scalars(logs)
    assert list(everything.run) == list(everything.tag) == [".", "a", "a/sub", "b"]
    runs = ["a", "a/sub", "b"]
    for sources in (
        [logs / "a", logs / "b"],
        (str(logs / "b"), str(logs / "a")),  # the order given does not matter: runs by name
        str(logs / "[ab]"),
        [str(logs / "a*"), logs / "b"],
        iter([logs / "a", logs / "b"]),
    ):
        frame = rk.tensorboard.scalars(sources)
        assert list(frame.run) == list(frame.tag) == runs, sources
    # The runs of a glob keep the names the log directory gives them, however many it matches.
    frame = rk.tensorboard.scalars(str(logs / "*"))
    assert list(frame.run) == list(frame.tag) == [".", "a", "a/sub", "b"]
    assert list(rk.tensorboard.scalars(str(logs / "b*")).run) == ["b"]
    # One directory is a log directory (runs relative to it), in a list too; a file is run "."
    assert list(rk.tensorboard.scalars([logs / "a"]).run) == [".", "sub"]
    assert list(rk.tensorboard.scalars(logs / "a").run) == [".", "sub"]
    assert list(rk.tensorboard.scalars(str(logs / "b" / "events*")).run) == ["."]
    # A file reached twice is read once, under the name the common parent gives it.
    frame = rk.tensorboard.scalars([logs, logs / "a", logs / "a" / "events.out.tfevents.1.x"])
    assert list(frame.run) == [".", "a", "a/sub", "b"]
    # Relative paths and patterns.
    monkeypatch.chdir(logs)
    assert list(rk.tensorboard.scalars("*").run) == [".", "a", "a/sub", "b"]
    assert list(rk.tensorboard.scalars(["a", "b"]).run) == runs
    assert list(rk.tensorboard.histograms(["a", "b"]).columns)[:2] == ["run", "tag"]
    assert list(rk.tensorboard.hparams("*").columns) == ["run", "name", "value", "wall_time"]
    with pytest.raises(FileNotFoundError, match="matches this pattern") as info:
        rk.tensorboard.scalars(["a", "c*"])
    assert info.value.filename == "c*"
    with pytest.raises(FileNotFoundError) as info:
        rk.tensorboard.scalars(["a", "c"])
    assert info.value.filename == "c"


@pytest.mark.parametrize("bad", [3, b"logs", [b"logs"], ["logs", 3], None, {"logs": 1}])
def test_sources_of_other_types_raise_type_error(bad):
    for read in (rk.tensorboard.scalars, rk.tensorboard.text, rk.tensorboard.hparams):
        with pytest.raises(TypeError, match="a log directory, an event file or a glob pattern"):
            read(bad)
    with pytest.raises(TypeError, match="or a list of them, not"):
        rk.tensorboard.follow(bad)


def test_an_empty_list_of_sources_raises_value_error():
    with pytest.raises(ValueError, match="no log directories given"):
        rk.tensorboard.scalars([])


def test_text_tags_select_what_add_text_logged_under_them(run):
    """PyTorch and tensorboardX log add_text("note", ...) as "note/text_summary": tags=["note"] reads it,
    and the rows keep the tag as written."""
    name, directory = run
    written = "note" if name == "tf" else "note/text_summary"
    for tags in ("note", ["note"], [written], ["other", "note"]):
        frame = rk.tensorboard.text(directory, tags=tags)
        assert list(frame.tag) == [written] * STEPS
        assert list(frame.value) == [f"step {step}" for step in range(STEPS)]
    assert len(rk.tensorboard.text(directory, tags=["not"])) == 0
    assert len(rk.tensorboard.text(directory, tags=["note/text"])) == 0
    # Only text: the other kinds take tags as written.
    assert len(rk.tensorboard.tensors(directory, tags=["note"])) == (STEPS if name == "tf" else 0)


def _histogram(tag, step):
    event = event_pb2.Event(wall_time=1.5, step=step)
    histo = event.summary.value.add(tag=tag).histo
    histo.min, histo.max, histo.num, histo.sum, histo.sum_squares = 0.0, 1.0, 2.0, 1.0, 1.0
    histo.bucket_limit.extend([0.5, 1.0])
    histo.bucket.extend([1.0, 1.0])
    return event.SerializeToString()


def _text(tag, step):
    event = event_pb2.Event(wall_time=1.5, step=step)
    value = event.summary.value.add(tag=tag)
    value.metadata.plugin_data.plugin_name = "text"
    value.tensor.dtype = 7  # DT_STRING
    value.tensor.string_val.append(b"note %d" % step)
    value.tensor.tensor_shape.SetInParent()
    return event.SerializeToString()


@pytest.mark.parametrize("tags", [None, ["loss"]])
def test_categories_are_the_tags_and_runs_of_the_rows(tmp_path, tags):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mixed = [
        _scalar("loss", 1, 0.5),
        _histogram("weights", 1),
        _text("note", 1),
        _scalar("lr", 1, 0.1),
    ]
    write_events(tmp_path / "a" / "events.out.tfevents.1.x", mixed)
    write_events(tmp_path / "b" / "events.out.tfevents.1.x", [_histogram("weights", 2)])
    frame = rk.tensorboard.scalars(tmp_path, tags=tags)
    present = ["loss", "lr"] if tags is None else ["loss"]
    assert sorted(frame["tag"].cat.categories) == present
    assert list(frame["run"].cat.categories) == ["a"]
    assert sorted(frame["tag"].value_counts().index) == present
    assert (frame["tag"].value_counts() > 0).all()
    assert len(frame.groupby("tag", observed=False)) == len(present)
    for kind, wanted in (("histograms", "weights"), ("text", "note"), ("tensors", "note")):
        read = getattr(rk.tensorboard, kind)(tmp_path, tags=None if tags is None else [wanted])
        assert set(read["tag"].cat.categories) == set(read["tag"]), kind
        assert set(read["run"].cat.categories) == set(read["run"]), kind
    with rk.tensorboard.follow(tmp_path, tags=tags, idle_timeout=0) as follower:
        batches = list(follower)
    assert [sorted(batch["tag"].cat.categories) for batch in batches] == [present]
    assert [list(batch["run"].cat.categories) for batch in batches] == [["a"]]
