"""The ``recordkit`` command line.

:func:`main` runs it in-process and returns the exit status. Modules: ``commands`` (the parser and the
inspection commands), ``info`` (``recordkit info``: one file's description, or a summary of many shards),
``common`` (inputs resolved by :func:`recordkit.io.resolve_sources`, progress, per-file reports, exit codes),
``payload`` (payload detection, rendering, schema and conversion), ``convert``, ``parquet`` and
``manifest``.
"""

from recordkit.cli.commands import main

__all__ = ["main"]
