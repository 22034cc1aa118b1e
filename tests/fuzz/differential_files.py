"""Differential fuzz targets: files built by structure, read by recordkit and by an independent oracle.

Each case generates records (0-50, sizes biased to small and to edge sizes, empty ones included), writes
them as a file (recordkit's writer or the oracle's), damages the file at a structural point or not at all,
and reads it every way recordkit offers (iteration over a path, a seekable object and a pipe; ``len()``,
indexing and batched reads, with and without a sidecar index). The oracles are TensorFlow for TFRecord
(``tf.io.TFRecordWriter``, ``tf_record_iterator``) and HFAiLab's C++ ``ffrecord`` for FFRecord; without
them a target still checks recordkit against the records it wrote.

What must hold:

* an intact file reads back exactly, every way, and is byte-identical whichever writer wrote it;
* a damaged file never yields a record that was not written at that position, and iteration ends in a
  recordkit error (the documented exceptions: TFRecord files cut inside a header end cleanly in
  TensorFlow, and TensorFlow ignores bytes after a ZLIB stream, where recordkit raises after the records);
* plain TFRecord: iteration yields exactly the records TensorFlow yields. Compressed TFRecord:
  TensorFlow's records are a prefix of recordkit's (TensorFlow drops what it inflated in the step that
  failed; recordkit returns every record inflated and verified before the damage).
"""

from __future__ import annotations

import io
import os
import random
import struct
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import recordkit as rk
from recordkit.compat import ffrecord as rk_ffrecord
from recordkit.errors import LegacyFormatWarning, RecordKitError
from recordkit.formats.tfrecord import frame

from .targets import OUTCOMES, Case, NonSeekable, Seed, Target

__all__ = ["DifferentialFFRecordTarget", "DifferentialTFRecordTarget", "generate_records"]

EDGE_SIZES = (0, 1, 2, 3, 4, 7, 8, 11, 12, 13, 15, 16, 17, 31, 32, 255, 256, 1023, 1024, 4095, 4096)
LARGE_SIZES = (32767, 32768, 65535, 65536)


def _record_size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.45:
        return rng.randrange(0, 64)
    if roll < 0.85:
        return rng.choice(EDGE_SIZES)
    if roll < 0.95:
        return rng.randrange(64, 8192)
    return rng.choice(LARGE_SIZES) if rng.random() < 0.5 else rng.randrange(8192, 65537)


def _record_bytes(rng: random.Random, size: int) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(size)
    if kind == 1:
        return (bytes([rng.randrange(256)]) * size)[:size]
    if kind == 2 and size >= 21:
        # A valid TFRecord frame inside the payload: what a lying index or a resync could land on.
        inner = frame(rng.randbytes(rng.randrange(0, 6)))
        at = rng.randrange(0, size - len(inner) + 1)
        data = bytearray(rng.randbytes(size))
        data[at : at + len(inner)] = inner
        return bytes(data)
    return rng.randbytes(size)


def generate_records(rng: random.Random) -> list[bytes]:
    """0-50 records, mostly few and small, with empty records and edge sizes (at most about 256 KiB)."""
    count = rng.choice((0, 1, 2, 3, rng.randrange(0, 8), rng.randrange(0, 51)))
    records = []
    total = 0
    for _ in range(count):
        size = _record_size(rng)
        if total + size > 1 << 18:
            size = rng.randrange(0, 64)
        total += size
        records.append(_record_bytes(rng, size))
    return records


@dataclass
class Plan:
    """How one case's file was made: what a reader must find in it, and how it was damaged."""

    records: list[bytes]
    expected: list[bytes]
    damage: str = "none"
    writer: str = "recordkit"
    compression: str = ""
    index: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def intact(self) -> bool:
        """Whether the file holds exactly ``expected``, undamaged."""
        return self.damage in ("none", "concatenated")


def _attempt(call: Callable[[], Any]) -> tuple[Any, RecordKitError | None]:
    """Run ``call``: its result and ``None``, or ``None`` and the recordkit error it raised."""
    try:
        result = call()
    except RecordKitError as exc:
        OUTCOMES[type(exc).__name__] += 1
        return None, exc
    OUTCOMES["ok"] += 1
    return result, None


def _iterate(
    open_reader: Callable[[], rk.RecordReader],
) -> tuple[list[bytes], RecordKitError | None]:
    """The records iteration yields before it ends, and the recordkit error it ends with (or ``None``)."""
    got: list[bytes] = []
    try:
        with open_reader() as reader:
            for record in reader:
                got.append(record)  # noqa: PERF402 - keeps the records yielded before an error
    except RecordKitError as exc:
        OUTCOMES[type(exc).__name__] += 1
        return got, exc
    OUTCOMES["ok"] += 1
    return got, None


def _check_prefix(got: list[bytes], expected: list[bytes], how: str) -> None:
    assert len(got) <= len(expected), f"{how}: {len(got)} records from a file of {len(expected)}"
    for i, record in enumerate(got):
        assert record == expected[i], f"{how}: record {i} differs from the record written there"


def _check_random_access(
    reader: rk.RecordReader, expected: list[bytes], rng: random.Random
) -> None:
    """``len()``, indexing and ``read()`` give the written records or a recordkit error."""
    n, _ = _attempt(lambda: len(reader))
    if n is None:
        return
    assert n <= len(expected), f"len() is {n} for a file of {len(expected)} records"
    if not n:
        return
    picks = {0, n - 1, *(rng.randrange(n) for _ in range(3))}
    for i in sorted(picks):
        got, _ = _attempt(lambda i=i: reader[i])
        if got is not None:
            assert got == expected[i], f"reader[{i}] differs from the record written there"
    wanted = [rng.randrange(n) for _ in range(rng.randrange(1, 8))]
    batch, _ = _attempt(lambda: reader.read(wanted))
    if batch is not None:
        assert batch == [expected[i] for i in wanted], "read() differs from the records written"


class _DifferentialTarget(Target):
    """Shared parts: scratch files, reading through recordkit three ways."""

    format = ""
    suffix = ""

    def __init__(self) -> None:
        super().__init__()
        self.oracle: Any = None

    def import_oracle(self) -> Any:
        """Return the oracle module, or ``None`` when it is not installed."""
        raise NotImplementedError

    def make_seeds(self) -> list[Seed]:
        # Cases are generated, not mutated from seeds; the oracle is imported here, before the fuzz
        # runner caps the memory.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.oracle = self.import_oracle()
        return [Seed("generated", b"")]

    def path(self, name: str = "case") -> str:
        """A scratch file path with this format's suffix."""
        return os.path.join(self.workdir, name + self.suffix)

    def store(self, data: bytes, name: str = "case") -> str:
        """Write ``data`` to a scratch file and return its path."""
        path = self.path(name)
        with open(path, "wb") as file:
            file.write(data)
        return path

    def make_case(self, rng: random.Random) -> Case:
        _ = self.seeds  # the oracle is imported with the seeds
        plan = self.plan(rng)
        data = self.build(plan, rng)
        options = {"writer": plan.writer, "damage": plan.damage, "records": len(plan.records)}
        if plan.compression:
            options["compression"] = plan.compression
        seed = Seed("generated", data, plan.expected)
        case = Case(seed, data, f"{self.name}:{plan.damage}", options)
        case.plan = plan  # type: ignore[attr-defined]
        return case

    def plan(self, rng: random.Random) -> Plan:
        """Choose the records, the writer, the damage."""
        raise NotImplementedError

    def build(self, plan: Plan, rng: random.Random) -> bytes:
        """Return the file's bytes for ``plan``."""
        raise NotImplementedError

    def read_every_way(
        self, data: bytes, plan: Plan, rng: random.Random
    ) -> tuple[list[bytes], Any]:
        """Iterate over a path, a seekable object and a pipe; they must agree. Returns the path's outcome."""
        path = self.store(data)
        options: dict[str, Any] = {"format": self.format}
        if self.format == "tfrecord":
            options["compression"] = plan.compression
        by_path = _iterate(lambda: rk.open(path, index=False, **options))
        by_object = _iterate(lambda: rk.open(io.BytesIO(data), **options))
        by_pipe = _iterate(lambda: rk.open(NonSeekable(data), **options))
        for how, (got, error) in (("path", by_path), ("object", by_object), ("pipe", by_pipe)):
            _check_prefix(got, plan.expected, how)
            if plan.intact:
                assert error is None, f"{how}: an intact file raised {error!r}"
                assert got == plan.expected, f"{how}: an intact file read differently"
        self.check_agreement(by_path, by_object, by_pipe)
        with rk.open(path, index=False, **options) as reader:
            if reader.supports_random_access:
                _check_random_access(reader, plan.expected, rng)
        return by_path

    def check_agreement(self, by_path: Any, by_object: Any, by_pipe: Any) -> None:
        """The three ways of iterating must agree on the records and on whether it failed."""
        assert by_path[0] == by_object[0], "a path and a seekable object read different records"
        assert (by_path[1] is None) == (by_object[1] is None) == (by_pipe[1] is None), (
            f"only some sources raised: {by_path[1]!r} / {by_object[1]!r} / {by_pipe[1]!r}"
        )


# -- TFRecord ---------------------------------------------------------------------------------------


def _tfrecord_file(records: list[bytes]) -> bytes:
    """A plain TFRecord file framed independently of recordkit's writer (struct and the CRC module)."""
    return b"".join(frame(record) for record in records)


def _compress(plain: bytes, compression: str, level: int) -> bytes:
    if compression == "gzip":
        compressor = zlib.compressobj(level, zlib.DEFLATED, 31, 9)
    else:
        compressor = zlib.compressobj(level, zlib.DEFLATED, 15, 9)
    return compressor.compress(plain) + compressor.flush()


class DifferentialTFRecordTarget(_DifferentialTarget):
    """TFRecord (plain, GZIP, ZLIB) against TensorFlow."""

    name = "diff-tfrecord"
    format = "tfrecord"
    suffix = ".tfrecord"
    DAMAGES = (
        "none",
        "none",
        "concatenated",
        "truncated",
        "length",
        "length-crc",
        "payload",
        "payload-crc",
        "trailing",
    )

    def import_oracle(self) -> Any:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        try:
            import tensorflow as tf
        except ImportError:
            return None
        tf.get_logger().setLevel("ERROR")
        return tf

    def plan(self, rng: random.Random) -> Plan:
        records = generate_records(rng)
        plan = Plan(records, list(records), damage=rng.choice(self.DAMAGES))
        plan.compression = rng.choice(("", "", "gzip", "zlib"))
        plan.extra["level"] = rng.choice((-1, -1, 1, 6, 9))
        if self.oracle is not None and rng.random() < 0.3:
            plan.writer = "tensorflow"
        if not plan.compression and rng.random() < 0.3:
            plan.index = self.index_text(records)
        if plan.damage == "concatenated":
            more = generate_records(rng)
            plan.extra["more"] = more
            if plan.compression == "zlib":
                plan.damage = "concatenated-zlib"  # one ZLIB stream per file: the second is damage
            else:
                plan.expected = records + more
        return plan

    @staticmethod
    def index_text(records: list[bytes]) -> bytes:
        """The sidecar index of a plain file of ``records``, computed from their sizes."""
        lines, pos = [], 0
        for record in records:
            lines.append(f"{pos} {len(record) + 16}\n")
            pos += len(record) + 16
        return "".join(lines).encode()

    def write(self, records: list[bytes], plan: Plan) -> bytes:
        """Write ``records`` with the chosen writer, compressed as planned."""
        level = plan.extra["level"]
        if plan.writer == "tensorflow":
            tf = self.oracle
            path = self.path("tf")
            options = tf.io.TFRecordOptions(
                compression_type=plan.compression.upper(), compression_level=level
            )
            with tf.io.TFRecordWriter(path, options=options) as writer:
                for record in records:
                    writer.write(record)
            with open(path, "rb") as file:
                return file.read()
        buffer = io.BytesIO()
        with rk.open(
            buffer,
            "w",
            format="tfrecord",
            compression=plan.compression,
            level=level if plan.compression else None,
        ) as writer:
            writer.write_many(records)
        return buffer.getvalue()

    def build(self, plan: Plan, rng: random.Random) -> bytes:
        data = self.write(plan.records, plan)
        plan.extra["written"] = data
        expected_plain = _tfrecord_file(plan.records)
        if plan.damage.startswith("concatenated"):
            return data + self.write(plan.extra["more"], plan)
        if plan.damage == "none":
            return data
        if plan.compression and rng.random() < 0.5:
            plan.extra["where"] = "stream"
            return self.damage_stream(data, plan, rng)
        plain = self.damage_plain(expected_plain, plan, rng)
        return (
            _compress(plain, plan.compression, plan.extra["level"]) if plan.compression else plain
        )

    def damage_plain(self, data: bytes, plan: Plan, rng: random.Random) -> bytes:
        """Damage the framing at a structural point."""
        starts = list(np.cumsum([0] + [len(r) + 16 for r in plan.records]))
        damage = plan.damage
        if damage == "trailing":
            tail = rng.choice((bytes(rng.randrange(1, 20)), rng.randbytes(rng.randrange(1, 40))))
            if rng.random() < 0.3:
                tail = frame(rng.randbytes(5))[: rng.randrange(1, 21)]
            return data + tail
        if not plan.records:
            plan.damage = "trailing"
            return data + rng.randbytes(rng.randrange(1, 30))
        k = rng.randrange(len(plan.records))
        start, size = int(starts[k]), len(plan.records[k])
        spots = {
            "truncated": rng.choice(
                (start + rng.randrange(1, 12), start + 12 + rng.randrange(0, size + 4))
            ),
            "length": start + rng.randrange(0, 8),
            "length-crc": start + 8 + rng.randrange(0, 4),
            "payload": start + 12 + rng.randrange(0, size) if size else start + 12 + size,
            "payload-crc": start + 12 + size + rng.randrange(0, 4),
        }
        spot = spots[damage]
        if damage == "truncated":
            return data[:spot]
        if damage == "payload" and not size:
            spot = start + 12 + rng.randrange(0, 4)  # an empty payload: damage its checksum instead
        damaged = bytearray(data)
        damaged[spot] ^= 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
        return bytes(damaged)

    @staticmethod
    def damage_stream(data: bytes, plan: Plan, rng: random.Random) -> bytes:
        """Damage the compressed bytes: cut them, flip one, or append stray bytes."""
        roll = rng.random()
        if roll < 0.35 and len(data) > 1:
            return data[: rng.randrange(1, len(data))]
        if roll < 0.7:
            damaged = bytearray(data)
            damaged[rng.randrange(len(damaged))] ^= rng.randrange(1, 256)
            return bytes(damaged)
        tail = rng.choice((b"\x00", rng.randbytes(rng.randrange(1, 30)), b"\x1f\x8b", bytes(20)))
        return data + tail

    def tf_records(self, path: str, compression: str) -> tuple[list[bytes], bool]:
        """The records TensorFlow reads and whether it ended with an error."""
        tf = self.oracle
        got: list[bytes] = []
        options = tf.io.TFRecordOptions(compression.upper())
        try:
            for record in tf.compat.v1.io.tf_record_iterator(path, options=options):
                got.append(record)  # noqa: PERF402 - keeps the records read before an error
        except tf.errors.OpError:
            return got, True
        return got, False

    def check_writer(self, plan: Plan) -> None:
        """The writer's bytes are the records framed independently, compressed with TF's settings."""
        plain = _tfrecord_file(plan.records)
        written = plan.extra["written"]
        if plan.compression:
            assert written == _compress(plain, plan.compression, plan.extra["level"]), (
                f"{plan.writer} wrote different {plan.compression} bytes than zlib with TF's settings"
            )
        else:
            assert written == plain, f"{plan.writer} framed the records differently"

    def run(self, case: Case, rng: random.Random) -> None:
        plan: Plan = case.plan  # type: ignore[attr-defined]
        self.check_writer(plan)
        got, error = self.read_every_way(case.data, plan, rng)
        if not plan.intact:
            self.check_damage_reported(got, error, plan, case)
        if self.oracle is not None:
            self.compare_with_tensorflow(got, error, plan)
        if plan.index is not None:
            self.read_with_index(case.data, plan, rng)
        if rng.random() < 0.3:
            self.read_detected(case.data, plan)

    @staticmethod
    def check_damage_reported(got: list[bytes], error: Any, plan: Plan, case: Case) -> None:
        """Damage is never read as a clean file, unless the damaged file is itself a valid one."""
        if error is not None:
            return
        # A cut at a record boundary, or a flip that leaves a valid file, reads cleanly: what was read
        # must then be exactly a prefix of the records (already checked) and the file must be valid.
        plain = _tfrecord_file(got)
        if plan.compression:
            return  # a compressed valid prefix (a cut at a member end) is checked by the prefix test
        assert case.data == plain, (
            "a damaged file read without error gave records that do not frame it"
        )

    def compare_with_tensorflow(self, got: list[bytes], error: Any, plan: Plan) -> None:
        """Plain files: exactly TensorFlow's records. Compressed: TensorFlow's are a prefix of ours."""
        theirs, failed = self.tf_records(self.path(), plan.compression)
        OUTCOMES["compared with TensorFlow"] += 1
        if plan.compression:
            _check_prefix(theirs, got, "TensorFlow's records against recordkit's")
        else:
            assert got == theirs, (
                f"recordkit read {len(got)} records, TensorFlow {len(theirs)} ({error!r})"
            )
        if failed:
            assert error is not None, "TensorFlow reports damage that recordkit read without error"
        if not plan.compression:
            # lenient=True ends where TensorFlow ends cleanly (a file cut inside a header).
            lenient, lenient_error = _iterate(
                lambda: rk.open(self.path(), format="tfrecord", compression="", lenient=True)
            )
            assert lenient == theirs, "lenient=True read other records than TensorFlow"
            assert (lenient_error is not None) == failed, (
                f"lenient=True ended with {lenient_error!r}, TensorFlow with an error: {failed}"
            )

    def read_detected(self, data: bytes, plan: Plan) -> None:
        """With the compression detected from the content: an intact file reads exactly."""
        got, error = _iterate(lambda: rk.open(io.BytesIO(data), format="tfrecord"))
        _check_prefix(got, plan.expected, "detected compression")
        if plan.intact:
            assert error is None, f"an intact file raised {error!r} with detected compression"
            assert got == plan.expected, "an intact file read differently with detected compression"

    def read_with_index(self, data: bytes, plan: Plan, rng: random.Random) -> None:
        """Through a sidecar index of the undamaged file: written records or a recordkit error."""
        path = self.store(data)
        index = path + ".idx"
        with open(index, "wb") as file:
            file.write(plan.index or b"")
        reader, _ = _attempt(lambda: rk.open(path, format="tfrecord", index=index))
        if reader is None:
            return
        with reader:
            _check_random_access(reader, plan.expected, rng)
            if plan.intact:
                assert len(reader) == len(plan.expected)


# -- FFRecord ---------------------------------------------------------------------------------------


def _ffrecord_file(records: list[bytes]) -> bytes:
    """An FFRecord file laid out independently of recordkit's writer."""
    count = len(records)
    crcs = b"".join(struct.pack("<I", zlib.crc32(r)) for r in records)
    offsets, pos = [], 12 + 12 * count
    for record in records:
        offsets.append(struct.pack("<q", pos))
        pos += len(record)
    meta = struct.pack("<q", count) + crcs + b"".join(offsets)
    return struct.pack("<I", zlib.crc32(meta)) + meta + b"".join(records)


class DifferentialFFRecordTarget(_DifferentialTarget):
    """FFRecord against HFAiLab's C++ ``ffrecord`` (reader and writer)."""

    name = "diff-ffrecord"
    format = "ffrecord"
    suffix = ".ffr"
    DAMAGES = (
        "none",
        "none",
        "truncated",
        "count",
        "crc-table",
        "offset-table",
        "meta-crc",
        "payload",
        "trailing",
        "concatenated-files",
    )

    def import_oracle(self) -> Any:
        try:
            import ffrecord
        except ImportError:
            return None
        return ffrecord if hasattr(ffrecord, "FileReader") else None

    def plan(self, rng: random.Random) -> Plan:
        records = generate_records(rng)
        plan = Plan(records, list(records), damage=rng.choice(self.DAMAGES))
        writers = ["recordkit-n", "recordkit"] + (["ffrecord"] if self.oracle is not None else [])
        plan.writer = rng.choice(writers)
        return plan

    def write(self, records: list[bytes], writer: str) -> bytes:
        """Write ``records`` with one of the writers."""
        path = self.path("written")
        if writer == "ffrecord":
            out = self.oracle.FileWriter(path, len(records))
            for record in records:
                out.write_one(np.frombuffer(record, dtype=np.uint8))
            out.close()
        else:
            n = len(records) if writer == "recordkit-n" else None
            with rk.open(path, "w", format="ffrecord", n=n) as out:
                out.write_many(records)
        with open(path, "rb") as file:
            return file.read()

    def build(self, plan: Plan, rng: random.Random) -> bytes:
        data = self.write(plan.records, plan.writer)
        plan.extra["written"] = data
        header_end = 12 + 12 * len(plan.records)
        damage = plan.damage
        if damage == "none":
            return data
        if damage in ("trailing", "concatenated-files"):
            more = (
                self.write(generate_records(rng), plan.writer)
                if damage == "concatenated-files"
                else rng.randbytes(rng.randrange(1, 40))
            )
            return data + more
        if damage == "truncated":
            return data[: rng.randrange(0, len(data))] if data else data
        spans = {
            "meta-crc": (0, 4),
            "count": (4, 12),
            "crc-table": (12, 12 + 4 * len(plan.records)),
            "offset-table": (12 + 4 * len(plan.records), header_end),
            "payload": (header_end, len(data)),
        }
        low, high = spans[damage]
        if high <= low:
            plan.damage = "none"
            return data
        damaged = bytearray(data)
        damaged[rng.randrange(low, high)] ^= rng.randrange(1, 256)
        if damaged[:4] == bytes(4):
            damaged[0] = 1  # a zero header checksum marks a legacy file, whose header is unchecked
        return bytes(damaged)

    def check_writers(self, plan: Plan, rng: random.Random) -> None:
        """Every writer (recordkit with and without ``n``, the C++ one) writes the same bytes."""
        written = plan.extra["written"]
        assert written == _ffrecord_file(plan.records), f"{plan.writer} wrote different bytes"
        others = ["recordkit", "recordkit-n"] + (["ffrecord"] if self.oracle is not None else [])
        other = rng.choice(others)
        assert self.write(plan.records, other) == written, f"{other} and {plan.writer} differ"

    def run(self, case: Case, rng: random.Random) -> None:
        plan: Plan = case.plan  # type: ignore[attr-defined]
        self.check_writers(plan, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LegacyFormatWarning)  # a damaged meta CRC may read 0
            _, error = self.read_every_way(case.data, plan, rng)
            if plan.damage != "none":
                assert error is not None, "a damaged FFRecord file read without error"
            self.read_drop_in(case.data, plan, rng)
        if self.oracle is not None:
            self.compare_with_reference(case.data, plan, rng)

    def check_agreement(self, by_path: Any, by_object: Any, by_pipe: Any) -> None:
        super().check_agreement(by_path, by_object, by_pipe)
        # A pipe cannot check offsets against the size before reading: it may yield samples that a
        # seekable file refuses on open, but only samples whose CRC matched (checked by the prefix test).
        if by_path[1] is None:
            assert by_pipe[0] == by_path[0], "a pipe and a path read different samples"

    def read_drop_in(self, data: bytes, plan: Plan, rng: random.Random) -> None:
        """The ``recordkit.compat.ffrecord`` drop-in gives the written samples or a recordkit error."""
        path = self.store(data)
        reader, _ = _attempt(lambda: rk_ffrecord.FileReader(path, check_data=True))
        if reader is None:
            return
        with reader:
            if plan.intact:
                assert reader.n == len(plan.expected)
                offsets = reader.get_offsets(0)
                assert len(offsets) == reader.n + 1
                assert offsets[-1] == len(data)
            if not reader.n:
                return
            wanted = [rng.randrange(reader.n) for _ in range(rng.randrange(1, 6))]
            batch, _ = _attempt(lambda: reader.read(wanted))
            if batch is not None:
                assert [a.tobytes() for a in batch] == [plan.expected[i] for i in wanted]
                assert all(a.flags.writeable for a in batch)
            one, _ = _attempt(lambda: reader.read_one(wanted[0]))
            if one is not None:
                assert one.tobytes() == plan.expected[wanted[0]]

    def compare_with_reference(self, data: bytes, plan: Plan, rng: random.Random) -> None:
        """Where the C++ reader is defined (an intact header), its samples match recordkit's."""
        count = len(plan.records)
        header_end = 12 + 12 * count
        if plan.damage not in ("none", "payload", "trailing") or len(data) < header_end:
            return  # the C++ reader trusts the header: a damaged one is undefined behaviour there
        reference = self.oracle.FileReader(self.store(data), True)
        OUTCOMES["compared with C++ ffrecord"] += 1
        try:
            assert reference.n == count
            for i in range(count):
                try:
                    theirs = reference.read_one(i).tobytes()
                except RuntimeError:
                    assert plan.damage != "none", (
                        f"the C++ reader refused sample {i} of an intact file"
                    )
                    continue
                assert theirs == plan.records[i], "the C++ reader returned a sample never written"
        finally:
            reference.close()


def differential_targets() -> list[Target]:
    """The differential targets, for ``all_targets()``."""
    return [DifferentialTFRecordTarget(), DifferentialFFRecordTarget()]
