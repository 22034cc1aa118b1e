"""Writing tensorflow-datasets (TFDS) metadata for shards recordkit wrote, without TensorFlow or tfds.

:func:`write_tfds_info` writes ``dataset_info.json`` (and optionally ``features.json``) beside uncompressed
TFRecord shards named as TFDS names them, so that ``tfds.builder_from_directory`` loads them. Reading a
TFDS directory (its file names, templates and the order TFDS reads a split in) is
:mod:`recordkit.io.tfds`, below the reader; ``docs/formats/tfds.md`` documents both.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from recordkit.errors import ManifestError
from recordkit.formats import get_format
from recordkit.io.atomic import write_atomically
from recordkit.io.manifest import Manifest, Shard
from recordkit.io.tfds import DEFAULT_TEMPLATE, INFO_NAME, SHARD_DIGITS, shard_size
from recordkit.support.moved import moved_attribute

__all__ = ["FEATURES_NAME", "write_tfds_info"]

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


def __getattr__(name: str) -> Any:
    """A name reading needs, moved to :mod:`recordkit.io`, with a warning naming its new home (PEP 562)."""
    return moved_attribute(__name__, name)
