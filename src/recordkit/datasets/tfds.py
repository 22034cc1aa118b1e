"""Writing tensorflow-datasets (TFDS) directories, without TensorFlow or tfds.

:func:`write_tfds_info` writes ``dataset_info.json`` (and optionally ``features.json``) beside uncompressed
TFRecord shards named as TFDS names them, so that ``tfds.builder_from_directory`` loads them.
:func:`convert_tfds` converts a TFDS directory to another file format, shard for shard, as tfds's
``convert_format`` does (``recordkit convert TFDS_DIR OUT --to FORMAT`` runs it). Reading a
TFDS directory (its file names, templates and the order TFDS reads a split in) is
:mod:`recordkit.io.tfds`, below the reader; ``docs/formats/tfds.md`` documents both.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from typing import Any

from recordkit.datasets.shardfile import write_shard
from recordkit.errors import ManifestError, OutputExistsError, UnsupportedOperationError
from recordkit.formats import get_format
from recordkit.io import open as open_records
from recordkit.io.atomic import temporary_name, write_atomically
from recordkit.io.manifest import MANIFEST_NAME, Manifest, Shard
from recordkit.io.tfds import (
    DEFAULT_TEMPLATE,
    FILE_FORMATS,
    INFO_NAME,
    SHARD_DIGITS,
    list_shards,
    shard_size,
)
from recordkit.io.tfds import manifest_from_tfds as _manifest_from_tfds  # the old name here warns
from recordkit.io.writer import check_writer
from recordkit.support.moved import moved_attribute

__all__ = ["FEATURES_NAME", "convert_tfds", "write_tfds_info"]

FEATURES_NAME = "features.json"
"""The file describing the features (how TFDS decodes each record)."""

# The one file format written (TFDS's name for it and recordkit's are the same).
_FILE_FORMAT = "tfrecord"
# TFDS's own rule: a dataset name is an identifier.
_NAME = re.compile(r"[A-Za-z]\w*")
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_TENSOR_CLASS = "tensorflow_datasets.core.features.tensor_feature.Tensor"
_DICT_CLASS = "tensorflow_datasets.core.features.features_dict.FeaturesDict"
# The dtypes a tf.train.Example can carry (integers and bool as int64, floats as float32, bytes).
_DTYPES = frozenset(
    {"bool", "string", "float16", "float32", "float64", "int8", "int16", "int32", "int64"}
    | {"uint8", "uint16", "uint32"}
)


def write_tfds_info(
    directory: str | os.PathLike[str],
    manifest: Manifest,
    *,
    name: str,
    version: str = "1.0.0",
    description: str = "",
    features: Mapping[str, tuple[Any, Sequence[int | None]]] | None = None,
) -> str:
    """Write the metadata that makes a directory of TFRecord shards loadable by TFDS.

    ``tfds.builder_from_directory(directory)`` then loads the dataset, and
    ``builder.as_dataset(split=...)`` opens each split's shards in index order. TFDS needs both
    ``dataset_info.json`` (the splits and their shards) and a description of the features: pass
    ``features``, or write ``features.json`` yourself (for example with tfds's
    ``FeaturesDict.save_config`` for images or class labels); without either, TFDS refuses the directory.

    Parameters
    ----------
    directory
        The directory of the shards; the manifest's shard paths are relative to it.
    manifest
        Uncompressed TFRecord shards named as TFDS names them:
        ``{name}-{split}.tfrecord-{index:05d}-of-{count:05d}`` (more digits from 100000 shards on), every
        index from 0 to ``count - 1`` present, directly in ``directory``. The split is the shard's
        ``split``, or the one in its file name; the two must agree. ``ShardWriter`` with the pattern
        ``f"{directory}/{name}-train.tfrecord-{{shard:05d}}-of-{{num_shards:05d}}"`` and ``split="train"``
        writes such shards.
    name
        The dataset name: a letter, then letters, digits and ``_``.
    version
        ``"major.minor.patch"``.
    description
        Free text TFDS shows.
    features
        ``{feature name: (dtype, shape)}`` for records that are ``tf.train.Example`` messages: each dtype
        is one of ``bool``, ``int8``, ``int16``, ``int32``, ``int64``, ``uint8``, ``uint16``, ``uint32``,
        ``float16``, ``float32``, ``float64``, ``string`` (or an object whose ``name`` is one, such as a
        numpy or TensorFlow dtype), and each shape a sequence of sizes with at most one ``None`` (any
        length). Written as ``features.json`` (a TFDS ``FeaturesDict`` of ``Tensor`` features). ``None``
        leaves an existing ``features.json`` as it is.

    Returns
    -------
    str
        The path of ``dataset_info.json``.

    Raises
    ------
    ManifestError
        The manifest is not uncompressed TFRecord, a shard name does not follow the template, or a shard
        file is missing or not the size the manifest says.
    ValueError, TypeError
        ``name``, ``version`` or ``features`` is malformed.
    """
    directory = os.fspath(directory)
    _check_identity(name, version)
    features_json = None if features is None else _features_json(features)
    if manifest.format != _FILE_FORMAT or manifest.compression:
        kind = f"{manifest.format} ({manifest.compression or 'uncompressed'})"
        raise ManifestError(f"TFDS reads uncompressed tfrecord shards, not {kind}", path=directory)
    splits = _tfds_splits(directory, manifest, name)
    info = {
        "description": description,
        "fileFormat": _FILE_FORMAT,
        "name": name,
        "splits": [_split_json(split, shards) for split, shards in splits.items()],
        "version": version,
    }
    if features_json is not None:
        _write_json(os.path.join(directory, FEATURES_NAME), features_json, indent=4)
    return _write_json(os.path.join(directory, INFO_NAME), info, indent=2)


def _check_identity(name: Any, version: Any) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"a TFDS dataset name is a letter, then letters, digits or _; not {name!r}"
        )
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ValueError(f"a TFDS version is 'major.minor.patch', not {version!r}")


def _shard_name(name: str, split: str, index: int, total: int) -> str:
    digits = max(SHARD_DIGITS, len(str(total)))
    return f"{name}-{split}.{_FILE_FORMAT}-{index:0{digits}d}-of-{total:0{digits}d}"


def _tfds_splits(directory: str, manifest: Manifest, name: str) -> dict[str, list[Shard]]:
    """Group the shards by split, in index order, checking their names against TFDS's template."""
    pattern = re.compile(
        rf"{re.escape(name)}-(?P<split>[\w-]+)\.{_FILE_FORMAT}-(?P<index>[0-9]{{5,}})-of-[0-9]{{5,}}"
    )
    indexed: dict[str, dict[int, Shard]] = {}
    for number, shard in enumerate(manifest.shards):
        match = pattern.fullmatch(shard.path)
        if match is None or (shard.split is not None and shard.split != match["split"]):
            expected = _shard_name(name, shard.split or "SPLIT", 0, 1)
            raise ManifestError(
                f"the shard {shard.path!r} is not named as TFDS names the shards of {name!r} "
                f"(like {expected!r})",
                path=directory,
                shard=number,
            )
        if not any(char.isalnum() for char in match["split"]):
            raise ManifestError(f"{match['split']!r} is not a TFDS split name", path=directory)
        indexed.setdefault(match["split"], {})[int(match["index"])] = shard
    splits = {}
    for split, by_index in indexed.items():
        ordered = [by_index[i] for i in sorted(by_index)]
        for i, shard in enumerate(ordered):
            expected = _shard_name(name, split, i, len(ordered))
            if shard.path != expected:
                raise ManifestError(
                    f"the split {split!r} has {len(ordered)} shards, so its shard {i} must be "
                    f"{expected!r}, not {shard.path!r}",
                    path=directory,
                )
            size = shard_size(directory, shard.path, "the manifest")
            path = os.path.join(directory, shard.path)
            if size != shard.size:
                raise ManifestError(f"{size} bytes, but the manifest says {shard.size}", path=path)
            if size < get_format(_FILE_FORMAT).overhead * shard.records:
                raise ManifestError(f"{size} bytes cannot hold {shard.records} records", path=path)
        splits[split] = ordered
    return splits


def _split_json(split: str, shards: Sequence[Shard]) -> dict[str, Any]:
    overhead = get_format(_FILE_FORMAT).overhead  # the bytes TFRecord frames each payload with
    payload = sum(shard.size - overhead * shard.records for shard in shards)
    return {
        "filepathTemplate": DEFAULT_TEMPLATE,
        "name": split,
        "numBytes": str(payload),
        "shardLengths": [str(shard.records) for shard in shards],
    }


def _features_json(features: Any) -> dict[str, Any]:
    """Return TFDS's ``features.json`` for a ``FeaturesDict`` of ``Tensor`` features."""
    if not isinstance(features, Mapping) or not features:
        raise TypeError("features must be a non-empty mapping of name -> (dtype, shape)")
    tensors = {}
    for key, spec in features.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"a feature name must be a non-empty string, not {key!r}")
        if not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise TypeError(f"feature {key!r}: expected (dtype, shape), not {spec!r}")
        dtype = spec[0] if isinstance(spec[0], str) else getattr(spec[0], "name", None)
        if dtype not in _DTYPES:
            raise ValueError(
                f"feature {key!r}: dtype {spec[0]!r} is not one of {', '.join(sorted(_DTYPES))}"
            )
        tensor = {"dtype": str(dtype), "encoding": "none", "shape": _shape_json(key, spec[1])}
        tensors[key] = {"pythonClassName": _TENSOR_CLASS, "tensor": tensor}
    return {"featuresDict": {"features": tensors}, "pythonClassName": _DICT_CLASS}


def _shape_json(key: str, shape: Any) -> dict[str, Any]:
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"feature {key!r}: the shape must be a tuple, not {shape!r}")
    for size in shape:
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise ValueError(f"feature {key!r}: bad size {size!r} in the shape {tuple(shape)}")
    if list(shape).count(None) > 1:
        raise ValueError(
            f"feature {key!r}: TFDS allows one unknown size (None), not {tuple(shape)}"
        )
    if not shape:
        return {}
    return {"dimensions": ["-1" if size is None else str(size) for size in shape]}


def _write_json(path: str, document: Mapping[str, Any], *, indent: int) -> str:
    text = json.dumps(document, indent=indent, sort_keys=True, ensure_ascii=False)
    write_atomically(path, text.encode("utf-8"))
    return path


# recordkit's format name -> TFDS's (``fileFormat``, ``{FILEFORMAT}`` in the shard names).
_TFDS_NAMES = {ours: theirs for theirs, ours in FILE_FORMATS.items()}


def convert_tfds(
    sources: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    format: str,
    options: str | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Convert a TFDS dataset directory to another file format, as tfds's ``convert_format`` does.

    Each shard of each split becomes one shard of ``format`` holding the same records in the same order,
    named as TFDS names the shards of that format (``{FILEFORMAT}`` of the split's ``filepathTemplate``), so
    the shard lengths, and the order TFDS reads a split in, stay valid. ``dataset_info.json`` is changed as
    ``convert_format`` changes it: ``fileFormat`` becomes the new format, and ``dataSourceAccesses`` gains
    an entry naming the dataset read (its name, config, version and data directory) and when; the splits,
    ``numBytes`` (payload bytes) and every other field are kept. The directory's other files
    (``features.json``, label names...) are copied, except a recordkit manifest of the old shards.
    ``tfds.builder_from_directory(dest)`` then loads the dataset.

    The dataset is written into a hidden directory beside ``dest`` and renamed to ``dest`` once complete,
    so an interrupted conversion leaves no dataset there.

    Parameters
    ----------
    sources
        A TFDS dataset directory (holding ``dataset_info.json``) stored as tfrecord or array_record.
    dest
        The new dataset directory: absent or empty, unless ``overwrite``.
    format
        ``"tfrecord"`` or ``"arrayrecord"`` (TFDS's name ``"array_record"`` is accepted too); TFDS reads
        its tfrecord shards uncompressed, so none is compressed.
    options
        The format's writer option string, as for :func:`recordkit.open` in mode ``"w"``: ArrayRecord's
        (``"group_size:1,zstd:3"``, what TFDS writes, is its default).
    overwrite
        Write into a ``dest`` that holds files: its ``dataset_info.json`` is removed first and written
        last, the files of the new dataset replace those of the same names, others stay.

    Returns
    -------
    Manifest
        The new directory, as :func:`~recordkit.io.tfds.manifest_from_tfds` describes it.

    Raises
    ------
    OptionsError
        ``options`` that do not parse, or for tfrecord, which takes none.
    OutputExistsError
        ``dest`` is a file, the source directory, or a directory that is not empty (without ``overwrite``).
    UnsupportedOperationError
        TFDS does not read ``format``, or recordkit does not write it.
    ManifestError
        ``dataset_info.json`` is malformed, a shard is missing, or a shard does not hold the records its
        ``shardLengths`` says.
    """
    source, dest = os.path.abspath(sources), os.path.abspath(dest)
    fmt = get_format(FILE_FORMATS.get(format, format)).name
    if fmt not in _TFDS_NAMES:
        raise UnsupportedOperationError(
            f"TFDS reads tfrecord and array_record shards; a TFDS dataset cannot be {fmt} files"
        )
    check_writer(fmt, options=options)
    manifest = _manifest_from_tfds(source)
    document, listed = list_shards(source, file_format=_TFDS_NAMES[fmt])
    if dest == source or os.path.isfile(dest):
        what = "the dataset converted: write to another directory" if dest == source else "a file"
        raise OutputExistsError(f"is {what}", path=dest)
    if os.path.isdir(dest) and os.listdir(dest) and not overwrite:
        raise OutputExistsError("is not empty; pass overwrite=True to write into it", path=dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    temporary = temporary_name(dest)
    os.mkdir(temporary)
    try:
        pairs = zip(manifest.shards, listed.items(), strict=True)
        for shard, (relative, (records, split)) in pairs:
            target = os.path.join(temporary, *relative.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            path = os.path.join(source, *shard.path.split("/"))
            with open_records(path, format=manifest.format) as reader:
                written = write_shard(
                    reader, target, format=fmt, options=options, index=False, split=split
                )
            if written.records != records:
                message = f"{written.records} records, but {INFO_NAME} says {records}"
                raise ManifestError(message, path=path)
        skip = {shard.path for shard in manifest.shards} | {INFO_NAME, MANIFEST_NAME}
        skip |= set(os.listdir(temporary))  # another format's shards, under the names written
        for entry in os.scandir(source):
            if entry.is_file() and entry.name not in skip and not entry.name.startswith("."):
                shutil.copyfile(entry.path, os.path.join(temporary, entry.name))
        document["fileFormat"] = _TFDS_NAMES[fmt]
        accesses = document.get("dataSourceAccesses") or []
        document["dataSourceAccesses"] = [*accesses, _access(source, document)]
        _write_json(os.path.join(temporary, INFO_NAME), document, indent=2)
        _commit(temporary, dest)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return _manifest_from_tfds(dest)


def _access(source: str, info: Mapping[str, Any]) -> dict[str, Any]:
    """The ``dataSourceAccesses`` entry tfds's ``convert_format`` adds: which dataset was read, and when.

    Its ``dataDir`` is the directory above ``name/[config/]version``, or the dataset's own directory when
    it is not laid out so.
    """
    name, config, version = (info.get(key) or "" for key in ("name", "configName", "version"))
    relative = os.sep.join(part for part in (name, config, version) if part)
    data_dir = source[: -len(relative) - 1] if source.endswith(os.sep + relative) else source
    reference = {"name": name, "config": config, "version": version, "dataDir": data_dir}
    return {
        "accessTimestampMs": str(time.time_ns() // 1_000_000),
        "tfdsDataset": {key: value for key, value in reference.items() if value},
        "url": {},
    }


def _commit(temporary: str, dest: str) -> None:
    """Move the dataset written in ``temporary`` to ``dest``: a rename, or file by file into a directory
    that holds files, its ``dataset_info.json`` removed first and written last."""
    if not os.path.isdir(dest) or not os.listdir(dest):
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(dest)
        os.rename(temporary, dest)
        return
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(dest, INFO_NAME))
    info = os.path.join(temporary, INFO_NAME)
    for root, _, files in os.walk(temporary):
        for path in [
            os.path.join(root, name) for name in files if os.path.join(root, name) != info
        ]:
            target = os.path.join(dest, os.path.relpath(path, temporary))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(path, target)
    os.replace(info, os.path.join(dest, INFO_NAME))


def __getattr__(name: str) -> Any:
    """A name reading needs, moved to :mod:`recordkit.io`, with a warning naming its new home (PEP 562)."""
    return moved_attribute(__name__, name)
