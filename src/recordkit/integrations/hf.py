"""HuggingFace ``datasets`` over record files, and HuggingFace datasets written as sharded records.

:func:`to_dataset` reads any recordkit source (a file, a glob, a directory, a dataset with a manifest, a
tensorflow-datasets directory: what :func:`recordkit.open` reads, resolved the same way) as a
``datasets.Dataset``, or a ``datasets.IterableDataset`` with ``streaming=True``. Its ``Features`` come from
the spec, else from what the dataset's manifest says (the HuggingFace features :func:`write` stored, else
the manifest's schema), else from the first records; an :class:`~recordkit.Image` spec (or encoded JPEG or
PNG bytes) becomes a ``datasets.Image`` column. Records that are neither Examples nor OFRecords (the
payload kind ``recordkit info`` reports as ``raw``) become one ``binary`` column, :data:`RAW_COLUMN`.

:func:`write` writes a HuggingFace dataset as ``tf.train.Example`` records in shards with a manifest
(:class:`~recordkit.ShardWriter`), which :func:`to_dataset` and every other reader read back; with
``payload="raw"``, a dataset of one ``binary`` column as records of those bytes.

Also importable as ``recordkit.hf``. Needs ``pip install 'recordkit[hf]'`` (the ``datasets`` package).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.metadata
import itertools
import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from recordkit.datasets import ShardWriter
from recordkit.decode.images import Image
from recordkit.decode.parsing import parse_examples, parse_ofrecords
from recordkit.decode.payloads import RAW_PAYLOAD, decode_payload, detect_payload
from recordkit.decode.schema import LIST_DTYPES, FeatureStats, Schema, infer_spec
from recordkit.decode.specs import FixedLen, VarLen, as_value_type
from recordkit.decode.tables import encode_examples, encode_ofrecords
from recordkit.errors import DecodeError, RecordKitError, UnsupportedOperationError
from recordkit.formats import get_format
from recordkit.formats.payloads import EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD
from recordkit.io import ResolvedSources, resolve_sources
from recordkit.support.extras import needs, require
from recordkit.support.moved import renamed_arguments
from recordkit.support.signatures import IMAGE_SIGNATURES

__all__ = ["METADATA_KEY", "RAW_COLUMN", "features_of", "to_dataset", "write"]

METADATA_KEY = "huggingface"
"""The key of a manifest's ``metadata`` under which :func:`write` stores the dataset's features
(``{"features": Features.to_dict()}``, and ``"payload": "raw"`` for raw records), so that :func:`to_dataset`
gives them back exactly."""

RAW_COLUMN = "record"
"""The one column, of ``binary`` values, that :func:`to_dataset` gives records that are neither Examples
nor OFRecords (payload kind ``"raw"``): each record's bytes, as they are."""

_BATCH = 256
_SAMPLE = 100
_HF_VALUE = {"bytes": "binary", "str": "string"}
_PAYLOADS = (EXAMPLE_PAYLOAD, OFRECORD_PAYLOAD, RAW_PAYLOAD)


def _datasets() -> Any:
    return require("datasets", "recordkit.hf", "HuggingFace datasets", "hf", "datasets")


@dataclasses.dataclass(frozen=True)
class _Column:
    """How one feature is parsed and turned into a HuggingFace value."""

    spec: Any  # what the records are parsed with
    feature: Any  # the datasets feature
    scalar_or_none: bool = False  # a VarLen read as one optional value: [] -> None, [x] -> x
    image: bool = False  # bytes given to datasets.Image as {"bytes": ..., "path": None}


# -- specs and features --------------------------------------------------------------------------


def _value(dtype: Any) -> Any:
    value_type = as_value_type(dtype)
    name = value_type if isinstance(value_type, str) else value_type.name
    return _datasets().Value(_HF_VALUE.get(name, name))


def _list(feature: Any, length: int = -1) -> Any:
    return _datasets().List(feature, length=length)


def _column_of_spec(name: str, spec: Any) -> _Column:
    if isinstance(spec, Image):
        return _Column(FixedLen((), "bytes"), _datasets().Image(), image=True)
    if isinstance(spec, VarLen):
        return _Column(spec, _list(_value(spec.dtype)))
    if isinstance(spec, FixedLen):
        feature = _value(spec.dtype)
        for size in reversed(spec.shape):
            feature = _list(feature, size)
        return _Column(spec, feature)
    raise UnsupportedOperationError(
        f"feature {name!r}: recordkit.hf reads FixedLen, VarLen and Image specs, not {type(spec).__name__}"
    )


def _column_of_feature(name: str, feature: Any) -> _Column:
    """The column of a HuggingFace feature (as :func:`write` stored it)."""
    hf = _datasets()
    if isinstance(feature, hf.Image):
        return _Column(VarLen("bytes"), feature, scalar_or_none=True, image=True)
    if isinstance(feature, hf.ClassLabel):
        return _Column(VarLen("int64"), feature, scalar_or_none=True)
    if isinstance(feature, hf.Value):
        return _Column(VarLen(_value_type(name, feature)), feature, scalar_or_none=True)
    if (
        isinstance(feature, hf.List)
        and isinstance(feature.feature, (hf.Value, hf.ClassLabel))
        and feature.length in (-1, None)
    ):
        inner = feature.feature
        dtype = "int64" if isinstance(inner, hf.ClassLabel) else _value_type(name, inner)
        return _Column(VarLen(dtype), feature)
    if isinstance(feature, hf.List) and isinstance(feature.feature, hf.Value):
        return _Column(FixedLen((feature.length,), _value_type(name, feature.feature)), feature)
    raise UnsupportedOperationError(
        f"feature {name!r}: {feature!r} has no tf.train.Example equivalent (recordkit.hf writes and reads "
        "values, lists of values, class labels and images)"
    )


def _value_type(name: str, value: Any) -> str:
    dtype = str(value.dtype)
    if dtype in ("string", "large_string"):
        return "str"
    if dtype in ("binary", "large_binary"):
        return "bytes"
    if dtype == "bool" or dtype.startswith(("int", "uint")):
        return "int64"
    if dtype.startswith("float"):
        return "float32"
    raise UnsupportedOperationError(
        f"feature {name!r}: the value type {dtype} has no Example equivalent"
    )


def _columns_of_schema(schema: Schema, first: Mapping[str, Any]) -> dict[str, _Column]:
    """Columns from a schema: each feature's :func:`~recordkit.decode.schema.infer_spec`, a scalar read as one
    optional value, and a single bytes value that holds an encoded image (``first``: the first record's
    values) an image. A feature never seen with a value, or with several list types, has no one type: left out."""
    typed = {
        name: stats for name, stats in sorted(schema.features.items()) if len(stats.kinds) == 1
    }
    columns = {}
    for name, spec in infer_spec(dataclasses.replace(schema, features=typed)).items():
        sample = first.get(name)
        if (
            typed[name].kinds == {"bytes_list"}
            and typed[name].max_len == 1
            and isinstance(sample, bytes)
            and sample.startswith(IMAGE_SIGNATURES)
        ):
            columns[name] = _Column(
                VarLen("bytes"), _datasets().Image(), scalar_or_none=True, image=True
            )
        elif isinstance(spec, FixedLen) and not spec.shape:
            columns[name] = _Column(VarLen(spec.dtype), _value(spec.dtype), scalar_or_none=True)
        else:
            columns[name] = _column_of_spec(name, spec)
    return columns


def _listed_schema(listed: list[Mapping[str, Any]]) -> Schema:
    """The schema of a manifest's features (as ``recordkit info --json`` lists them). It does not say how many
    records were sampled: ``records`` is 0, so each feature is taken as present in all."""
    features = {}
    for item in listed:
        if item.get("kind") in LIST_DTYPES:
            lengths = item.get("min_len", 0), item.get("max_len", 0)
            features[item["name"]] = FeatureStats({item["kind"]}, 0, *lengths)
    return Schema(features)


def _first(records: list[bytes], kind: str) -> dict[str, Any]:
    """The values of the first of ``records`` that decodes as ``kind``, a single bytes value as such."""
    for record in records:
        with contextlib.suppress(DecodeError):
            return {name: _one_bytes(value) for name, value in decode_payload(kind, record).items()}
    return {}


def _stored(resolved: ResolvedSources) -> Mapping[str, Any] | None:
    """What :func:`write` stored in the dataset's manifest: the features, and ``payload`` for raw records."""
    manifest = resolved.manifest
    stored = None if manifest is None else manifest.metadata.get(METADATA_KEY)
    if isinstance(stored, Mapping) and isinstance(stored.get("features"), Mapping):
        return stored
    return None


def _listed(resolved: ResolvedSources) -> list[Mapping[str, Any]] | None:
    """The features of the manifest's schema (as ``recordkit info --json`` lists them), if it has any."""
    schema = None if resolved.manifest is None else resolved.manifest.schema
    listed = schema.get("features") if isinstance(schema, Mapping) else None
    if isinstance(listed, list) and all(
        isinstance(item, Mapping) and "name" in item for item in listed
    ):
        return listed
    return None


def _payload_kind(
    resolved: ResolvedSources,
    spec: Mapping[str, Any] | None,
    payload: str | None,
    fmt: str,
    head: list[bytes],
) -> tuple[str, bool]:
    """The payload kind the records are read as, and whether it was detected from ``head``."""
    if payload is not None:
        if payload not in _PAYLOADS:
            raise ValueError(
                f"payload={payload!r}: expected None (detect it) or one of {_PAYLOADS}"
            )
        if spec is not None and payload == RAW_PAYLOAD:
            raise ValueError(
                "payload='raw' reads each record as bytes and a spec parses Examples or OFRecords: "
                "pass one or the other"
            )
        return payload, False
    own = get_format(fmt).payload or EXAMPLE_PAYLOAD
    if spec is not None:
        return own, False
    stored = _stored(resolved)
    if stored is not None:
        return (RAW_PAYLOAD if stored.get("payload") == RAW_PAYLOAD else own), False
    if _listed(resolved) is not None:
        return own, False
    detected = detect_payload(head, prefer=own)
    if detected is None:
        raise DecodeError(
            f"{resolved.source or 'the sources'} hold no records and no schema to take features from: "
            "pass features= (or payload='raw')"
        )
    # A SequenceExample is read as an Example: its context features (its feature lists are left out).
    return (detected if detected in _PAYLOADS else EXAMPLE_PAYLOAD), True


def _columns(
    resolved: ResolvedSources, spec: Mapping[str, Any] | None, kind: str, head: list[bytes]
) -> dict[str, _Column]:
    if spec is not None:
        return {name: _column_of_spec(name, one) for name, one in spec.items()}
    stored = _stored(resolved)
    features = None if stored is None else _datasets().Features.from_dict(dict(stored["features"]))
    if kind == RAW_PAYLOAD:
        kept = features if stored is not None and stored.get("payload") == RAW_PAYLOAD else None
        if kept is not None and len(kept) == 1:  # the column write(payload="raw") wrote
            ((name, feature),) = kept.items()
            return {name: _Column(None, feature)}
        return {RAW_COLUMN: _Column(None, _datasets().Value("binary"))}
    if features is not None:
        return {name: _column_of_feature(name, feature) for name, feature in features.items()}
    listed = _listed(resolved)
    if listed is not None:
        return _columns_of_schema(_listed_schema(listed), _first(head[:1], kind))
    return _columns_of_schema(Schema.of(head, kind), _first(head, kind))


def _one_bytes(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else None


@renamed_arguments(spec="features")
def features_of(features: Mapping[str, Any]) -> Any:
    """The ``datasets.Features`` :func:`to_dataset` gives records parsed with ``features``.

    ``FixedLen((), dtype)`` is a ``Value``, ``FixedLen((n, ...), dtype)`` nested ``List`` features of
    those lengths, ``VarLen(dtype)`` a ``List`` of any length and :class:`~recordkit.Image` an ``Image``;
    ``"bytes"`` values are ``binary``, ``"str"`` values ``string``.

    Raises
    ------
    UnsupportedOperationError
        A spec other than ``FixedLen``, ``VarLen`` and ``Image``.
    """
    return _datasets().Features(
        {name: _column_of_spec(name, one).feature for name, one in features.items()}
    )


# -- reading -----------------------------------------------------------------------------------------


def _rows(
    resolved: ResolvedSources, columns: dict[str, _Column], kind: str, detected: bool
) -> Iterator[dict[str, Any]]:
    """The records of ``resolved``, in :func:`recordkit.open`'s order, as HuggingFace rows."""
    with resolved.open() as reader:
        records = iter(reader)
        if kind == RAW_PAYLOAD:
            (name,) = columns
            yield from ({name: bytes(record)} for record in records)
            return
        parse = parse_ofrecords if kind == OFRECORD_PAYLOAD else parse_examples
        specs = {name: column.spec for name, column in columns.items()}
        start = 0
        while batch := list(itertools.islice(records, _BATCH)):
            try:
                parsed = parse(batch, specs)
            except DecodeError as exc:
                raise _in_sources(exc, start, kind if detected else None) from None
            values = {name: _to_list(parsed[name]) for name in columns}
            for i in range(len(batch)):
                yield {name: _hf_value(columns[name], values[name][i]) for name in columns}
            start += len(batch)


def _in_sources(exc: DecodeError, start: int, detected: str | None) -> DecodeError:
    """``exc``, raised for a batch that starts at record ``start``, with the record's index in the
    sources; and when the payload kind was ``detected`` from the first records, how to read bytes."""
    index, message = exc.index, str(exc)
    if index is not None:
        message = f"record {start + index}: " + message.removeprefix(f"record {index}: ")
        index += start
    if detected is not None:
        message += (
            f" (the first records parsed as {detected} payloads, so all are read as such; "
            "payload='raw' reads every record as bytes)"
        )
    return DecodeError(message, index=index, feature=exc.feature)


def _to_list(parsed: Any) -> list[Any]:
    if isinstance(parsed, np.ndarray):
        return parsed.tolist()  # type: ignore[no-any-return]
    return parsed.to_list()  # type: ignore[no-any-return]


def _hf_value(column: _Column, value: Any) -> Any:
    if column.scalar_or_none:
        if len(value) > 1:
            raise DecodeError(f"a record holds {len(value)} values where one was expected")
        value = value[0] if value else None
    if column.image and value is not None:
        return {"bytes": value, "path": None}
    return value


def _generate(
    resolved: ResolvedSources, columns: dict[str, _Column], kind: str, detected: bool
) -> Iterator[dict[str, Any]]:
    """The generator ``datasets`` calls (a module-level function, so that it pickles)."""
    yield from _rows(resolved, columns, kind, detected)


def _fingerprint(resolved: ResolvedSources, features: Any, kind: str) -> str:
    """What names the cached table of :func:`to_dataset`: the files (local ones with their size and
    modification time: a file written again is read again), the features, the payload kind and recordkit's
    version; a remote file cannot be told unchanged cheaply, so sources with one get a fresh fingerprint
    each time."""
    digest = hashlib.sha256(repr((features.to_dict(), _version(), resolved.format, kind)).encode())
    for file in resolved.files:
        if not isinstance(file, (str, os.PathLike)) or (
            "://" in os.fspath(file) or "::" in os.fspath(file)
        ):
            return os.urandom(16).hex()
        info = os.stat(file)
        digest.update(repr((os.path.abspath(file), info.st_size, info.st_mtime_ns)).encode())
    return digest.hexdigest()[:32]


def _version() -> str:
    """recordkit's installed version (parsing may change between versions)."""
    try:
        return importlib.metadata.version("recordkit")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return ""


@renamed_arguments(source="sources", spec="features")
def to_dataset(
    sources: Any,
    features: Mapping[str, Any] | None = None,
    *,
    streaming: bool = False,
    split: str | None = None,
    format: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    payload: str | None = None,
) -> Any:
    """A HuggingFace ``datasets.Dataset`` (``streaming=True``: ``IterableDataset``) over record files.

    Parameters
    ----------
    sources
        What :func:`recordkit.open` reads: a file, a glob, a directory, a list, an fsspec URL, a dataset
        with a manifest or a tensorflow-datasets directory, resolved the same way
        (:func:`recordkit.io.resolve_sources`). The rows are its records, in the order
        :func:`recordkit.open` reads them.
    features
        Feature name to :class:`~recordkit.FixedLen`, :class:`~recordkit.VarLen` or
        :class:`~recordkit.Image`: the columns, parsed as :func:`recordkit.parse_examples` parses them
        (OFRecord files: :func:`recordkit.parse_ofrecords`), with the features :func:`features_of` gives.
        ``None``: the features a dataset's manifest stored (:func:`write` stores the HuggingFace features,
        given back exactly), else ones derived from its schema, else from the first 100 records, whose
        payload kind is detected as ``recordkit info`` detects it
        (:func:`recordkit.decode.payloads.detect_payload`). Examples and OFRecords: a feature with one
        value in every record is a ``Value`` (``None`` where a record lacks it), one always of the same
        length a ``List`` of that length, any other a ``List``, and one bytes value holding a JPEG, PNG,
        GIF or BMP image an ``Image``. Raw records (neither): one ``binary`` column, :data:`RAW_COLUMN`,
        each record's bytes.
    streaming
        Return an ``IterableDataset`` that reads the records as it is iterated, instead of a ``Dataset``
        that reads them all first into HuggingFace's cache (an Arrow file).
    split, format
        As for :func:`recordkit.open`.
    cache_dir
        Where a ``Dataset``'s Arrow file goes (default: HuggingFace's cache, ``HF_DATASETS_CACHE``).
    payload
        ``"raw"``: read each record as bytes, into :data:`RAW_COLUMN` (no spec); ``"example"`` or
        ``"ofrecord"``: parse the records as that message, whatever their format holds; ``None``: the
        format's payload with a spec or a manifest, else the kind detected.

    Raises
    ------
    UnsupportedOperationError
        A spec other than ``FixedLen``, ``VarLen`` and ``Image``, or a stored feature without an Example
        equivalent.
    DecodeError
        A record does not parse with the spec (when the rows are read: at once for a ``Dataset``), or
        without a spec, the sources hold no records, or only Examples without features.
    ValueError
        A ``payload`` other than these, or ``"raw"`` with a spec.
    ImportError
        ``datasets`` is not installed.
    """
    hf = _datasets()
    resolved = resolve_sources(sources, format=format, split=split)
    with resolved.open() as reader:
        fmt = reader.format
        head = list(itertools.islice(reader, 1 if features is not None else _SAMPLE))
    kind, detected = _payload_kind(resolved, features, payload, fmt, head)
    columns = _columns(resolved, features, kind, head)
    if not columns:
        raise DecodeError(
            f"the first records of {resolved.source or 'the sources'} are {kind} payloads without "
            "features: pass features= (or payload='raw')"
        )
    features = hf.Features({name: column.feature for name, column in columns.items()})
    kwargs = {"resolved": resolved, "columns": columns, "kind": kind, "detected": detected}
    if streaming:
        return hf.IterableDataset.from_generator(_generate, features=features, gen_kwargs=kwargs)
    if not head:  # datasets refuses a generator that yields no rows
        return hf.Dataset.from_dict({name: [] for name in columns}, features=features)
    try:
        return hf.Dataset.from_generator(
            _generate,
            features=features,
            gen_kwargs=kwargs,
            cache_dir=None if cache_dir is None else os.fspath(cache_dir),
            fingerprint=_fingerprint(resolved, features, kind),
        )
    except Exception as exc:
        # datasets wraps what the generator raised in its DatasetGenerationError; the typed error, with
        # the path, record and offset, is what the caller can act on.
        cause = _recordkit_cause(exc)
        if cause is None:
            raise
        raise cause from None


def _recordkit_cause(error: BaseException) -> RecordKitError | None:
    """The first recordkit error in ``error``'s chain of causes, itself included."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, RecordKitError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


# -- writing -----------------------------------------------------------------------------------------


@renamed_arguments(dataset="data", out="dest", shard_size="max_records")
def write(
    data: Any,
    dest: str | os.PathLike[str],
    *,
    format: str = "tfrecord",
    max_records: int | None = None,
    split: str | None = None,
    compression: str | None = None,
    batch_size: int = 1000,
    payload: str | None = None,
    options: str | None = None,
) -> None:
    """Write a HuggingFace ``Dataset`` or ``IterableDataset`` as records in shards, with a manifest.

    Each row becomes one ``tf.train.Example`` (``format="ofrecord"``: one ``OFRecord``), a feature per
    column, as :func:`recordkit.encode_examples` encodes a table: integers, booleans and class labels
    ``int64_list``, floats ``float_list``, strings (UTF-8) and binary ``bytes_list``, lists of these lists,
    and an ``Image`` column the image file's bytes as they are (no decoding). A ``None`` value leaves the
    feature out of that record. The shards are written by :class:`~recordkit.ShardWriter` (each one
    atomically), and the manifest keeps the dataset's features (under ``metadata["huggingface"]``), so that
    :func:`to_dataset` gives the same features back.

    With ``payload="raw"``, the dataset has one ``binary`` column (:func:`to_dataset` gives raw records
    one, :data:`RAW_COLUMN`) and each of its values is written as one record, as it is, whatever the
    format; the manifest says so, and :func:`to_dataset` gives that column back.

    Parameters
    ----------
    data
        A ``datasets.Dataset`` or ``datasets.IterableDataset``.
    dest
        A directory (the shards are ``part-00000.tfrecord``, ... there, or ``SPLIT-00000...`` with
        ``split``) or a :class:`~recordkit.ShardWriter` pattern with ``{shard}``.
    format, compression
        Of the shards: ``"tfrecord"`` (default), ``"ffrecord"`` or ``"ofrecord"``.
    max_records
        Records per shard, at most (``None``: one shard).
    split
        The split the shards are, in the manifest.
    batch_size
        Rows encoded at once.
    payload
        ``None``: Examples (OFRecords in an OFRecord file); ``"raw"``: the bytes of the one column.
    options
        The format's writer option string (ArrayRecord's ``"group_size:1,zstd:3"``), as for
        :func:`recordkit.open` in mode ``"w"``.

    Raises
    ------
    UnsupportedOperationError
        A column whose type has no Example equivalent (nested lists, structs other than an image); with
        ``payload="raw"``, a dataset that is not one ``binary`` column, or a ``None`` in it.
    ValueError
        A ``payload`` other than ``None`` and ``"raw"``.
    """
    hf = _datasets()
    features = data.features
    if features is None:
        raise UnsupportedOperationError(
            "the dataset's features are unknown (an IterableDataset without features): "
            "cast it with .cast(features) first"
        )
    if payload not in (None, RAW_PAYLOAD):
        raise ValueError(f"payload={payload!r}: expected None (Examples) or 'raw'")
    # Refuse what cannot be read back, before writing anything.
    if payload == RAW_PAYLOAD:
        _check_raw(features)
    else:
        for name, feature in features.items():
            _column_of_feature(name, feature)
    images = [name for name, feature in features.items() if isinstance(feature, hf.Image)]
    for name in images:
        data = data.cast_column(name, hf.Image(decode=False))
    fmt = get_format(format)
    name = fmt.name
    pattern = os.fspath(dest)
    if "{shard" not in pattern:
        suffix = fmt.extensions[0] if fmt.extensions else "." + name
        pattern = os.path.join(pattern, f"{split or 'part'}-{{shard:05d}}{suffix}")
    encode = encode_ofrecords if fmt.payload == OFRECORD_PAYLOAD else encode_examples
    stored: dict[str, Any] = {"features": features.to_dict()}
    if payload is not None:
        stored["payload"] = payload
    with ShardWriter(
        pattern,
        format=name,
        compression=compression,
        options=options,
        max_records=max_records,
        split=split,
        metadata={METADATA_KEY: stored},
    ) as writer:
        for table in data.with_format("arrow").iter(batch_size=batch_size):
            if payload == RAW_PAYLOAD:
                writer.write_many(_raw_records(table, writer.count))
            else:
                writer.write_many(encode(_plain_columns(table, images)))


def _check_raw(features: Any) -> None:
    """Refuse ``features`` for raw records unless they are one ``binary`` column."""
    hf = _datasets()
    values = list(features.values())
    if len(values) != 1 or not (
        isinstance(values[0], hf.Value) and values[0].dtype in ("binary", "large_binary")
    ):
        raise UnsupportedOperationError(
            f"payload='raw' writes a dataset of one binary column, not {features!r}"
        )


def _raw_records(table: Any, written: int) -> list[bytes]:
    """The values of ``table``'s one column (the dataset's rows from ``written`` on), each one record."""
    values: list[bytes | None] = table.column(0).to_pylist()
    if None in values:
        raise UnsupportedOperationError(
            f"row {written + values.index(None)} is None: a raw record cannot be missing"
        )
    return values  # type: ignore[return-value]


def _plain_columns(table: Any, images: list[str]) -> Any:
    """``table`` with each image column (``{"bytes", "path"}`` structs) replaced by the images' bytes."""
    for name in images:
        column = table.column(name).combine_chunks()
        data = column.field("bytes").to_pylist()
        paths = column.field("path").to_pylist()
        for i, (value, path) in enumerate(zip(data, paths, strict=True)):
            if value is None and path is not None:
                with open(path, "rb") as file:
                    data[i] = file.read()
        with needs("recordkit.hf", "pyarrow", "hf", "pyarrow"):
            import pyarrow as pa

        table = table.set_column(
            table.schema.get_field_index(name), name, pa.array(data, pa.binary())
        )
    return table
