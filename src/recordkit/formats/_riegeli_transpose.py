"""Riegeli *transposed* chunks (chunk type ``t``): records that are protocol buffers, stored column-wise.

Riegeli's file format document leaves this encoding undocumented; what follows is the layout Riegeli's
encoder writes (``riegeli/chunk_encoding/transpose_encoder.cc``) and its decoder accepts, and what
:func:`transposed_parts` reads. Every number is a base-128 varint unless said otherwise.

**The chunk's data.** One compression byte (as in a simple chunk: ``0``, ``b``, ``z`` or ``s``), the size of
the *header* block, the header block, the *buckets* one after the other, and the *transitions* block, which
runs to the end of the data. Each block, when compressed, starts with its decompressed size (a varint) and
holds one compressed stream; uncompressed, it is the bytes themselves.

**The header** (decompressed) holds, in order:

* the number of buckets and of buffers; the compressed size of each bucket; the size of each buffer. The
  decompressed buckets, concatenated, are the buffers one after the other, a buffer never spanning two
  buckets (a bucket ends exactly where a buffer does). A buffer holds the values of one field of one message
  type for all the chunk's records, the last record's first (the order decoding reads them in);
* the number of *states* ``n`` of a state machine, then ``n`` state tags and ``n`` successor indices, then
  one *subtype* byte for each state whose tag is a valid varint field's, then, state by state, the index of
  the buffer of each state that reads data;
* the index of the first state; the header ends there.

**States.** A state's tag is ``0`` (nothing), ``1`` (a non-protobuf record: its length is read from the last
buffer, then its bytes from the state's buffer), ``2`` (the start of a submessage), ``3`` (the start of a
record), or a protobuf field key, whose wire type says what it writes: a varint field with subtype ``s < 10``
copies ``s + 1`` bytes from its buffer (stored without their continuation bits, which are set again on all
bytes but the last), with ``10 <= s < 138`` writes the one-byte value ``s - 10`` without a buffer; a fixed32 or
fixed64 field copies 4 or 8 bytes; a length-delimited field copies a varint length and as many bytes; a group
start or end writes its key alone. A key with wire type ``6`` marks the *end* of a submessage whose field has
that key with wire type ``2``. A successor index ``>= n`` means ``index - n`` reached *implicitly*.

**Decoding runs backwards.** Records are produced last first, and each record's fields last first: each state
visited writes its bytes in front of all written so far. A submessage's end is met before its fields, its
start after them, and the start then writes the submessage's key and its length in front. A record start
marks where a record begins; at the end, the chunk must hold exactly the records and bytes its header says.

**Transitions.** After a state is handled, the next one is its successor or, when a transition byte ``b``
is due, the state ``b >> 2`` places after its successor; the ``b & 3`` transitions after that one take the
successor of an explicit state as it is, without a byte. Leaving an implicit state takes its successor and
costs neither a byte nor one of those counted transitions. Decoding ends when a byte is due and the
transitions block is exhausted.

**Hostile input.** Every count is bounded by the bytes that could hold it before anything is allocated for
it; decoding stops as soon as it has written more than the chunk header's decoded size, has more submessages
open than the rest of that size could close, or more records than the chunk header says; a chain of implicit
states must not loop; no state is
visited more often than the transitions allow (``4 * len(transitions) + 2`` times), so the header's counts
are checked against that bound before decoding. Any inconsistency raises :class:`Malformed`.
"""

from __future__ import annotations

from collections.abc import Iterator

from recordkit.formats._decompress import NAMES, inflate
from recordkit.formats._varint import Malformed, varint, varint_at

__all__ = ["transposed_parts"]

_NOOP, _NONPROTO, _SUBMESSAGE_START, _RECORD_START = 0, 1, 2, 3
"""The state tags below 8, which are not protobuf keys."""

# What a state does: its action.
_COPY, _VARINT, _FIXED, _STRING, _END, _START, _RECORD, _OTHER, _NOTHING = range(9)
_SPECIAL = {_NOOP: _NOTHING, _NONPROTO: _OTHER, _SUBMESSAGE_START: _START, _RECORD_START: _RECORD}

_MASKS = [0] + [int.from_bytes(b"\x80" * (n - 1) + b"\x00", "little") for n in range(1, 11)]
"""``_MASKS[n]``: the continuation bits of an ``n``-byte varint, read little-endian."""

_U32 = (1 << 32) - 1


def _varint(data: bytes, pos: int, bits: int, what: str) -> tuple[int, int]:
    """Return the varint of at most ``bits`` bits at ``data[pos:]`` and the position after it.

    Like Riegeli, a varint may be longer than it needs (trailing zero groups) but not longer than
    ``ceil(bits / 7)`` bytes, nor hold a value of more than ``bits`` bits.
    """
    found = varint_at(data, pos, bits)
    if found is None:
        raise Malformed(f"{what} runs past the end of its block, or is too long or too large")
    return found


class _Cursor:
    """Reads the decompressed header front to back."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def u32(self, what: str) -> int:
        pos = self.pos
        if pos < len(self.data) and self.data[pos] < 0x80:  # most of the header's numbers
            self.pos = pos + 1
            return self.data[pos]
        value, self.pos = _varint(self.data, pos, 32, what)
        return value

    def u64(self, what: str) -> int:
        value, self.pos = _varint(self.data, self.pos, 64, what)
        return value

    def take(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise Malformed(f"{what} run past the end of the header")
        self.pos += n
        return self.data[self.pos - n : self.pos]


def _buffers(kind: int, header: _Cursor, data: bytes, pos: int) -> tuple[list[bytes], int]:
    """Read the bucket and buffer sizes from ``header``, the buckets from ``data[pos:]``; return the
    buffers and where the buckets end."""
    num_buckets = header.u32("the number of buckets")
    num_buffers = header.u32("the number of buffers")
    if num_buckets + num_buffers > header.left():
        raise Malformed(
            f"the header lists {num_buckets} buckets and {num_buffers} buffers in "
            f"{header.left()} bytes"
        )
    bucket_sizes = [header.u64("a bucket size") for _ in range(num_buckets)]
    buffer_sizes = [header.u64("a buffer size") for _ in range(num_buffers)]
    buckets = []
    for size in bucket_sizes:
        if size > len(data) - pos:
            raise Malformed(f"a bucket of {size} bytes runs past the chunk data")
        buckets.append(data[pos : pos + size])
        pos += size
    if not buckets:
        if buffer_sizes:
            raise Malformed(f"{num_buffers} buffers but no bucket")
        return [], pos
    declared = [
        len(bucket)
        if not kind
        else _varint(bucket, 0, 64, f"the decompressed size of bucket {number}")[0]
        for number, bucket in enumerate(buckets)
    ]
    # Buffers fill the buckets in order, each within one bucket; checked on the declared sizes first,
    # so that a bucket is decompressed only once the header has been found consistent with it.
    owners, bucket, room = [], 0, declared[0]
    for size in buffer_sizes:
        if size > room:
            raise Malformed(f"a buffer of {size} bytes does not fit in bucket {bucket}")
        room -= size
        owners.append(bucket)
        while not room and bucket + 1 < num_buckets:
            bucket += 1
            room = declared[bucket]
    if bucket + 1 < num_buckets or room:
        raise Malformed("the buffer sizes do not add up to the bucket sizes")
    contents = [inflate(kind, bucket, f"bucket {number}") for number, bucket in enumerate(buckets)]
    buffers, at = [], [0] * num_buckets
    for size, owner in zip(buffer_sizes, owners, strict=True):
        buffers.append(contents[owner][at[owner] : at[owner] + size])
        at[owner] += size
    return buffers, pos


class _Machine:
    """The states of a transposed chunk, as parallel lists indexed by state."""

    def __init__(self, header: _Cursor, num_buffers: int) -> None:
        count = header.u32("the number of states")
        if 2 * count > header.left():  # each state has at least a tag and a successor
            raise Malformed(f"the header lists {count} states in {header.left()} bytes")
        tags = [header.u32("a state tag") for _ in range(count)]
        successors = [header.u32("a successor index") for _ in range(count)]
        varints = sum(1 for tag in tags if tag >= 8 and tag & 7 == 0)
        subtypes = iter(header.take(varints, "the varint subtypes"))
        self.count = count
        self.action = [_NOTHING] * count
        self.key = [b""] * count  # written reversed, as everything is written back to front
        self.width = [0] * count
        self.buffer = [0] * count
        self.implicit = [False] * count
        self.successor = [0] * count
        for state, tag in enumerate(tags):
            self._state(state, tag, header, subtypes, num_buffers)
            successor = successors[state]
            if successor >= count:
                successor -= count
                self.implicit[state] = True
            if successor >= count:
                raise Malformed(f"state {state}'s successor {successor} is not a state")
            self.successor[state] = successor
        if _NONPROTO in tags and not num_buffers:
            raise Malformed("non-protobuf records without the buffer of their lengths")
        self.first = header.u32("the first state")
        if self.first >= count:
            raise Malformed(f"the first state {self.first} is not one of the {count} states")
        self._check_chains()

    def _state(
        self, state: int, tag: int, header: _Cursor, subtypes: Iterator[int], num_buffers: int
    ) -> None:
        def buffer() -> None:
            index = header.u32("a buffer index")
            if index >= num_buffers:
                raise Malformed(f"state {state} reads buffer {index} of {num_buffers}")
            self.buffer[state] = index

        if tag < 4:
            self.action[state] = _SPECIAL[tag]
            if tag == _NONPROTO:
                buffer()
            return
        end = tag & 7 == 6
        if end:
            tag -= 4  # the length-delimited key of the submessage that ends
        if tag < 8 or tag & 7 > 5:
            raise Malformed(f"state {state} has no valid protobuf key ({tag})")
        key = varint(tag)
        wire = tag & 7
        if wire == 0:
            subtype = next(subtypes)
            if subtype < 10:
                self.action[state], self.width[state] = _VARINT, subtype + 1
                buffer()
            elif subtype < 138:
                self.action[state] = _COPY
                key += bytes([subtype - 10])
            else:
                raise Malformed(f"state {state} has an unknown varint subtype {subtype}")
        elif wire in (1, 5):
            self.action[state], self.width[state] = _FIXED, 8 if wire == 1 else 4
            buffer()
        elif wire == 2:
            self.action[state] = _END if end else _STRING
            if not end:
                buffer()
        else:
            self.action[state] = _COPY
        self.key[state] = key[::-1]

    def _check_chains(self) -> None:
        """Refuse a loop of implicit successors (decoding would never need a byte, nor end)."""
        seen = [0] * self.count
        for start in range(self.count):
            if seen[start]:
                continue
            state, mark = start, start + 1
            seen[state] = mark
            while self.implicit[state]:
                state = self.successor[state]
                if seen[state] == mark:
                    raise Malformed(f"the implicit successors of state {start} form a loop")
                if seen[state]:
                    break
                seen[state] = mark

    def skipping(self) -> list[int]:
        """For each state, the first state from it on that is not an implicit one that does nothing.

        Such a state only passes on to its successor, at no cost in bytes or counted transitions, so
        decoding goes straight past it (which also bounds the steps by the states that act).
        """
        target = list(range(self.count))
        done = [False] * self.count
        for start in range(self.count):
            path = []
            state = start
            while not done[state] and self.implicit[state] and self.action[state] == _NOTHING:
                path.append(state)
                state = self.successor[state]
            end = target[state]
            for passed in path:
                target[passed], done[passed] = end, True
            done[start] = True
        return target

    def most_bytes(self, buffers: list[bytes], transitions: int) -> int:
        """The most bytes decoding can write: each state runs at most ``4 * transitions + 2`` times."""
        per_visit = sum(len(key) for key in self.key)
        per_visit += 10 * self.action.count(_START)  # a submessage's key and length
        return (4 * transitions + 2) * per_visit + sum(map(len, buffers))


def transposed_parts(data: bytes, num_records: int, decoded_size: int) -> tuple[list[int], bytes]:
    """Decode a transposed chunk's data: return where each record starts (and the end), and the bytes.

    ``num_records`` and ``decoded_size`` are the chunk header's; the records must match both.

    Raises
    ------
    Malformed
        The data is inconsistent with itself or with the header's counts.
    ImportError
        The codec's package is not installed.
    """
    if not data:
        raise Malformed("a transposed chunk with no data")
    kind = data[0]
    if kind and kind not in NAMES:
        raise Malformed(f"unknown compression type {kind:#04x}")
    size, pos = _varint(data, 1, 64, "the header size")
    if size > len(data) - pos:
        raise Malformed(f"the header ({size} bytes) runs past the chunk data")
    header = _Cursor(inflate(kind, data[pos : pos + size], "header"))
    buffers, pos = _buffers(kind, header, data, pos + size)
    machine = _Machine(header, len(buffers))
    if header.left():
        raise Malformed(f"{header.left()} bytes after the end of the header")
    transitions = inflate(kind, data[pos:], "transitions")
    visits = 4 * len(transitions) + 2
    starts = machine.action.count(_RECORD) + machine.action.count(_OTHER)
    if num_records > starts * visits:
        raise Malformed(f"{num_records} records, more than the transitions can reach")
    if decoded_size > machine.most_bytes(buffers, len(transitions)):
        raise Malformed(f"{decoded_size} bytes, more than the transitions can write")
    return _run(machine, buffers, transitions, num_records, decoded_size)


def _run(
    machine: _Machine, buffers: list[bytes], transitions: bytes, num_records: int, decoded_size: int
) -> tuple[list[int], bytes]:
    """Run the state machine; return the record bounds and bytes (see :func:`transposed_parts`)."""
    action, key, width, buffer = machine.action, machine.key, machine.width, machine.buffer
    implicit, successor, count = machine.implicit, machine.successor, machine.count
    target = machine.skipping()
    lengths = len(buffers) - 1  # the buffer of non-protobuf records' lengths
    at = [0] * len(buffers)  # each buffer's read position
    out = bytearray()  # the output reversed: reversed once at the end
    open_at: list[int] = []  # where each open submessage ends (bytes written before its end)
    open_key: list[bytes] = []
    limits: list[int] = []  # the bytes written before each record start
    state = target[machine.first]
    free = 1 if implicit[state] else 0  # transitions due without a byte
    read = 0
    while True:
        what = action[state]
        if what == _STRING:
            index = buffer[state]
            source, begin = buffers[index], at[index]
            if begin < len(source) and source[begin] < 0x80:
                end = begin + 1 + source[begin]
            else:
                length, end = _varint(source, begin, 32, "a string's length")
                if length > _U32 - (end - begin):
                    raise Malformed("a string's length overflows")
                end += length
            if end > len(source):
                raise Malformed("a string runs past its buffer")
            at[index] = end
            out += source[begin:end][::-1]
            out += key[state]
        elif what == _END:
            if 2 * (len(open_at) + 1) + len(out) > decoded_size:
                raise Malformed("more submessages open than the decoded size can close")
            open_at.append(len(out))
            open_key.append(key[state])
        elif what == _START:
            if not open_at:
                raise Malformed("a submessage starts that was not ended")
            length = len(out) - open_at.pop()
            if length < 0x80:
                out.append(length)
            elif length > _U32:
                raise Malformed("a submessage over 4 GiB")
            else:
                out += varint(length)[::-1]
            out += open_key.pop()
        elif what == _COPY:
            out += key[state]
        elif what in (_VARINT, _FIXED):
            index, n = buffer[state], width[state]
            source, begin = buffers[index], at[index]
            if begin + n > len(source):
                kind = "varint" if what == _VARINT else "fixed"
                raise Malformed(f"a {kind} field runs past its buffer")
            at[index] = begin + n
            if what == _VARINT:
                value = int.from_bytes(source[begin : begin + n], "little") | _MASKS[n]
                out += value.to_bytes(n, "big")
            else:
                out += source[begin : begin + n][::-1]
            out += key[state]
        elif what != _NOTHING:  # a record starts (after its bytes for a non-protobuf record)
            if what == _OTHER:
                source, begin = buffers[lengths], at[lengths]
                length, at[lengths] = _varint(source, begin, 32, "a non-protobuf record's length")
                index = buffer[state]
                source, begin = buffers[index], at[index]
                if begin + length > len(source):
                    raise Malformed("a non-protobuf record runs past its buffer")
                at[index] = begin + length
                out += source[begin : begin + length][::-1]
            if open_at:
                raise Malformed("a record starts inside a submessage")
            if len(limits) == num_records:
                raise Malformed(f"more than the {num_records} records the chunk header says")
            limits.append(len(out))
        if len(out) > decoded_size:
            raise Malformed(f"the records run past the {decoded_size} bytes the chunk header says")
        following = successor[state]
        if free:
            state = target[following]
            if not implicit[state]:
                free -= 1
        else:
            if read == len(transitions):
                break
            byte = transitions[read]
            read += 1
            following += byte >> 2
            if following >= count:
                raise Malformed(f"a transition to state {following} of {count}")
            state = target[following]
            free = (byte & 3) + implicit[state]
    return _finish(out, open_at, limits, num_records, decoded_size)


def _finish(
    out: bytearray, open_at: list[int], limits: list[int], num_records: int, decoded_size: int
) -> tuple[list[int], bytes]:
    """Check the decoded chunk against its header; return the record bounds and bytes in order."""
    if open_at:
        raise Malformed(f"{len(open_at)} submessages still open at the end")
    if len(limits) != num_records:
        raise Malformed(f"{len(limits)} records, not the {num_records} the chunk header says")
    size = limits[-1] if limits else 0
    if size != len(out):
        raise Malformed(f"{len(out) - size} bytes before the first record's start")
    if size != decoded_size:
        raise Malformed(f"{size} bytes of records, not the {decoded_size} the chunk header says")
    out.reverse()
    # limits[k] counts the bytes of the records after record n - 1 - k (and of it): from the end
    return [size - limit for limit in reversed(limits)] + [size] if limits else [0], bytes(out)
