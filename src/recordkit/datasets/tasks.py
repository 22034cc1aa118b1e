"""Writing one shard per task and the manifest once at the end: what distributed engines run.

The Ray and Dask integrations are thin adapters over this module and :mod:`recordkit.datasets.ranges` (which
cuts sources into read ranges), and a home-grown scheduler can use them the same way:

* :func:`prepare_output` readies the output directory before the write tasks start;
  :func:`task_shard_path` names the shard of write task ``i``; :func:`write_shard` writes it atomically (so a
  retried task replaces it) and returns its entry; :func:`commit_manifest` writes the manifest once, at the
  end, from the entries of the tasks that succeeded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any

from recordkit.datasets.shardfile import (
    _join,
    _remove_file,
    begin_replacing,
    commit_manifest_file,
)
from recordkit.errors import ManifestError
from recordkit.formats import get_format
from recordkit.io.atomic import remove_leftovers
from recordkit.io.index import default_index_path
from recordkit.io.manifest import MANIFEST_NAME, Manifest, Shard
from recordkit.io.sources import is_url, require_fsspec
from recordkit.support.moved import moved_attribute


def task_shard_path(
    directory: str | os.PathLike[str],
    task: int,
    *,
    format: str,
    compression: str = "",
    prefix: str = "part",
) -> str:
    """Return the shard path of write task ``task``: ``directory/prefix-00042.<suffix>``.

    The name depends only on the task number, so a retried task writes the same file again (atomically)
    and the manifest names it once.
    """
    if task < 0:
        raise ValueError(f"task numbers start at 0, not {task}")
    fmt = get_format(format)
    suffix = fmt.extensions[0] if fmt.extensions else ""
    if compression:
        suffix += {"gzip": ".gz", "zlib": ".zlib"}.get(compression, "")
    directory = os.fspath(directory)
    return _join(directory, f"{prefix}-{task:05d}{suffix}")


def prepare_output(directory: str | os.PathLike[str]) -> str:
    """Ready the output directory of a set of write tasks: call it once, before the tasks start.

    The directory is created (with its parents) where it is missing, and a manifest that an earlier write
    left there is deleted: while the tasks replace shards, and if one of them fails for good, the directory
    then has no manifest, rather than one that describes other shards. The files that manifest named are
    noted first (:func:`~recordkit.datasets.shardfile.begin_replacing`), and :func:`commit_manifest` removes
    those the new manifest does not name. Shard files are not touched here.

    Returns
    -------
    str
        The directory, as a string.
    """
    directory = os.fspath(directory)
    if is_url(directory):
        fs, inner = require_fsspec().core.url_to_fs(directory)
        fs.makedirs(inner, exist_ok=True)
    else:
        os.makedirs(directory, exist_ok=True)
    manifest = _join(directory, MANIFEST_NAME)
    begin_replacing(manifest)
    _remove_file(manifest)
    return directory


def commit_manifest(
    directory: str | os.PathLike[str],
    shards: Iterable[Shard],
    *,
    format: str,
    compression: str = "",
    schema: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Manifest:
    """Write the manifest of the shards written by a set of tasks, atomically, and return it.

    Entries for the same shard (a task that ran twice) must agree; they are listed once. Shards are listed
    in path order (task order, with :func:`task_shard_path` names). Temporary files that killed attempts
    left beside the listed shards (and their indexes) are deleted first, so call this only once every
    task has finished. Once the manifest is in place, the shards (and indexes) that the directory's
    previous manifest named and this one does not are deleted
    (:func:`~recordkit.datasets.shardfile.commit_manifest_file`); no other file is touched.

    Raises
    ------
    ManifestError
        Two entries for one shard differ (two different tasks wrote the same file).
    """
    by_path: dict[str, Shard] = {}
    for shard in shards:
        known = by_path.get(shard.path)
        if known is not None and known != shard:
            raise ManifestError(
                f"two tasks reported different contents for the shard {shard.path}",
                path=os.fspath(directory),
            )
        by_path[shard.path] = shard
    if not is_url(os.fspath(directory)):
        for shard in by_path.values():
            target = _join(os.fspath(directory), shard.path)
            remove_leftovers(target)
            remove_leftovers(default_index_path(target))
    manifest = Manifest(
        format=get_format(format).name,
        compression=compression,
        shards=tuple(by_path[path] for path in sorted(by_path)),
        schema=schema,
        metadata=dict(metadata or {}),
    )
    commit_manifest_file(manifest, _join(os.fspath(directory), MANIFEST_NAME))
    return manifest


__getattr__ = functools.partial(moved_attribute, __name__)  # 0.2's read ranges
