"""Differential fuzz targets: payloads generated at the wire level, decoded by recordkit and by protobuf.

Each case builds a batch of 1-20 ``tf.train.Example``, ``tf.train.SequenceExample`` or ``oneflow.OFRecord``
payloads byte by byte, by structure: packed, unpacked and mixed numeric lists, lists split over several
occurrences, empty lists and empty ``Feature`` messages, oneof switches inside one ``Feature`` and across the
repeated value fields of one map entry, repeated keys, value-before-key entries, entries without key or value
(or without either), unknown fields of every wire type (groups too) at every level, over-long varints, tags
and lengths, negative integers, NaN/-0.0/infinite floats with any bit pattern, empty and non-UTF-8 bytes
values, and repeated ``Features``/``FeatureLists`` messages. About half the batches hold a group of 8 or more
records of one length and layout, so the batch template path of ``recordkit.decode.columns`` runs as well as
the scanner.

The oracle is protobuf's own parser. From the message it reads, the expected result of every spec is derived
(see ``docs/parsing.md`` for the rules) and compared exactly with what ``parse_examples``,
``parse_example``, ``decode_example``, ``parse_sequence_examples``, ``decode_sequence_example``,
``parse_ofrecords``, ``decode_ofrecord`` and the OneFlow decoders return -- floats bit for bit. Where
recordkit deliberately differs from protobuf the generator says so: it marks each payload with the places
where recordkit must raise although protobuf reads it (an unknown field, or a key or value of another wire
type, inside a map entry), and where protobuf refuses it (malformed bytes inside a feature value that
recordkit skips unread when the feature is not asked for). With TensorFlow installed, ``diff-example`` also
runs ``tf.io.parse_example`` on some batches of payloads in the layout TensorFlow's parser reads.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError as ProtobufDecodeError

import recordkit as rk
from recordkit._proto.oneflow import record_pb2
from recordkit._proto.tensorflow import example_pb2
from recordkit.compat import oneflow as rk_ofrecord
from recordkit.errors import DecodeError

from .targets import OUTCOMES, Case, Seed, Target

__all__ = [
    "DifferentialExampleTarget",
    "DifferentialOFRecordTarget",
    "DifferentialSequenceExampleTarget",
    "Payload",
    "check_example_batch",
    "check_ofrecord_batch",
    "check_sequence_batch",
    "differential_targets",
]

#: Feature oneof field number -> how its values are encoded, per message family.
TF_LISTS = {1: "bytes", 2: "f4", 3: "varint"}
OF_LISTS = {1: "bytes", 2: "f4", 3: "f8", 4: "varint", 5: "varint"}
ALL = "*"  # a poison that makes recordkit refuse the whole record
NAMES = (b"a", b"b", b"c", b"d", "é".encode(), b"")
NOT_UTF8 = b"\xff\xfe"
FLOAT_BITS = (
    0x7FC00000,  # quiet NaN
    0xFFC12345,  # negative quiet NaN with a payload
    0x7F800001,  # signaling NaN
    0x80000000,  # -0.0
    0x7F800000,  # inf
    0xFF800000,  # -inf
    0x00000001,  # smallest subnormal
    0x3FC00000,  # 1.5
)
DOUBLE_BITS = (0x7FF8000000000000, 0x7FF0000000000001, 0x8000000000000000, 0xFFF0000000000000)
_FLOAT32 = struct.Struct("<I")
_FLOAT64 = struct.Struct("<Q")


# -- generating payloads ---------------------------------------------------------------------------


_ONE_BYTE = [bytes((i,)) for i in range(128)]
_CONTINUED = bytes(i | 0x80 for i in range(256))  # translate table: set the continuation bit
_LETTERS = bytes(b"abcdefgh"[i % 8] for i in range(256))
VARINT_SIZES = (1, 1, 1, 2, 2, 3, 5, 10)
BYTES_SIZES = (0, 1, 3, 8)


def pick(rng: random.Random, items: Sequence[Any]) -> Any:
    """``rng.choice(items)``, faster (the generator calls it a million times a minute)."""
    return items[int(rng.random() * len(items))]


def varint(value: int, size: int = 0) -> bytes:
    """``value`` (negative: as 64-bit two's complement) as a varint, padded to ``size`` bytes if longer."""
    if 0 <= value < 128 and size < 2:
        return _ONE_BYTE[value]
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F)
        value >>= 7
        if not value:
            break
        out[-1] |= 0x80
    while len(out) < size:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


@dataclass
class Payload:
    """One generated record.

    Attributes
    ----------
    data
        The serialized message.
    clean
        The same message with every poisoned feature value replaced by an empty ``Feature``: what the
        oracle reads when the poisoned features are not asked for.
    poison
        Where recordkit must refuse the record: :data:`ALL`, or ``(section, name)`` for a feature (section
        ``"f"`` for Example and OFRecord features, ``"c"`` for context features, ``"l"`` for feature lists).
    plain
        Whether TensorFlow's parser reads the record as protobuf does (no layout it handles differently).
    """

    data: bytes
    clean: bytes
    poison: set[Any] = field(default_factory=set)
    plain: bool = True


#: Per batch: feature name -> (the list kind records usually hold, their usual value count or None).
Schema = dict[bytes, tuple[int, "int | None"]]
UNPACKED_WIRE_TYPE = {"varint": 0, "f4": 5, "f8": 1, "bytes": 2}


class Writer:
    """Writes one record. Layout and lengths come from ``s``, value contents from ``v``.

    Records written from equal ``s`` states have the same length and layout whatever ``v`` holds, which is
    what the batch template path looks for. ``dirty`` is the chance, at each place a poison can go, that
    one does.
    """

    def __init__(
        self,
        s: random.Random,
        v: random.Random,
        lists: dict[int, str],
        dirty: float,
        *,
        plain: bool = False,
    ) -> None:
        self.s = s
        self.v = v
        self.lists = lists
        self.dirty = dirty
        self.poison: set[Any] = set()
        self.marked = False  # a poison inside the feature being written
        self.plain = True
        self.rare = 0.0 if plain else 1.0  # 0: only layouts TensorFlow reads as protobuf does
        self.odd = self.weird(0.2)  # whether tags and lengths may be over-long in this record

    # primitives ------------------------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        """Draw a layout decision."""
        return self.s.random() < p

    def weird(self, p: float) -> bool:
        """Draw a decision for a layout TensorFlow reads otherwise than protobuf (never in plain mode)."""
        return self.s.random() < p * self.rare

    def pad(self) -> int:
        """The size of a tag or length: usually canonical, now and then over-long (protobuf allows 5)."""
        if self.odd and self.s.random() < 0.1:
            self.plain = False
            return self.s.randint(2, 5)
        return 0

    def tag(self, number: int, wire_type: int) -> bytes:
        """A field's tag."""
        return varint(number << 3 | wire_type, self.pad() if self.odd else 0)

    def delimited(self, number: int, payload: bytes) -> bytes:
        """A length-delimited field."""
        if self.odd:
            return self.tag(number, 2) + varint(len(payload), self.pad()) + payload
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def field_of_type(self, number: int, wire_type: int) -> bytes:
        """A well-formed field ``number`` of ``wire_type`` (a group holds one varint or nothing)."""
        if wire_type == 0:
            return self.tag(number, 0) + self.value("varint")
        if wire_type == 1:
            return self.tag(number, 1) + self.value("f8")
        if wire_type == 5:
            return self.tag(number, 5) + self.value("f4")
        if wire_type == 2:
            return self.delimited(number, self.value("bytes"))
        inner = self.tag(5, 0) + self.value("varint") if self.chance(0.5) else b""
        return self.tag(number, 3) + inner + self.tag(number, 4)

    def misfit(self, number: int, allowed: tuple[int, ...] = (2,)) -> bytes:
        """Known field ``number`` with another wire type than its own: protobuf skips it as unknown."""
        self.plain = False
        wire_type = self.s.choice([t for t in (0, 1, 3, 5) if t not in allowed])
        return self.field_of_type(number, wire_type)

    def poisoned(self, whole: bool, weight: float = 1.0) -> bool:
        """Whether to poison here: the ``whole`` record, or else the feature being written."""
        if self.dirty and self.s.random() < self.dirty * weight:
            if whole:
                self.poison.add(ALL)
            else:
                self.marked = True
            self.plain = False
            return True
        return False

    # values and lists ------------------------------------------------------------------------------

    def value(self, encoding: str) -> bytes:
        """One value's encoding: its length drawn from ``s``, its contents from ``v``."""
        s, v = self.s, self.v
        if encoding == "varint":
            size = pick(s, VARINT_SIZES) if s.random() < 0.9 else s.randint(1, 10)
            body = v.randbytes(size - 1).translate(_CONTINUED)
            return body + _ONE_BYTE[v.getrandbits(7)]  # over-long when the top groups are zero
        if encoding == "f4":
            bits = pick(v, FLOAT_BITS) if v.random() < 0.3 else v.getrandbits(32)
            return _FLOAT32.pack(bits)
        if encoding == "f8":
            bits = pick(v, DOUBLE_BITS) if v.random() < 0.3 else v.getrandbits(64)
            return _FLOAT64.pack(bits)
        size = pick(s, BYTES_SIZES) if s.random() < 0.9 else s.randint(0, 40)
        if v.random() < 0.5:
            return v.randbytes(size)  # mostly not UTF-8
        return v.randbytes(size).translate(_LETTERS)

    def list_message(self, encoding: str, count: int, depth: int) -> bytes:
        """A BytesList/FloatList/... message with ``count`` values, in packed or unpacked runs."""
        wire_type = UNPACKED_WIRE_TYPE[encoding]
        parts = []
        remaining = count
        packed = unpacked = 0
        while remaining or (not parts and self.chance(0.2)):
            run = min(remaining, pick(self.s, (1, 2, remaining or 1, remaining or 1)))
            if not self.rare:
                run = remaining  # one run: packed, or every value unpacked
            values = [self.value(encoding) for _ in range(run)]
            if encoding == "bytes":
                parts += [self.delimited(1, value) for value in values]
            elif self.chance(0.75) or (encoding == "f4" and not self.rare):
                # Packed (maybe an empty run). Plain batches pack their floats: TensorFlow 2.21 writes
                # past its buffer for more unpacked floats than a FixedLenFeature holds.
                parts.append(self.delimited(1, b"".join(values)))
                packed += 1
            else:
                parts += [self.tag(1, wire_type) + value for value in values]
                unpacked += 1
                if encoding == "f4" and values:
                    # Never for TensorFlow: its parser writes past its buffer (and may abort the
                    # process) when unpacked floats outnumber a FixedLenFeature's shape.
                    self.plain = False
            remaining -= run
            if self.weird(0.04):
                parts.append(self.unknown(depth))  # TensorFlow refuses it after unpacked values
        if packed > 1 or (packed and unpacked):
            self.plain = False  # TensorFlow reads the first packed run only
        if self.weird(0.04):
            parts.append(self.misfit(1, (2, UNPACKED_WIRE_TYPE[encoding])))
        if self.poisoned(False, 0.3):
            parts.append(self.bad_list_field(encoding, depth))
        return b"".join(parts)

    def bad_list_field(self, encoding: str, depth: int) -> bytes:
        """Something refused inside a list: a broken run, bad bytes."""
        if encoding != "bytes" and self.chance(0.5):
            if encoding == "varint":
                run = self.s.choice((b"\x80", b"\x01\xff", b"\xff" * 10 + b"\x01"))
            else:
                run = b"\x00" * self.s.choice((1, 3, 5, 7))
            return self.delimited(1, run)
        return self.malformed(depth)

    def feature(self, kind: int, count: int, depth: int) -> list[bytes]:
        """The fields of a ``Feature`` whose last list is ``kind`` (0: none) with ``count`` values.

        The caller may split them over several occurrences of the map entry's value.
        """
        fields: list[bytes] = []
        lists = list(self.lists)
        if self.weird(0.1):  # a oneof switch: other lists first, cleared by the last one
            self.plain = False
            for _ in range(self.s.randint(1, 2)):
                other = self.s.choice(lists)
                size = self.s.randint(0, 3)
                fields.append(
                    self.delimited(other, self.list_message(self.lists[other], size, depth + 1))
                )
        if kind:
            encoding = self.lists[kind]
            if self.weird(0.1):  # the same list written twice: protobuf concatenates them
                self.plain = False
                first = self.s.randint(0, count)
                fields.append(self.delimited(kind, self.list_message(encoding, first, depth + 1)))
                count -= first
            fields.append(self.delimited(kind, self.list_message(encoding, count, depth + 1)))
        if self.weird(0.04):
            # TensorFlow takes the first field of a Feature for its list ("Unsupported datatype").
            fields.insert(self.s.randint(0, len(fields)), self.unknown(depth))
        if self.weird(0.04):
            fields.insert(self.s.randint(0, len(fields)), self.misfit(kind or self.s.choice(lists)))
        if self.poisoned(False, 0.3):
            fields.append(self.malformed(depth))
        return fields

    # unknown and malformed fields ------------------------------------------------------------------

    def unknown(self, depth: int, *, plain_ok: bool = False) -> bytes:
        """A well-formed unknown field (numbers from 6 up are known at no level)."""
        s = self.s
        number = s.choice((6, 7, 15, 16, 2047, (1 << 29) - 1))
        wire_type = s.choice((0, 1, 2, 3, 5))
        if not plain_ok or wire_type == 3:
            self.plain = False
        if wire_type != 3 or s.random() < 0.9:
            return self.field_of_type(number, wire_type)
        nesting = s.randint(2, 4) if s.random() < 0.8 else 100 - depth  # as deep as protobuf allows
        return self.tag(number, 3) * nesting + self.tag(number, 4) * nesting

    def malformed(self, depth: int) -> bytes:
        """Bytes protobuf refuses; they go last in their message (a varint may run to its end)."""
        choice = self.s.randrange(10)
        number = self.s.choice((6, 9, 300))
        if choice == 0:
            return varint(number << 3 | self.s.choice((6, 7)))  # no such wire type
        if choice == 1:
            return b"\x00\x01"  # field number 0
        if choice == 2:
            return self.tag(number, 3) + self.tag(number, 0) + b"\x01"  # an unterminated group
        if choice == 3:
            return self.tag(number, 3) + self.tag(number + 1, 4)  # a mismatched end
        if choice == 4:
            return self.tag(number, 0) + b"\xff" * 10 + b"\x01"  # an 11-byte varint
        if choice == 5:
            return b"\xb0\x80\x80\x80\x80\x00\x01"  # a 6-byte tag
        if choice == 6:
            return varint((1 << 29) << 3) + b"\x00"  # a tag above 2**32 - 1
        if choice == 7:
            return self.tag(number, 2) + varint(5)  # a length past the end
        if choice == 8:
            return self.tag(number, 4)  # an end-group tag outside a group
        nesting = 100 - depth + 1  # one group deeper than protobuf allows
        return self.tag(number, 3) * nesting + self.tag(number, 4) * nesting

    # map entries and maps --------------------------------------------------------------------------

    def entry(self, key: bytes, value_fields: list[bytes]) -> tuple[bytes, bytes, bool]:
        """A map entry in one of the layouts protobuf reads (some of which TensorFlow reads otherwise).

        Returns the entry, the name protobuf reads from it, and whether the value was written.
        """
        s = self.s
        number = 2
        key_field = self.delimited(1, key)
        if len(value_fields) > 1 and self.weird(0.3):  # the value written as several occurrences
            self.plain = False
            cut = s.randint(1, len(value_fields) - 1)
            values = [
                self.delimited(number, b"".join(value_fields[:cut])),
                self.delimited(number, b"".join(value_fields[cut:])),
            ]
        else:
            values = [self.delimited(number, b"".join(value_fields))]
        if key == NOT_UTF8:
            layout = 0.0
        elif not self.rare:
            layout = 0.85 if s.random() < 0.1 else 0.0
        else:
            layout = s.random()
        name, kept = key, True
        if layout < 0.8:
            parts = [key_field, *values]
        elif layout < 0.88:
            parts = [*values, key_field]  # value before key
        else:
            self.plain = False
            if layout < 0.93:
                parts = values  # no key: the name is ""
                name = b""
            elif layout < 0.97:
                parts = [key_field]  # no value: an empty Feature
                kept = False
            else:
                parts = [
                    self.delimited(1, s.choice(NAMES)),
                    *values,
                    key_field,
                ]  # the last key wins
        if self.poisoned(True, 0.15):  # protobuf drops such an entry or refuses the record
            wrong = self.field_of_type(s.choice((1, 2)), s.choice((0, 1, 3, 5)))
            parts.insert(s.randint(0, len(parts)), wrong if s.random() < 0.5 else self.unknown(2))
        return self.delimited(1, b"".join(parts)), name, kept

    def names(self, schema: Schema) -> list[bytes]:
        """The names of the entries of one map: most of the schema's, some repeated, some others."""
        s = self.s
        names = [name for name in schema if s.random() < 0.8]
        if names and s.random() < 0.15:
            names.append(s.choice(names))  # a repeated key: the last entry wins
        if s.random() < 0.1:
            names.append(s.choice(NAMES))
        s.shuffle(names)
        return names

    def kind_and_count(self, schema: Schema, name: bytes) -> tuple[int, int]:
        """The list of one entry: usually the schema's, sometimes another kind, count, or none."""
        s = self.s
        kind, count = schema.get(name, (s.choice(list(self.lists)), None))
        if s.random() < 0.08:
            kind = s.choice((0, *self.lists))
        if count is None or s.random() < 0.08:
            count = s.choice((0, 1, 2, 3, 4, 6)) if s.random() < 0.9 else s.randint(0, 40)
        return kind, count

    def features(self, schema: Schema, depth: int, section: str) -> tuple[list[bytes], list[bytes]]:
        """The map entries of a ``Features`` message (or of an OFRecord), as ``(data, clean)`` lists."""
        data: list[bytes] = []
        clean: list[bytes] = []
        last_kind: dict[bytes, list[int]] = {}
        for key in self.names(schema):
            kind, count = self.kind_and_count(schema, key)
            last_kind.setdefault(key, []).append(kind)
            if self.lists is OF_LISTS:
                if self.chance(0.02):
                    key = NOT_UTF8  # proto2: protobuf reads it (decode_ofrecord refuses it)
            elif self.poisoned(True, 0.05):
                key = NOT_UTF8  # proto3: protobuf refuses the record
            self.marked = False
            fields = self.feature(kind, count, depth + 2)
            self.add_entry(data, clean, section, key, fields)
            if self.weird(0.04):
                extra = self.unknown(depth, plain_ok=depth == 0)
                data.append(extra)
                clean.append(extra)
            if self.weird(0.03):  # an empty entry (no key, no value): the name "" with no list
                self.plain = False
                data.append(b"\x0a\x00")
                clean.append(b"\x0a\x00")
            if self.weird(0.03):  # an entry of another wire type: protobuf skips it
                extra = self.misfit(1)
                data.append(extra)
                clean.append(extra)
        if any(len(kinds) > 1 and not kinds[-1] for kinds in last_kind.values()):
            self.plain = False  # TensorFlow keeps an earlier entry over a last one with no list
        self.tail_poison(data, depth)
        return data, clean

    def feature_lists(self, schema: Schema) -> tuple[list[bytes], list[bytes]]:
        """The map entries of a ``FeatureLists`` message, as ``(data, clean)`` lists."""
        data: list[bytes] = []
        clean: list[bytes] = []
        for name in self.names(schema):
            self.marked = False
            steps = []
            kind, count = self.kind_and_count(schema, name)
            for _ in range(
                self.s.choice((0, 1, 2, 3)) if self.s.random() < 0.9 else self.s.randint(0, 12)
            ):
                step_kind, step_count = kind, count
                if self.chance(0.1):
                    step_kind, step_count = self.kind_and_count(schema, name)
                steps.append(self.delimited(1, b"".join(self.feature(step_kind, step_count, 4))))
                if self.chance(0.03):
                    steps.append(self.unknown(3))
            if self.weird(0.05):
                steps.append(self.misfit(1))
            self.add_entry(data, clean, "l", name, steps)
        self.tail_poison(data, 1)
        return data, clean

    def add_entry(
        self, data: list[bytes], clean: list[bytes], section: str, key: bytes, fields: list[bytes]
    ) -> None:
        """Write an entry; a poisoned value is recorded under the name protobuf reads, and emptied."""
        entry, name, kept = self.entry(key, fields)
        data.append(entry)
        if self.marked and kept:
            self.poison.add((section, name))
            clean.append(empty_entry(name))
        else:
            clean.append(entry)

    def tail_poison(self, data: list[bytes], depth: int) -> None:
        """Maybe end a map message with a malformed field (recordkit refuses the record)."""
        if self.poisoned(True, 0.05):
            data.append(self.malformed(depth))

    def message(
        self, fields: list[tuple[int, list[bytes], list[bytes]]], depth: int = 0
    ) -> tuple[bytes, bytes]:
        """A record whose field ``number`` holds ``entries`` (maybe split over several occurrences)."""
        data: list[bytes] = []
        clean: list[bytes] = []
        for number, entries, clean_entries in fields:
            cuts = [0, len(entries)]
            if len(entries) > 1 and self.weird(0.1):
                self.plain = False
                cuts.insert(1, self.s.randint(1, len(entries) - 1))
            for a, b in itertools.pairwise(cuts):
                data.append(self.delimited(number, b"".join(entries[a:b])))
                clean.append(self.delimited(number, b"".join(clean_entries[a:b])))
            if self.chance(0.05):
                extra = self.unknown(depth, plain_ok=True)
                data.append(extra)
                clean.append(extra)
        if self.weird(0.1):
            extra = self.misfit(self.s.choice([n for n, _, _ in fields]))
            data.append(extra)
            clean.append(extra)
        return b"".join(data), b"".join(clean)


def empty_entry(key: bytes) -> bytes:
    """A canonical map entry of ``key`` with an empty value."""
    body = b"\x0a" + varint(len(key)) + key + b"\x12\x00"
    return b"\x0a" + varint(len(body)) + body


def make_schema(s: random.Random, lists: dict[int, str]) -> Schema:
    """Per batch: the features, each with its usual list kind and, for most, a fixed value count."""
    names = s.sample(NAMES, s.randint(1, len(NAMES)))
    counts = (None, 0, 1, 1, 2, 3, 4, 6)
    return {name: (s.choice(list(lists)), s.choice(counts)) for name in names}


# -- batches ---------------------------------------------------------------------------------------


def make_batch(
    rng: random.Random,
    build: Callable[[Writer, Schema], tuple[bytes, bytes]],
    lists: dict[int, str],
) -> tuple[Schema, list[Payload]]:
    """1-20 records of one schema; often a group of 8+ sharing one layout (the template path)."""
    schema = make_schema(rng, lists)
    plain = rng.random() < 0.15  # a batch TensorFlow's parser reads as protobuf does
    dirty = 0.0 if plain or rng.random() < 0.55 else rng.choice((0.02, 0.1, 0.3))
    size = 1 + int(19.99 * rng.random() ** 2)  # 1-20, mostly small (a batch costs by its records)
    group = rng.randint(8, max(8, size)) if rng.random() < 0.5 else 0
    layout_seed = rng.getrandbits(64)
    batch = []
    for i in range(max(size, group)):
        s = random.Random(layout_seed) if i < group else random.Random(rng.getrandbits(64))
        writer = Writer(s, random.Random(rng.getrandbits(64)), lists, dirty, plain=plain)
        data, clean = build(writer, schema)
        batch.append(Payload(data, clean, writer.poison, writer.plain))
    rng.shuffle(batch)
    return schema, batch


def build_example(w: Writer, schema: Schema) -> tuple[bytes, bytes]:
    """A ``tf.train.Example``."""
    data, clean = w.features(schema, 1, "f")
    return w.message([(1, data, clean)])


def build_ofrecord(w: Writer, schema: Schema) -> tuple[bytes, bytes]:
    """A ``oneflow.OFRecord`` (the record is the feature map)."""
    data, clean = w.features(schema, 0, "f")
    return b"".join(data), b"".join(clean)


def build_sequence_example(w: Writer, schema: Schema) -> tuple[bytes, bytes]:
    """A ``tf.train.SequenceExample``: context and feature lists share the schema's names."""
    context = w.features(schema, 1, "c") if w.chance(0.8) else ([], [])
    lists = w.feature_lists(schema) if w.chance(0.9) else ([], [])
    fields = [(1, *context), (2, *lists)]
    if w.chance(0.3):
        fields.reverse()
    return w.message(fields)


# -- what protobuf reads -----------------------------------------------------------------------------


class Refused(Exception):
    """The oracle's verdict: recordkit must raise DecodeError."""


def parse(cls: Any, data: bytes) -> Any:
    """Protobuf's reading of ``data``, unknown fields dropped (so lists serialize to their values alone)."""
    message = cls.FromString(data)
    message.DiscardUnknownFields()
    return message


def feature_values(feature: Any, lists: dict[int, str]) -> tuple[int, Any]:
    """``(kind, values)`` of a protobuf ``Feature``: kind 0 when no list is set. Floats keep their bits."""
    name = feature.WhichOneof("kind")
    if name is None:
        return 0, None
    typed = getattr(feature, name)
    number = feature.DESCRIPTOR.fields_by_name[name].number
    encoding = lists[number]
    if encoding == "bytes":
        return number, list(typed.value)
    if encoding == "varint":
        return number, np.array(
            list(typed.value), np.int32 if number == 4 and lists is OF_LISTS else np.int64
        )
    dtype = np.dtype("<f4" if encoding == "f4" else "<f8")
    clean = type(typed)()  # the values alone: unknown fields are serialized beside them
    clean.CopyFrom(typed)
    clean.DiscardUnknownFields()
    packed = clean.SerializeToString()
    if not packed:
        return number, np.zeros(0, dtype.newbyteorder("="))
    _, start = _read_varint(packed, 1)
    return number, np.frombuffer(packed, dtype, offset=start).astype(dtype.newbyteorder("="))


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def decoded(entries: Any, lists: dict[int, str]) -> dict[str, Any]:
    """What ``decode_example``/``decode_ofrecord`` return for a protobuf feature map."""
    out = {}
    if any(isinstance(name, bytes) for name in entries):
        raise Refused("a feature name is not UTF-8")
    for name in sorted(entries):
        kind, values = feature_values(entries[name], lists)
        out[name] = np.zeros(0, np.float32) if kind == 0 else values
    return out


# -- what each spec gives -----------------------------------------------------------------------------

TF_KIND_OF = {"bytes": 1, "str": 1, np.dtype(np.int64): 3, np.dtype(np.float32): 2}


def value_type(spec: Any) -> Any:
    """The spec's value type: ``"bytes"``, ``"str"`` or a numpy dtype."""
    return spec.dtype


def as_text(values: list[bytes]) -> list[str]:
    """UTF-8 decoded values; invalid UTF-8 is refused."""
    try:
        return [value.decode("utf-8") for value in values]
    except UnicodeDecodeError:
        raise Refused("not UTF-8") from None


def tf_row(spec: Any, kind: int, values: Any) -> Any:
    """A record's values for ``spec`` under TensorFlow's rules (``None``: missing)."""
    target = value_type(spec)
    if kind and kind != TF_KIND_OF[target]:
        raise Refused("kind")
    if not kind:
        return None
    return as_text(values) if target == "str" else values


def of_row(spec_type: Any, kind: int, values: Any) -> Any:
    """A record's values under OneFlow's casting rules (``None``: missing); see docs/parsing.md."""
    if not kind:
        return None
    if isinstance(spec_type, str):
        if kind != 1:
            raise Refused("kind")
        return as_text(values) if spec_type == "str" else values
    if kind == 1:
        if len(values) != 1:
            raise Refused("a bytes list read as numbers holds one value")
        values = np.frombuffer(values[0], np.int8)
    with np.errstate(invalid="ignore", over="ignore"):
        return values.astype(spec_type)


def defined(spec_type: Any, kind: int, values: Any) -> Any:
    """Which cast values have a defined result (a float outside an integer type's range has none)."""
    if not kind or isinstance(spec_type, str):
        return None
    if kind == 1:
        return np.ones(len(values[0]) if len(values) == 1 else 0, bool)
    if spec_type.kind not in "iu" or values.dtype.kind != "f":
        return np.ones(len(values), bool)
    info = np.iinfo(spec_type)
    with np.errstate(invalid="ignore"):
        whole = np.trunc(values.astype(np.float64))
        return np.isfinite(whole) & (whole >= info.min) & (whole < float(info.max) + 1)


def _empty(target: Any, n: int = 0) -> np.ndarray[Any, Any]:
    return np.zeros(n, object if isinstance(target, str) else target)


def _array(values: Any, target: Any) -> np.ndarray[Any, Any]:
    if isinstance(target, str):
        out = np.empty(len(values), object)
        out[:] = values
        return out
    return np.asarray(values, target)


def assemble(spec: Any, rows: list[Any], *, mask: bool = False) -> Any:
    """Stack the records' rows as recordkit returns them; ``mask``: rows are definedness flags."""
    target = np.dtype(bool) if mask else value_type(spec)
    rows = [None if row is None else _array(row, target) for row in rows]
    n = len(rows)
    if isinstance(spec, rk.VarLen):
        counts = [0 if row is None else len(row) for row in rows]
        values = [row for row in rows if row is not None]
        flat = np.concatenate(values) if values else _empty(target)
        return rk.Ragged(flat, np.concatenate(([0], np.cumsum(counts, dtype=np.int64))))
    size = math.prod(spec.shape)
    fill = True if mask else spec.default
    if isinstance(spec, rk.FixedLen):
        out = np.empty((n, *spec.shape), object if isinstance(target, str) else target)
        flat = out.reshape(n, size)  # a view: rows assigned element by element, objects too
        for i, row in enumerate(rows):
            if row is None:
                if fill is None:
                    raise Refused("missing")
                flat[i] = np.broadcast_to(fill, spec.shape).reshape(size)
            elif len(row) != size:
                raise Refused("count")
            else:
                flat[i] = row
        return out
    items = [0 if row is None else len(row) // size for row in rows]
    if any(row is not None and len(row) % size for row in rows):
        raise Refused("not whole items")
    return pad_items(spec, rows, items, target, fill)


def pad_items(spec: Any, rows: list[Any], items: list[int], target: Any, fill: Any) -> Any:
    """``(n, longest, *shape)``: each record's items, then the padding."""
    longest = max(items, default=0)
    out = np.empty((len(rows), longest, *spec.shape), object if isinstance(target, str) else target)
    if fill is None:
        fill = {"bytes": b"", "str": ""}.get(target, 0) if isinstance(target, str) else 0
    out[...] = fill
    for i, row in enumerate(rows):
        if row is not None and items[i]:
            out[i, : items[i]] = row.reshape((items[i], *spec.shape))
    return out


def expected_batch(
    specs: dict[str, Any],
    features: list[Any],
    row: Callable[..., Any],
    lists: dict[int, str],
    of: bool,
) -> dict[str, Any]:
    """The result of parsing a batch whose records hold ``features`` (protobuf feature maps)."""
    out = {}
    for name, spec in specs.items():
        found = [feature_values(f[name], lists) if name in f else (0, None) for f in features]
        out[name] = assemble(spec, [row(spec if not of else value_type(spec), *kv) for kv in found])
        if of and not isinstance(value_type(spec), str):
            masks = [defined(value_type(spec), *kv) for kv in found]
            out[name] = (out[name], assemble(spec, masks, mask=True))
    return out


# -- comparing -------------------------------------------------------------------------------------


def same(got: Any, want: Any, where: str) -> None:
    """Assert ``got`` equals ``want`` exactly (dtype, shape, every bit); ``want`` may carry a mask."""
    mask = None
    if isinstance(want, tuple):
        want, mask = want
    if isinstance(want, list):  # a decoded bytes list
        assert isinstance(got, list), f"{where}: {type(got).__name__} instead of a list"
        assert got == want, f"{where}: {got!r} instead of {want!r}"
        return
    if not isinstance(want, (np.ndarray, rk.Ragged)):  # one value of a FixedLen of shape ()
        assert type(got) is type(want), (
            f"{where}: {type(got).__name__} instead of {type(want).__name__}"
        )
        got, want = np.asarray([got]), np.asarray([want])
        mask = None if mask is None else np.asarray([mask])
    if isinstance(want, rk.Ragged):
        assert isinstance(got, rk.Ragged), f"{where}: {type(got).__name__} instead of Ragged"
        assert got.row_splits.tolist() == want.row_splits.tolist(), f"{where}: row splits differ"
        inner = mask.values if isinstance(mask, rk.Ragged) else mask
        same(got.values, (want.values, inner) if inner is not None else want.values, where)
        return
    assert isinstance(got, np.ndarray), f"{where}: {type(got).__name__} instead of an array"
    assert got.shape == want.shape, f"{where}: shape {got.shape} instead of {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} instead of {want.dtype}"
    if want.dtype == object:
        assert got.tolist() == want.tolist(), (
            f"{where}: {got.tolist()!r} instead of {want.tolist()!r}"
        )
        return
    if mask is not None:
        got, want = got[mask], want[mask]
    assert got.tobytes() == want.tobytes(), f"{where}: {got!r} instead of {want!r}"


def outcome(call: Callable[[], Any]) -> Any:
    """Call; a recordkit DecodeError becomes :class:`Refused` (anything else propagates)."""
    try:
        result = call()
    except DecodeError as exc:
        OUTCOMES["DecodeError"] += 1
        return Refused(str(exc))
    OUTCOMES["ok"] += 1
    return result


def compare(got: Any, want: Any, where: str) -> None:
    """Both refused, or both gave the same dict of results."""
    if isinstance(want, Refused):
        assert isinstance(got, Refused), f"{where}: recordkit read what it must refuse ({want})"
        return
    assert not isinstance(got, Refused), f"{where}: recordkit refused ({got}), expected a result"
    assert list(got) == list(want), f"{where}: keys {list(got)} instead of {list(want)}"
    for key in want:
        same(got[key], want[key], f"{where}[{key!r}]")


def oracle(call: Callable[[], Any]) -> Any:
    """Run an expectation; :class:`Refused` is returned, not raised."""
    try:
        return call()
    except Refused as exc:
        return exc


def must_refuse(batch: list[Payload], sections: dict[str, list[str]]) -> bool:
    """Whether a poison in the batch lies where recordkit reads (the record, or a feature asked for)."""
    wanted = {(section, name.encode()) for section, names in sections.items() for name in names}
    return any(ALL in p.poison or p.poison & wanted for p in batch)


def messages(cls: Any, batch: list[Payload]) -> list[Any] | None:
    """Protobuf's reading of the clean records (``None`` if a record poisoned as a whole)."""
    if any(ALL in p.poison for p in batch):
        return None
    return [parse(cls, p.clean) for p in batch]


def some(batch: list[Payload], rng: random.Random) -> list[Payload]:
    """Up to 4 records of the batch (the single-record decoders are checked on a sample)."""
    return batch if len(batch) <= 4 else rng.sample(batch, 4)


def check_decode(
    cls: Any,
    payload: Payload,
    decode: Callable[[bytes], Any],
    expect: Callable[[Any], Any],
    where: str,
) -> None:
    """A single-record decoder agrees with protobuf on ``payload.data``, or both refuse it.

    The decoders read every feature, so a poison anywhere makes them refuse the record.
    """
    try:
        message = parse(cls, payload.data)
    except ProtobufDecodeError:
        want: Any = Refused("protobuf refuses")
    else:
        want = Refused("poisoned") if payload.poison else oracle(lambda: expect(message))
    compare(outcome(lambda: decode(payload.data)), want, where)


def first_row(value: Any) -> Any:
    """Row 0 of a batch result (a pair with its mask stays a pair)."""
    if isinstance(value, tuple):
        return first_row(value[0]), first_row(value[1])
    return value[0]


# -- specs -----------------------------------------------------------------------------------------

TF_NATURAL = {1: bytes, 2: np.float32, 3: np.int64}
OF_NATURAL = {1: bytes, 2: np.float32, 3: np.float64, 4: np.int32, 5: np.int64}
OF_NUMERIC = (np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8)


def pick_dtype(rng: random.Random, kind: int, of: bool) -> Any:
    """Usually the dtype that fits ``kind``; now and then another (a mismatch, or an OFRecord cast)."""
    natural = OF_NATURAL if of else TF_NATURAL
    if rng.random() < 0.8:
        dtype = natural[kind]
    else:
        dtype = rng.choice((bytes, str, *(OF_NUMERIC if of else (np.float32, np.int64))))
    if dtype is bytes and rng.random() < 0.2:
        dtype = str
    return dtype


def pick_default(rng: random.Random, dtype: Any) -> Any:
    """A default of the spec's type, or ``None``."""
    if rng.random() < 0.5:
        return None
    if dtype is bytes:
        return rng.choice((b"", b"dflt"))
    if dtype is str:
        return rng.choice(("", "dflt"))
    return rng.choice((0, 7)) if np.dtype(dtype).kind in "iu" else rng.choice((0.0, -2.5))


def pick_spec(
    rng: random.Random, kind: int, count: int | None, *, of: bool, sequence: str = ""
) -> Any:
    """A spec for a feature whose records usually hold ``count`` values of ``kind``.

    ``sequence`` is ``"context"`` or ``"lists"`` for the two halves of a SequenceExample.
    """
    dtype = pick_dtype(rng, kind, of)
    n = count if count is not None else rng.choice((1, 2, 3))
    if rng.random() < 0.1:
        n += 1
    form = rng.randrange(3)
    if form == 0:
        return rk.VarLen(dtype)
    if (form == 1 and sequence != "lists") or sequence == "context":
        shape: tuple[int, ...] = () if n == 1 and rng.random() < 0.5 else (n,)
        if n and n % 2 == 0 and rng.random() < 0.3:
            shape = (2, n // 2)
        return rk.FixedLen(shape, dtype, default=pick_default(rng, dtype))
    if sequence == "lists":
        shape = () if n == 1 and rng.random() < 0.5 else (n,)
        allow = rng.random() < 0.5
        return rk.FixedLenSequence(
            shape, dtype, default=pick_default(rng, dtype), allow_missing=allow
        )
    item = 2 if n and n % 2 == 0 and rng.random() < 0.3 else 1
    return rk.FixedLenSequence((item,) if item > 1 else (), dtype, default=pick_default(rng, dtype))


def pick_specs(
    rng: random.Random, schema: Schema, *, of: bool = False, sequence: str = ""
) -> dict[str, Any]:
    """Specs for most of the schema's features, and now and then for one no record holds."""
    specs = {
        name.decode(): pick_spec(rng, kind, count, of=of, sequence=sequence)
        for name, (kind, count) in schema.items()
        if rng.random() < 0.75
    }
    if rng.random() < 0.2:
        name = rng.choice(NAMES).decode()
        if name not in specs:
            kind = rng.choice(list(OF_LISTS if of else TF_LISTS))
            specs[name] = pick_spec(rng, kind, None, of=of, sequence=sequence)
    return specs


# -- checks ----------------------------------------------------------------------------------------


def check_example_batch(
    batch: list[Payload], specs: dict[str, Any], rng: random.Random, tf: Any = None
) -> None:
    """parse_examples, parse_example and decode_example agree with protobuf (and TensorFlow, if given)."""
    records = [p.data for p in batch]
    want = expect_features(
        example_pb2.Example, batch, specs, lambda m: m.features.feature, tf_row, TF_LISTS
    )
    compare(outcome(lambda: rk.parse_examples(records, specs)), want, "parse_examples")
    i = rng.randrange(len(batch))
    one = expect_features(
        example_pb2.Example, batch[i : i + 1], specs, lambda m: m.features.feature, tf_row, TF_LISTS
    )
    if not isinstance(one, Refused):
        one = {name: first_row(value) for name, value in one.items()}
    compare(outcome(lambda: rk.parse_example(records[i], specs)), one, "parse_example")
    for payload in some(batch, rng):
        check_decode(
            example_pb2.Example,
            payload,
            rk.decode_example,
            lambda m: decoded(m.features.feature, TF_LISTS),
            "decode_example",
        )
    if tf is not None and all(p.plain for p in batch):
        as_tf = {name: tf_equivalent(spec) for name, spec in specs.items()}
        if any(as_tf[name] is not spec for name, spec in specs.items()):
            want = expect_features(
                example_pb2.Example, batch, as_tf, lambda m: m.features.feature, tf_row, TF_LISTS
            )
        check_tensorflow(tf, records, specs, want)


def tf_equivalent(spec: Any) -> Any:
    """The spec recordkit reads as TensorFlow reads ``spec``: a FixedLen default of no values is none."""
    if isinstance(spec, rk.FixedLen) and spec.default is not None and spec.default.size == 0:
        return rk.FixedLen(spec.shape, spec.dtype)
    return spec


def expect_features(
    cls: Any,
    batch: list[Payload],
    specs: dict[str, Any],
    features: Callable[[Any], Any],
    row: Callable[..., Any],
    lists: dict[int, str],
) -> Any:
    """The expected result of parsing ``batch`` with ``specs`` (or :class:`Refused`)."""
    if must_refuse(batch, {"f": list(specs)}):
        return Refused("poisoned")
    parsed = messages(cls, batch)
    assert parsed is not None
    of = lists is OF_LISTS
    return oracle(lambda: expected_batch(specs, [features(m) for m in parsed], row, lists, of))


def check_ofrecord_batch(batch: list[Payload], specs: dict[str, Any], rng: random.Random) -> None:
    """parse_ofrecords, decode_ofrecord, raw_decoder and bytes_decoder agree with protobuf."""
    records = [p.data for p in batch]
    want = expect_features(record_pb2.OFRecord, batch, specs, lambda m: m.feature, of_row, OF_LISTS)
    compare(outcome(lambda: rk.parse_ofrecords(records, specs)), want, "parse_ofrecords")
    for payload in some(batch, rng):
        check_decode(
            record_pb2.OFRecord,
            payload,
            rk.decode_ofrecord,
            lambda m: decoded(m.feature, OF_LISTS),
            "decode_ofrecord",
        )
    name = rng.choice(NAMES).decode()
    refused = must_refuse(batch, {"f": [name]})
    parsed = None if refused else messages(record_pb2.OFRecord, batch)
    found = (
        []
        if parsed is None
        else [
            feature_values(m.feature[name], OF_LISTS) if name in m.feature else (0, None)
            for m in parsed
        ]
    )
    if rng.random() < 0.3:
        want = Refused("poisoned") if refused else oracle(lambda: {"v": expected_bytes(found)})
        got = outcome(lambda: {"v": _array(rk_ofrecord.bytes_decoder(records, name), "bytes")})
        compare(got, want, "bytes_decoder")
        return
    shape = rng.choice(((1,), (2,), (3,), (2, 2), (0,), ()))
    dtype = np.dtype(rng.choice(OF_NUMERIC))
    mode = rng.randrange(3)
    options = {"dim1_varying_length": mode == 1, "truncate": mode == 2}
    want = (
        Refused("poisoned")
        if refused
        else oracle(lambda: {"v": expected_raw(found, shape, dtype, **options)})
    )
    got = outcome(lambda: {"v": rk_ofrecord.raw_decoder(records, name, shape, dtype, **options)})
    compare(got, want, f"raw_decoder({name!r}, {shape}, {dtype}, {options})")


def expected_bytes(found: list[tuple[int, Any]]) -> np.ndarray[Any, Any]:
    """What bytes_decoder returns: each record's single bytes value."""
    for kind, values in found:
        if kind != 1 or len(values) != 1:
            raise Refused("not one bytes value")
    return _array([values[0] for _, values in found], "bytes")


def expected_raw(
    found: list[tuple[int, Any]],
    shape: tuple[int, ...],
    dtype: Any,
    *,
    dim1_varying_length: bool,
    truncate: bool,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """What raw_decoder returns (see its docstring), with which values are defined."""
    size = math.prod(shape)
    out = np.zeros((len(found), size), dtype)
    mask = np.ones((len(found), size), bool)
    for i, (kind, values) in enumerate(found):
        if not kind:
            raise Refused("missing")
        row = of_row(dtype, kind, values)
        count = len(row)
        if (
            not truncate
            and kind != 1
            and (count > size or (count < size and not dim1_varying_length))
        ):
            raise Refused("count")
        kept = min(count, size)
        out[i, :kept] = row[:kept]
        mask[i, :kept] = defined(dtype, kind, values)[:kept]
    return out.reshape((len(found), *shape)), mask.reshape((len(found), *shape))


def check_sequence_batch(
    batch: list[Payload], context: dict[str, Any], lists: dict[str, Any], rng: random.Random
) -> None:
    """parse_sequence_examples, parse_sequence_example and decode_sequence_example agree with protobuf."""
    records = [p.data for p in batch]
    want = expect_sequences(batch, context, lists)
    got = outcome(lambda: flatten(*rk.parse_sequence_examples(records, context, lists)))
    compare(got, want, "parse_sequence_examples")
    i = rng.randrange(len(batch))
    one = expect_sequences(batch[i : i + 1], context, lists)
    if not isinstance(one, Refused):
        one = {
            key: first_row(value) for key, value in one.items() if not key.startswith("lengths:")
        }
    got = outcome(lambda: flatten(*rk.parse_sequence_example(records[i], context, lists), {}))
    compare(got, one, "parse_sequence_example")
    for payload in some(batch, rng):
        check_decode(
            example_pb2.SequenceExample,
            payload,
            decode_sequence,
            expected_decoded_sequence,
            "decode_sequence_example",
        )


def flatten(
    context: dict[str, Any], sequence: dict[str, Any], lengths: dict[str, Any]
) -> dict[str, Any]:
    """One dict of the three results of parse_sequence_examples."""
    out = {f"context:{k}": v for k, v in context.items()}
    out.update({f"sequence:{k}": v for k, v in sequence.items()})
    out.update({f"lengths:{k}": v for k, v in lengths.items()})
    return out


def expect_sequences(batch: list[Payload], context: dict[str, Any], lists: dict[str, Any]) -> Any:
    """The expected flattened result of parse_sequence_examples (or :class:`Refused`)."""
    if must_refuse(batch, {"c": list(context), "l": list(lists)}):
        return Refused("poisoned")
    parsed = messages(example_pb2.SequenceExample, batch)
    assert parsed is not None

    def build() -> dict[str, Any]:
        ctx = expected_batch(context, [m.context.feature for m in parsed], tf_row, TF_LISTS, False)
        out = {f"context:{k}": v for k, v in ctx.items()}
        for name, spec in lists.items():
            out.update(expected_list(name, spec, [m.feature_lists.feature_list for m in parsed]))
        return flatten_order(out, context, lists)

    return oracle(build)


def flatten_order(
    out: dict[str, Any], context: dict[str, Any], lists: dict[str, Any]
) -> dict[str, Any]:
    """``out`` in the key order of :func:`flatten`."""
    keys = [f"context:{k}" for k in context] + [f"sequence:{k}" for k in lists]
    keys += [f"lengths:{k}" for k, spec in lists.items() if isinstance(spec, rk.FixedLenSequence)]
    return {key: out[key] for key in keys}


def expected_list(name: str, spec: Any, feature_lists: list[Any]) -> dict[str, Any]:
    """The result for one feature list spec over the batch."""
    target = value_type(spec)
    want_kind = TF_KIND_OF[target]
    steps_per_record = []
    rows = []
    for lists_map in feature_lists:
        if name not in lists_map:
            if isinstance(spec, rk.FixedLenSequence) and not spec.allow_missing:
                raise Refused("missing feature list")
            steps_per_record.append(0)
            continue
        steps = [feature_values(step, TF_LISTS) for step in lists_map[name].feature]
        steps_per_record.append(len(steps))
        for kind, values in steps:
            if kind and kind != want_kind:
                raise Refused("kind")
            row = [] if not kind else as_text(values) if target == "str" else values
            if isinstance(spec, rk.FixedLenSequence) and len(row) != math.prod(spec.shape):
                raise Refused("count")
            rows.append(_array(row, target))
    if isinstance(spec, rk.VarLen):
        inner = assemble(spec, rows)
        outer = np.concatenate(([0], np.cumsum(steps_per_record, dtype=np.int64)))
        return {f"sequence:{name}": rk.Ragged(inner, outer)}
    flat = np.concatenate(rows) if rows else _empty(target)
    per_record = np.split(
        flat, np.cumsum([n * math.prod(spec.shape) for n in steps_per_record])[:-1]
    )
    padded = pad_items(spec, per_record, steps_per_record, target, spec.default)
    return {f"sequence:{name}": padded, f"lengths:{name}": np.array(steps_per_record, np.int64)}


def decode_sequence(data: bytes) -> dict[str, Any]:
    """decode_sequence_example as one flat dict."""
    context, lists = rk.decode_sequence_example(data)
    out = {f"context:{k}": v for k, v in context.items()}
    for name, steps in lists.items():
        out[f"list:{name}"] = steps_value(steps)
    return out


def expected_decoded_sequence(message: Any) -> dict[str, Any]:
    """What decode_sequence_example gives for a protobuf SequenceExample, as one flat dict."""
    out = {f"context:{k}": v for k, v in decoded(message.context.feature, TF_LISTS).items()}
    for name in sorted(message.feature_lists.feature_list):
        steps = message.feature_lists.feature_list[name].feature
        decoded_steps = [decoded({"s": step}, TF_LISTS)["s"] for step in steps]
        out[f"list:{name}"] = steps_value(decoded_steps)
    return out


def steps_value(steps: list[Any]) -> np.ndarray[Any, Any]:
    """Steps compared as an object array of ``(dtype, bytes)`` or bytes lists."""
    out = np.empty(len(steps), object)
    out[:] = [
        tuple(step) if isinstance(step, list) else (step.dtype.str, step.tobytes())
        for step in steps
    ]
    return out


# -- TensorFlow ------------------------------------------------------------------------------------


def load_tensorflow() -> Any:
    """TensorFlow, warmed up, or ``None`` when it is not installed or RECORDKIT_FUZZ_TF=0."""
    if os.environ.get("RECORDKIT_FUZZ_TF", "1") == "0":
        return None
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
    except ImportError:
        return None
    tf.io.parse_example([rk.encode_example({"a": 1})], {"a": tf.io.VarLenFeature(tf.int64)})
    return tf


def tf_spec(tf: Any, spec: Any) -> Any:
    """The TensorFlow feature of a spec (``None`` for ``str``: TensorFlow does not decode UTF-8)."""
    if value_type(spec) == "str":
        return None
    dtype = {"bytes": tf.string, np.dtype(np.int64): tf.int64, np.dtype(np.float32): tf.float32}[
        value_type(spec)
    ]
    if isinstance(spec, rk.VarLen):
        return tf.io.VarLenFeature(dtype)
    default = None if spec.default is None else spec.default
    if isinstance(spec, rk.FixedLen):
        return tf.io.FixedLenFeature(spec.shape, dtype, default_value=default)
    if default is not None:
        default = default.reshape(-1)[0] if default.size else None
    return tf.io.FixedLenSequenceFeature(
        spec.shape, dtype, allow_missing=True, default_value=default
    )


def check_tensorflow(tf: Any, records: list[bytes], specs: dict[str, Any], want: Any) -> None:
    """tf.io.parse_example reads a batch of records in the plain layout as the oracle says."""
    features = {name: tf_spec(tf, spec) for name, spec in specs.items()}
    if not features or any(feature is None for feature in features.values()):
        return
    try:
        out = tf.io.parse_example(tf.constant(records, tf.string), features)
    except tf.errors.InvalidArgumentError as exc:
        OUTCOMES["TensorFlow refused"] += 1
        got: Any = Refused(str(exc)[:200])
    else:
        OUTCOMES["TensorFlow read"] += 1
        got = {name: from_tensorflow(tf, out[name], len(records)) for name in specs}
    compare(got, want, "tf.io.parse_example")


def from_tensorflow(tf: Any, value: Any, n: int) -> Any:
    """A TensorFlow result as recordkit gives it (a SparseTensor becomes a Ragged)."""
    if isinstance(value, tf.SparseTensor):
        rows = value.indices.numpy()[:, 0] if value.indices.shape[0] else np.zeros(0, np.int64)
        counts = np.bincount(rows, minlength=n).astype(np.int64)
        return rk.Ragged(value.values.numpy(), np.concatenate(([0], np.cumsum(counts))))
    return value.numpy()


# -- targets ---------------------------------------------------------------------------------------


@dataclass
class BatchCase(Case):
    """A case: a batch of generated payloads (``data`` holds them, each after its varint length)."""

    batch: list[Payload] = field(default_factory=list)
    schema: Schema = field(default_factory=dict)


class DifferentialTarget(Target):
    """Generated batches of one message family, checked against protobuf's parser."""

    lists: dict[int, str] = TF_LISTS
    build: Callable[[Writer, Schema], tuple[bytes, bytes]] = staticmethod(build_example)

    def make_seeds(self) -> list[Seed]:
        return [Seed("generated", b"")]

    def make_case(self, rng: random.Random) -> Case:
        schema, batch = make_batch(rng, self.build, self.lists)
        data = b"".join(varint(len(p.data)) + p.data for p in batch)
        poisoned = sum(1 for p in batch if p.poison)
        description = f"{len(batch)} records, {poisoned} poisoned"
        return BatchCase(self.seeds[0], data, description, batch=batch, schema=schema)


class DifferentialExampleTarget(DifferentialTarget):
    """``tf.train.Example`` batches: parse_examples, parse_example, decode_example; TensorFlow too."""

    name = "diff-example"

    def __init__(self, *, tensorflow: bool | None = None, tf_fraction: float = 0.5) -> None:
        super().__init__()
        self.use_tf = tensorflow
        self.tf_fraction = tf_fraction
        self.tf: Any = None

    def make_seeds(self) -> list[Seed]:
        if self.use_tf is not False:
            self.tf = load_tensorflow()
            if self.use_tf and self.tf is None:
                raise RuntimeError("TensorFlow was asked for and cannot be imported")
        return super().make_seeds()

    def run(self, case: Case, rng: random.Random) -> None:
        assert isinstance(case, BatchCase)
        specs = pick_specs(rng, case.schema)
        tf = self.tf if self.tf is not None and rng.random() < self.tf_fraction else None
        check_example_batch(case.batch, specs, rng, tf)


class DifferentialSequenceExampleTarget(DifferentialTarget):
    """``tf.train.SequenceExample`` batches: parse_sequence_example(s), decode_sequence_example."""

    name = "diff-sequence-example"
    build = staticmethod(build_sequence_example)

    def run(self, case: Case, rng: random.Random) -> None:
        assert isinstance(case, BatchCase)
        schema = case.schema
        context = pick_specs(rng, schema, sequence="context")
        lists = pick_specs(rng, schema, sequence="lists")
        check_sequence_batch(case.batch, context, lists, rng)


class DifferentialOFRecordTarget(DifferentialTarget):
    """``oneflow.OFRecord`` batches: parse_ofrecords, decode_ofrecord, raw_decoder, bytes_decoder."""

    name = "diff-ofrecord"
    lists = OF_LISTS
    build = staticmethod(build_ofrecord)

    def run(self, case: Case, rng: random.Random) -> None:
        assert isinstance(case, BatchCase)
        specs = pick_specs(rng, case.schema, of=True)
        check_ofrecord_batch(case.batch, specs, rng)


def differential_targets() -> list[Target]:
    """The targets of this module, for ``all_targets``."""
    return [
        DifferentialExampleTarget(),
        DifferentialSequenceExampleTarget(),
        DifferentialOFRecordTarget(),
    ]
