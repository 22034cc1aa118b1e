"""The ``recordkit`` command line.

:func:`main` runs it in-process and returns the exit status. Modules: ``commands`` (the parser and the
inspection commands), ``common`` (input expansion, progress, exit codes), ``payload`` (payload detection and
rendering), ``convert`` and ``manifest``.
"""

from recordkit.cli.commands import main

__all__ = ["main"]
