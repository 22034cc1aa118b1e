"""Merging manifests: the manifests of several writers made into one.

Reading a manifest (:class:`~recordkit.io.manifest.Manifest`, :func:`~recordkit.io.manifest.load_manifest`,
the names of ``docs/formats/manifest.md``) is in :mod:`recordkit.io.manifest`, below the reader, which
opens datasets with it; :mod:`recordkit.datasets` re-exports its main names. This module is the writing
side that the reader does not need: joining the manifests that parallel writers (Ray, Dask, your own)
wrote for their shards.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from recordkit.errors import ManifestError
from recordkit.io.manifest import Manifest, Shard, load_manifest, manifest_path
from recordkit.support.moved import moved_attribute, renamed_arguments


@renamed_arguments(destination="dest")
def merge_manifests(
    manifests: Iterable[tuple[str | os.PathLike[str], Manifest] | str | os.PathLike[str]],
    dest: str | os.PathLike[str],
    *,
    metadata: Mapping[str, Any] | None = None,
) -> Manifest:
    """Merge the manifests of several writers into one manifest for ``dest``'s directory.

    Parameters
    ----------
    manifests
        Manifest files (or directories holding one), or ``(directory, Manifest)`` pairs. Each shard path is
        rewritten relative to the directory of ``dest``, which must contain every shard.
    dest
        Where the merged manifest will be written: a directory, or a path ending in ``.json``. Nothing is
        written here; call :meth:`Manifest.save`.
    metadata
        The merged manifest's metadata; by default the inputs' metadata, merged key by key (later wins).

    Raises
    ------
    ManifestError
        The inputs disagree on format or compression, a shard lies outside the directory of ``dest``, or
        two inputs name the same shard with different contents.
    """
    dest = os.fspath(dest)
    root = os.path.abspath(os.path.dirname(manifest_path(dest)) or ".")
    loaded = [_load_item(item) for item in manifests]
    if not loaded:
        raise ManifestError("no manifests to merge", path=dest)
    first_dir, first = loaded[0]
    merged: dict[str, Shard] = {}
    schema = first.schema
    combined: dict[str, Any] = {}
    for directory, manifest in loaded:
        if (manifest.format, manifest.compression) != (first.format, first.compression):
            raise ManifestError(
                f"cannot merge {manifest.format} ({manifest.compression or 'uncompressed'}) shards with "
                f"{first.format} ({first.compression or 'uncompressed'}) shards of {first_dir}",
                path=directory,
            )
        prefix = _relative_prefix(directory, root)
        for shard in manifest.shards:
            moved = shard.relocated(prefix)
            if merged.setdefault(moved.path, moved) != moved:
                raise ManifestError(
                    f"two manifests describe the shard {moved.path} differently", path=directory
                )
        if schema is None:
            schema = manifest.schema
        combined.update(manifest.metadata)
    return Manifest(
        format=first.format,
        compression=first.compression,
        shards=tuple(merged.values()),
        schema=schema,
        metadata=dict(metadata) if metadata is not None else combined,
    )


def _load_item(item: Any) -> tuple[str, Manifest]:
    if isinstance(item, tuple):
        directory, manifest = item
        return os.path.abspath(os.fspath(directory)), manifest
    target = manifest_path(item)
    return os.path.abspath(os.path.dirname(target) or "."), load_manifest(target)


def _relative_prefix(directory: str, root: str) -> str:
    relative = os.path.relpath(directory, root)
    if relative == os.curdir:
        return ""
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        raise ManifestError(
            f"its shards are outside {root}, where the merged manifest goes", path=directory
        )
    return relative.replace(os.sep, "/")


def __getattr__(name: str) -> Any:
    """A name reading needs, moved to :mod:`recordkit.io`, with a warning naming its new home (PEP 562)."""
    return moved_attribute(__name__, name)
