"""Datasets of many shards: the sharded writer, the manifest, and checking shards against it.

* :class:`ShardWriter` (also ``recordkit.ShardWriter``) writes numbered shards and a manifest.
* :func:`write_shard` writes one shard atomically and returns its :class:`Shard` entry: the unit parallel
  writers (Ray, Dask, your own) are built from; :func:`merge_manifests` then joins their entries.
* :func:`plan_reads` / :func:`read_range` and :func:`task_shard_path` / :func:`commit_manifest` are what
  the Ray and Dask integrations run in their tasks.
* :func:`build_manifest` describes shards written by anything else, :func:`verify_dataset` checks shards
  against their manifest.
* :class:`Manifest`, :func:`load_manifest`: the manifest file (``docs/formats/manifest.md``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recordkit.formats.manifest import (
        MANIFEST_NAME,
        IndexFile,
        Manifest,
        Shard,
        load_manifest,
        merge_manifests,
    )
    from recordkit.shards.build import build_manifest, verify_dataset
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

_LAZY = {
    **dict.fromkeys(
        ["MANIFEST_NAME", "IndexFile", "Manifest", "Shard", "load_manifest", "merge_manifests"],
        "recordkit.formats.manifest",
    ),
    **dict.fromkeys(["build_manifest", "verify_dataset"], "recordkit.shards.build"),
    **dict.fromkeys(["OpenShard", "write_shard"], "recordkit.shards.shardfile"),
    "ShardWriter": "recordkit.shards.writer",
    **dict.fromkeys(
        [
            "ReadRange",
            "commit_manifest",
            "plan_reads",
            "prepare_output",
            "read_range",
            "task_shard_path",
        ],
        "recordkit.shards.tasks",
    ),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """Import the module behind a public name on first access (PEP 562)."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'recordkit.shards' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the public names, including the ones not loaded yet."""
    return sorted(set(globals()) | set(__all__))
