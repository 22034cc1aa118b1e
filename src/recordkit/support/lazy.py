"""Names of a package loaded from the modules that define them on first use (PEP 562).

A package (``recordkit``, ``recordkit.io``, ``recordkit.datasets``) lists its public names in its
``__all__`` (it is their home, see docs/api.md) but defines few of them itself: :func:`lazy_names` gives it
the ``__getattr__`` and ``__dir__`` that import a name's defining module the first time the name is used,
so importing the package stays cheap. This module imports nothing but :mod:`importlib`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str,
    namespace: dict[str, Any],
    defined_in: Mapping[str, str],
    *,
    fallback: Callable[[str], Any] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__``, which load its names on first use.

    Parameters
    ----------
    package
        The package's name (``"recordkit.io"``), for the ``AttributeError`` of an unknown name.
    namespace
        The package's ``globals()``: a loaded name is stored there, so it is looked up only once, and its
        ``__all__`` is what ``__dir__`` adds to what is loaded already.
    defined_in
        Public name -> the module that defines it (``{"open_shard": "recordkit.io.reader"}``).
    fallback
        Called with a name that ``defined_in`` lacks (``recordkit`` imports its subpackages so); it
        raises ``AttributeError`` itself, or returns the value (not stored).

    Examples
    --------
    In a package's ``__init__.py``::

        __getattr__, __dir__ = lazy_names(__name__, globals(), {"open_shard": "recordkit.io.reader"})
    """

    def __getattr__(name: str) -> Any:
        """Load a public name from its module on first use (PEP 562)."""
        module = defined_in.get(name)
        if module is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        """List the public names, including the ones not loaded yet."""
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
