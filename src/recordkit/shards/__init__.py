"""Datasets of many shards: the sharded writer, the manifest, and checking shards against it.

* :class:`ShardWriter` (also ``recordkit.ShardWriter``) writes numbered shards and a manifest.
* :func:`write_shard` writes one shard atomically and returns its :class:`Shard` entry: the unit parallel
  writers (Ray, Dask, your own) are built from; :func:`merge_manifests` then joins their entries.
* :func:`plan_reads` / :func:`read_range` and :func:`task_shard_path` / :func:`commit_manifest` are what
  the Ray and Dask integrations run in their tasks.
* :func:`build_manifest` describes shards written by anything else, :func:`verify_dataset` checks shards
  against their manifest (or a tensorflow-datasets ``dataset_info.json``), :func:`repair_dataset` repairs
  the damaged ones in place.
* :class:`Manifest`, :func:`load_manifest`: the manifest file (``docs/formats/manifest.md``).
"""

from __future__ import annotations

from recordkit.formats.manifest import (
    MANIFEST_NAME,
    Fingerprint,
    IndexFile,
    Manifest,
    Shard,
    load_manifest,
    merge_manifests,
)
from recordkit.shards.build import (
    ShardCheck,
    ShardRepair,
    build_manifest,
    load_dataset,
    repair_dataset,
    verify_dataset,
)
from recordkit.shards.shardfile import OpenShard, write_shard
from recordkit.shards.tasks import (
    ReadRange,
    commit_manifest,
    plan_reads,
    prepare_output,
    read_range,
    task_shard_path,
)
from recordkit.shards.writer import ShardWriter

__all__ = [
    "Fingerprint",
    "IndexFile",
    "MANIFEST_NAME",
    "Manifest",
    "OpenShard",
    "ReadRange",
    "Shard",
    "ShardCheck",
    "ShardRepair",
    "ShardWriter",
    "build_manifest",
    "commit_manifest",
    "load_dataset",
    "load_manifest",
    "merge_manifests",
    "plan_reads",
    "prepare_output",
    "read_range",
    "repair_dataset",
    "task_shard_path",
    "verify_dataset",
    "write_shard",
]
