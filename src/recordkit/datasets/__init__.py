"""Datasets of many shards: the sharded writer, the manifest, and checking shards against it.

* :class:`ShardWriter` (also ``recordkit.ShardWriter``) writes numbered shards and a manifest.
* :func:`write_shard` writes one shard atomically and returns its :class:`Shard` entry: the unit parallel
  writers (Ray, Dask, your own) are built from; :func:`merge_manifests` then joins their entries.
* :func:`plan_reads` / :func:`read_range` and :func:`task_shard_path` / :func:`commit_manifest` are what
  the Ray and Dask integrations run in their tasks.
* :func:`reshard` writes the records of any source again as a dataset of M shards, in order or shuffled.
* :func:`build_manifest` describes shards written by anything else, :func:`verify_dataset` checks shards
  against their manifest (or a tensorflow-datasets ``dataset_info.json``), :func:`repair_dataset` repairs
  the damaged ones in place.
* :class:`Manifest`, :func:`load_manifest`: the manifest file (``docs/formats/manifest.md``), defined in
  :mod:`recordkit.io.manifest` (the reader opens datasets with it) and imported from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recordkit.support.lazy import lazy_names

if TYPE_CHECKING:
    from recordkit.datasets.build import (
        ShardCheck,
        ShardRepair,
        build_manifest,
        load_dataset,
        repair_dataset,
        verify_dataset,
    )
    from recordkit.datasets.manifest import merge_manifests
    from recordkit.datasets.ranges import ReadRange, plan_reads, read_range
    from recordkit.datasets.resharding import reshard
    from recordkit.datasets.shardfile import OpenShard, write_shard
    from recordkit.datasets.tasks import commit_manifest, prepare_output, task_shard_path
    from recordkit.datasets.writer import ShardWriter
    from recordkit.io.manifest import (
        MANIFEST_NAME,
        Fingerprint,
        IndexFile,
        Manifest,
        Shard,
        load_manifest,
    )

# Public name -> the module that defines it (recordkit.datasets, whose __all__ lists them, is their home),
# imported on first use, so that importing the package loads neither the writer nor the planner. The
# manifest classes are defined below the reader, in recordkit.io.manifest (the reader opens datasets with
# them), and are re-exported here, where users import them.
_DEFINED_IN = {
    name: module if "." in module else f"recordkit.datasets.{module}"
    for module, names in {
        "build": "ShardCheck ShardRepair build_manifest load_dataset repair_dataset verify_dataset",
        "manifest": "merge_manifests",
        "recordkit.io.manifest": "Fingerprint IndexFile MANIFEST_NAME Manifest Shard load_manifest",
        "ranges": "ReadRange plan_reads read_range",
        "resharding": "reshard",
        "shardfile": "OpenShard write_shard",
        "tasks": "commit_manifest prepare_output task_shard_path",
        "writer": "ShardWriter",
    }.items()
    for name in names.split()
}

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
    "reshard",
    "task_shard_path",
    "verify_dataset",
    "write_shard",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _DEFINED_IN)
