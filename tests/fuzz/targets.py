"""Fuzz targets: one per reader (format, compression, sidecar index) and one per payload family.

A :class:`Target` makes a damaged case from one of its seeds and runs it. ``run`` returns normally when
recordkit read the input or refused it with a :class:`~recordkit.errors.RecordKitError`; anything else
escapes to the runner as a failure. Two oracles catch wrong data, not only wrong exceptions: a reader's
iteration, ``len()``, indexing and batched reads must agree with each other, and a single flipped bit in
a checksummed file must never produce records different from the originals.
"""

from __future__ import annotations

import collections
import gzip
import io
import os
import random
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import recordkit as rk
from recordkit import recover
from recordkit.compat import oneflow as rk_ofrecord
from recordkit.compat.ffrecord import FileReader
from recordkit.errors import RecordKitError, RecordKitWarning

from .mutations import (
    Layout,
    ffrecord_layout,
    is_single_bit_flip,
    mutate,
    ofrecord_layout,
    tfrecord_layout,
)

__all__ = ["OUTCOMES", "TARGETS", "Case", "Seed", "Target", "exercise_reader"]

TESTS_DIR = Path(__file__).resolve().parent.parent
GOLDEN_DIR = TESTS_DIR / "data" / "golden"
SHARED_DIR = Path(os.environ.get("RECORDKIT_SHARED", TESTS_DIR.parent.parent / "shared"))


@dataclass
class Seed:
    """A valid input: its bytes, the records it holds (for files), and where its fields are."""

    name: str
    data: bytes
    records: list[bytes] = field(default_factory=list)
    layout: Layout = field(default_factory=Layout)


@dataclass
class Case:
    """One damaged input."""

    seed: Seed
    data: bytes
    description: str
    options: dict[str, Any] = field(default_factory=dict)


class NonSeekable(io.RawIOBase):
    """A read-only, non-seekable stream over bytes (a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


OUTCOMES: collections.Counter[str] = collections.Counter()
"""How the guarded calls ended: ``"ok"`` or the recordkit error's class name."""


def _guarded(call: Callable[[], Any]) -> Any:
    """Run ``call``; a recordkit error is an accepted outcome and gives ``None``."""
    try:
        result = call()
    except RecordKitError as exc:
        OUTCOMES[type(exc).__name__] += 1
        return None
    OUTCOMES["ok"] += 1
    return result


# -- readers ---------------------------------------------------------------------------------------


def exercise_reader(
    reader: rk.RecordReader, rng: random.Random, *, agree: bool = True
) -> list[bytes] | None:
    """Iterate, measure, index and batch-read ``reader``; check that what succeeds agrees.

    Iteration follows the record headers, random access a sidecar index when one is given; ``agree=False``
    skips comparing the two (a damaged index, or an OFRecord file damaged under an intact index: nothing
    tells which is right, and iteration does not read the index).

    Returns the records read by iteration, or ``None`` if iteration raised a recordkit error.
    """
    iterated = _guarded(lambda: list(reader))
    if not reader.supports_random_access:
        return iterated
    records = iterated if agree else None
    n = _guarded(lambda: len(reader))
    if n is None:
        return records
    if records is not None:
        assert n == len(records), f"len() says {n}, iteration gave {len(records)} records"
    if n == 0:
        return iterated
    picks = sorted({rng.randrange(n) for _ in range(min(n, 4))} | {0, n - 1})
    for i in picks:
        got = _guarded(lambda i=i: reader[i])
        if got is not None and records is not None:
            assert got == records[i], f"reader[{i}] differs from the iterated record"
    wanted = [rng.randrange(n) for _ in range(min(n, 6))] + [-1]
    batch = _guarded(lambda: reader.read(wanted))
    if batch is not None and records is not None:
        assert batch == [records[i] for i in wanted], "read() differs from the iterated records"
    start = rng.randrange(n)
    sliced = _guarded(lambda: reader[start : start + 3])
    if sliced is not None and records is not None:
        assert sliced == records[start : start + 3], "a slice differs from the iterated records"
    return iterated


class Target:
    """A fuzz target: seeds, a way to damage them, and a way to run a damaged input."""

    name: str = ""
    checksummed = False

    def __init__(self) -> None:
        self._seeds: list[Seed] | None = None
        self._workdir: str | None = None

    @property
    def seeds(self) -> list[Seed]:
        """The valid inputs, built on first use."""
        if self._seeds is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RecordKitWarning)  # legacy golden files
                self._seeds = self.make_seeds()
        return self._seeds

    @property
    def workdir(self) -> str:
        """A scratch folder for case files (in memory-backed /dev/shm when there is one)."""
        if self._workdir is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") else None
            self._workdir = tempfile.mkdtemp(prefix="recordkit-fuzz-", dir=base)
        return self._workdir

    def cleanup(self) -> None:
        """Remove the scratch folder."""
        if self._workdir is not None:
            for name in os.listdir(self._workdir):
                os.unlink(os.path.join(self._workdir, name))
            os.rmdir(self._workdir)
            self._workdir = None

    def make_seeds(self) -> list[Seed]:
        """Return the valid inputs."""
        raise NotImplementedError

    def make_case(self, rng: random.Random) -> Case:
        """Damage a random seed."""
        seed = rng.choice(self.seeds)
        data, description = mutate(seed.data, rng, seed.layout)
        return Case(seed, data, description)

    def run(self, case: Case, rng: random.Random) -> None:
        """Run one case; raise anything but a recordkit error to report a failure."""
        raise NotImplementedError


class ReaderTarget(Target):
    """Reads a damaged record file through ``recordkit.open`` (file, seekable object or stream)."""

    format = ""
    suffix = ""
    compression = ""

    def file_bytes(self, records: list[bytes]) -> bytes:
        """Encode ``records`` with recordkit's writer (the seeds that are not golden files)."""
        buffer = io.BytesIO()
        with rk.open(buffer, "w", format=self.format, compression=self.compression) as writer:
            writer.write_many(records)
        return buffer.getvalue()

    def layout(self, records: list[bytes]) -> Layout:
        """The field layout of an uncompressed file holding ``records``."""
        return Layout()

    def golden(self) -> Iterable[Path]:
        """Golden files to use as seeds."""
        return ()

    def make_seeds(self) -> list[Seed]:
        generator = random.Random(1)
        seeds = []
        for path in self.golden():
            with rk.open(path, format=self.format) as reader:
                records = list(reader)
            if sum(map(len, records)) <= 1 << 17:
                seeds.append(Seed(path.name, path.read_bytes(), records, self.layout(records)))
        shapes = (
            [b"x"],
            [b"", b"a", b""],
            [generator.randbytes(generator.randrange(1, 300)) for _ in range(20)],
        )
        for i, records in enumerate(shapes):
            if self.format == "ofrecord":
                records = [r or b"\x0a\x00" for r in records]
            data = self.file_bytes(records)
            seeds.append(Seed(f"generated-{i}", data, records, self.layout(records)))
        return seeds

    def open_case(self, case: Case, rng: random.Random) -> rk.RecordReader:
        """Open the damaged bytes one of three ways: a local file, a seekable object, a stream."""
        options: dict[str, Any] = {"format": self.format, "compression": self.compression}
        if rng.random() < 0.1:
            options["lenient"] = True
        if rng.random() < 0.05:
            options["check_crc"] = False
        if rng.random() < 0.05:
            options.pop("format")
            options.pop("compression")
        case.options = options
        how = rng.randrange(3)
        if how == 0:
            path = os.path.join(self.workdir, "case.bin")
            with open(path, "wb") as file:
                file.write(case.data)
            return rk.open(path, **options)
        if how == 1:
            return rk.open(io.BytesIO(case.data), **options)
        return rk.open(NonSeekable(case.data), **options)

    def run(self, case: Case, rng: random.Random) -> None:
        reader = _guarded(lambda: self.open_case(case, rng))
        if reader is None:
            return
        with reader:
            records = exercise_reader(reader, rng)
        exact = (
            self.checksummed
            and records is not None
            and "format" in case.options
            and case.options.get("check_crc", True)
            and is_single_bit_flip(case.description)
        )
        if exact:
            assert records == case.seed.records, "a flipped bit went undetected"


class TFRecordTarget(ReaderTarget):
    """Plain TFRecord files."""

    name = "tfrecord"
    format = "tfrecord"
    checksummed = True

    def layout(self, records: list[bytes]) -> Layout:
        return tfrecord_layout(records)

    def golden(self) -> Iterable[Path]:
        folder = GOLDEN_DIR / "tfrecord"
        names = ("examples.tfrecord", "sequence_examples.tfrecord", "empty.tfrecord")
        return [folder / name for name in names]


class CompressedTFRecordTarget(TFRecordTarget):
    """GZIP or ZLIB TFRecord files: damage either the records before compressing, or the stream."""

    def __init__(self, compression: str) -> None:
        super().__init__()
        self.compression = compression
        self.name = f"tfrecord-{compression}"
        self._plain = TFRecordTarget()

    def compress(self, plain: bytes) -> bytes:
        """Compress as TensorFlow would (GZIP, or a ZLIB stream)."""
        if self.compression == "gzip":
            return gzip.compress(plain, mtime=0)
        return zlib.compress(plain)

    def make_seeds(self) -> list[Seed]:
        seeds = [
            Seed(s.name, self.compress(s.data), s.records, s.layout) for s in self._plain.seeds
        ]
        if self.compression == "gzip":
            both = self._plain.seeds[-1]
            data = self.compress(both.data) + self.compress(both.data)
            seeds.append(Seed("two-members", data, both.records * 2))
        return seeds

    def make_case(self, rng: random.Random) -> Case:
        if rng.random() < 0.5:
            return super().make_case(rng)
        plain = rng.choice(self._plain.seeds)
        data, description = mutate(plain.data, rng, plain.layout)
        seed = next(s for s in self.seeds if s.name == plain.name)
        return Case(seed, self.compress(data), f"plain:{description}")


class OFRecordTarget(ReaderTarget):
    """OFRecord files (OneFlow's own parts when the shared reference files are present)."""

    name = "ofrecord"
    format = "ofrecord"

    def layout(self, records: list[bytes]) -> Layout:
        return ofrecord_layout(records)

    def golden(self) -> Iterable[Path]:
        folder = SHARED_DIR / "golden" / "ofrecord"
        return sorted(folder.glob("*/*/*of_record-0"))[:2] if folder.is_dir() else []


class FFRecordTarget(ReaderTarget):
    """FFRecord files, through ``recordkit.open`` and through the ``recordkit.compat.ffrecord`` drop-in API."""

    name = "ffrecord"
    format = "ffrecord"
    suffix = ".ffr"
    checksummed = True

    def layout(self, records: list[bytes]) -> Layout:
        return ffrecord_layout(len(records))

    def golden(self) -> Iterable[Path]:
        folder = GOLDEN_DIR / "ffrecord"
        names = ("empty.ffr", "one.ffr", "varied.ffr", "packed.ffr", "legacy_zero_meta_crc.ffr")
        return [folder / name for name in names]

    def make_seeds(self) -> list[Seed]:
        # Legacy files (no header checksum) cannot promise bit-flip detection in the header.
        seeds = super().make_seeds()
        for seed in seeds:
            if seed.data[:4] == bytes(4):
                seed.layout = ffrecord_layout(len(seed.records))
                seed.records = []
        return seeds

    def run(self, case: Case, rng: random.Random) -> None:
        if rng.random() < 0.2:
            self.run_drop_in(case, rng)
            return
        if case.seed.data[:4] == bytes(4) and case.seed.data:
            case.description += " (legacy)"
        super().run(case, rng)

    def run_drop_in(self, case: Case, rng: random.Random) -> None:
        """Read through ``recordkit.compat.ffrecord.FileReader``."""
        path = os.path.join(self.workdir, "case.ffr")
        with open(path, "wb") as file:
            file.write(case.data)
        reader = _guarded(lambda: FileReader(path, check_data=rng.random() < 0.9))
        if reader is None:
            return
        with reader:
            _guarded(reader.validate)
            if reader.n:
                indices = [rng.randrange(reader.n) for _ in range(5)]
                batch = _guarded(lambda: reader.read(indices))
                one = _guarded(lambda: reader.read_one(indices[0]))
                if batch is not None and one is not None:
                    assert bytes(batch[0]) == bytes(one), "read() and read_one() disagree"


class IndexTarget(ReaderTarget):
    """A TFRecord or OFRecord file read through a sidecar index; either may be damaged."""

    def __init__(self, inner: ReaderTarget) -> None:
        super().__init__()
        self.inner = inner
        self.format = inner.format
        self.checksummed = inner.checksummed
        self.name = f"{inner.name}-index"

    def make_seeds(self) -> list[Seed]:
        return self.inner.seeds

    @staticmethod
    def index_text(seed: Seed) -> bytes:
        """The sidecar index of a seed, computed from its records (not by recordkit)."""
        extra = 16 if seed.layout.repair is not None else 8
        lines, pos = [], 0
        for record in seed.records:
            lines.append(f"{pos} {len(record) + extra}\n")
            pos += len(record) + extra
        return "".join(lines).encode()

    def run(self, case: Case, rng: random.Random) -> None:
        index = self.index_text(case.seed)
        if rng.random() < 0.5:
            index, damage = mutate(index, rng, Layout())
            case.description = f"index:{damage}"
            case.data = case.seed.data
        path = os.path.join(self.workdir, "case.bin")
        with open(path, "wb") as file:
            file.write(case.data)
        with open(path + ".idx", "wb") as file:
            file.write(index)
        case.options = {"index": path + ".idx"}
        reader = _guarded(lambda: rk.open(path, format=self.format, index=path + ".idx"))
        if reader is None:
            return
        # An index that still tiles the file but lies about record boundaries gives a wrong len();
        # only reads are checked against the headers. Without checksums a damaged file under an
        # intact index cannot be told apart either. Only intact pairs must agree with iteration.
        intact = index == self.index_text(case.seed)
        with reader:
            exercise_reader(
                reader, rng, agree=intact and (self.checksummed or case.data == case.seed.data)
            )


class SniffTarget(ReaderTarget):
    """Random and damaged bytes opened with no format given: detection must decide or refuse cleanly."""

    name = "sniff"

    def make_seeds(self) -> list[Seed]:
        return [
            seed
            for target in (TFRecordTarget(), OFRecordTarget(), FFRecordTarget())
            for seed in target.seeds
        ]

    def run(self, case: Case, rng: random.Random) -> None:
        path = os.path.join(self.workdir, "case.bin")
        with open(path, "wb") as file:
            file.write(case.data)
        reader = _guarded(lambda: rk.open(path if rng.random() < 0.5 else io.BytesIO(case.data)))
        if reader is not None:
            with reader:
                exercise_reader(reader, rng)


class RecoverTarget(Target):
    """``recordkit.recover.scan`` over damaged files of every format.

    With checksums (TFRecord, FFRecord) every recovered record must be one of the originals (or empty:
    a damaged header may describe an empty sample whose CRC is 0).
    """

    name = "recover"

    def __init__(self) -> None:
        super().__init__()
        self._targets = (TFRecordTarget(), OFRecordTarget(), FFRecordTarget())

    def make_seeds(self) -> list[Seed]:
        return [
            Seed(f"{target.format}:{seed.name}", seed.data, seed.records, seed.layout)
            for target in self._targets
            for seed in target.seeds
        ]

    def run(self, case: Case, rng: random.Random) -> None:
        fmt = case.seed.name.split(":", 1)[0]
        case.options = {"format": fmt}
        scan = _guarded(lambda: recover.scan(io.BytesIO(case.data), format=fmt, warn=False))
        if scan is None:
            return
        with scan:
            records = _guarded(lambda: list(scan))
        if records is None:
            return
        assert scan.report.records == len(records), "the report miscounts the recovered records"
        spans = [(r.start, r.end) for r in scan.report.skipped]
        assert spans == sorted(spans), "skipped ranges out of order"
        assert all(0 <= a <= b <= scan.report.size for a, b in spans), "a skipped range is outside"
        if fmt != "ofrecord" and case.seed.records:
            allowed = {*case.seed.records, b""}
            assert all(record in allowed for record in records), "recovered a record never written"


# -- payload decoders ------------------------------------------------------------------------------


def _spec_for(
    value: Any, rng: random.Random, *, sequence: bool = False, context: bool = False
) -> Any:
    """A parsing spec that fits a decoded value (or deliberately does not, now and then)."""
    if isinstance(value, list):
        dtype: Any = bytes
        count = len(value)
    else:
        dtype = value.dtype.type
        count = value.size
    if rng.random() < 0.1:
        count += 1
    choice = rng.randrange(3)
    if choice == 0 or (sequence and choice == 1):
        return rk.VarLen(dtype)
    if choice == 1 and not sequence:
        return rk.FixedLen(
            (count,),
            dtype,
            default=None if rng.random() < 0.5 else 0 if dtype is not bytes else b"",
        )
    if context:
        return rk.FixedLen((count,), dtype)
    return rk.FixedLenSequence((count,) if sequence else (), dtype, allow_missing=True)


class PayloadTarget(Target):
    """Serialized messages decoded by every decoder of one message family."""

    def payloads(self) -> list[bytes]:
        """The valid payloads."""
        raise NotImplementedError

    def make_seeds(self) -> list[Seed]:
        return [Seed(f"payload-{i}", data) for i, data in enumerate(self.payloads()) if data]

    def batch(self, case: Case, rng: random.Random) -> list[bytes]:
        """A batch holding the damaged payload among intact ones (the batch paths differ by layout)."""
        batch = [case.seed.data] * rng.randrange(3) + [case.data]
        rng.shuffle(batch)
        return batch


def _golden_records(name: str) -> list[bytes]:
    with rk.open(GOLDEN_DIR / "tfrecord" / name) as reader:
        return list(reader)


class ExampleTarget(PayloadTarget):
    """``tf.train.Example``: decode_example, parse_example(s)."""

    name = "example"

    def payloads(self) -> list[bytes]:
        generated = [
            rk.encode_example({"a": [1, 2, 3], "b": [0.5], "c": [b"xy", b""], "d": []}),
            rk.encode_example({"label": 7}),
        ]
        return _golden_records("examples.tfrecord")[:20] + generated

    def run(self, case: Case, rng: random.Random) -> None:
        decoded = _guarded(lambda: rk.decode_example(case.data))
        features = _guarded(lambda: rk.decode_example(case.seed.data)) or {}
        specs = {
            name: _spec_for(value, rng) for name, value in features.items() if rng.random() < 0.7
        }
        if specs:
            _guarded(lambda: rk.parse_examples(self.batch(case, rng), specs))
            _guarded(lambda: rk.parse_example(case.data, specs))
        if decoded is not None:
            assert all(isinstance(name, str) for name in decoded)


class SequenceExampleTarget(PayloadTarget):
    """``tf.train.SequenceExample``: decode_sequence_example, parse_sequence_example(s)."""

    name = "sequence_example"

    def payloads(self) -> list[bytes]:
        generated = rk.encode_sequence_example(
            {"id": [3]}, {"frames": [[1.0, 2.0], [3.0, 4.0]], "tokens": [[b"a"], [b"b", b"c"]]}
        )
        return [*_golden_records("sequence_examples.tfrecord"), generated]

    def run(self, case: Case, rng: random.Random) -> None:
        _guarded(lambda: rk.decode_sequence_example(case.data))
        context, lists = rk.decode_sequence_example(case.seed.data)
        context_specs = {
            name: _spec_for(value, rng, context=True) for name, value in context.items()
        }
        sequence_specs = {
            name: _spec_for(steps[0], rng, sequence=True) if steps else rk.VarLen(np.float32)
            for name, steps in lists.items()
        }
        _guarded(
            lambda: rk.parse_sequence_examples(self.batch(case, rng), context_specs, sequence_specs)
        )
        _guarded(lambda: rk.parse_sequence_example(case.data, context_specs, sequence_specs))


class OFRecordPayloadTarget(PayloadTarget):
    """``oneflow.OFRecord``: decode_ofrecord, parse_ofrecords, the raw and bytes decoders."""

    name = "ofrecord-payload"

    def payloads(self) -> list[bytes]:
        generated = [
            rk.encode_ofrecord({"x": np.arange(6, dtype=np.float32), "y": [4], "s": [b"text"]}),
            rk.encode_ofrecord({"d": np.ones(3, np.float64), "i": np.arange(4, dtype=np.int32)}),
        ]
        golden = OFRecordTarget().golden()
        found = []
        for path in golden:
            with rk.open(path, format="ofrecord") as reader:
                found += list(reader)[:10]
        return found + generated

    def run(self, case: Case, rng: random.Random) -> None:
        _guarded(lambda: rk.decode_ofrecord(case.data))
        features = rk.decode_ofrecord(case.seed.data)
        specs = {
            name: _spec_for(value, rng) for name, value in features.items() if rng.random() < 0.7
        }
        batch = self.batch(case, rng)
        if specs:
            _guarded(lambda: rk.parse_ofrecords(batch, specs))
        name, value = rng.choice(sorted(features.items(), key=lambda item: item[0]))
        if isinstance(value, list):
            _guarded(lambda: rk_ofrecord.bytes_decoder(batch, name))
            return
        size = max(value.size + rng.choice((-1, 0, 0, 1)), 1)
        dtype = rng.choice((np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8))
        mode = rng.randrange(3)
        _guarded(
            lambda: rk_ofrecord.raw_decoder(
                batch, name, (size,), dtype, dim1_varying_length=mode == 1, truncate=mode == 2
            )
        )


def all_targets() -> dict[str, Target]:
    """Every target by name."""
    # Imported here: both modules import this one.
    from .differential_files import differential_targets as file_targets
    from .differential_payloads import differential_targets as payload_targets

    targets: list[Target] = [
        TFRecordTarget(),
        CompressedTFRecordTarget("gzip"),
        CompressedTFRecordTarget("zlib"),
        OFRecordTarget(),
        FFRecordTarget(),
        IndexTarget(TFRecordTarget()),
        IndexTarget(OFRecordTarget()),
        SniffTarget(),
        RecoverTarget(),
        ExampleTarget(),
        SequenceExampleTarget(),
        OFRecordPayloadTarget(),
        *payload_targets(),
        *file_targets(),
    ]
    return {target.name: target for target in targets}


TARGETS = tuple(all_targets())
"""The target names, in the order the runner uses."""
