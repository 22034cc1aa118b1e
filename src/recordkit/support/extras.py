"""Optional dependencies: the one way recordkit imports a package that one of its extras installs.

A missing optional package raises an ``ImportError`` that says what needs it and which
``pip install 'recordkit[EXTRA]'`` brings it, instead of a bare ``ModuleNotFoundError``. It stays a
:class:`ModuleNotFoundError` (with the module's ``name``) when the package is absent, so code that catches
either, and ``pytest.importorskip``, treat it as before.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

__all__ = ["install_hint", "needs", "require"]


def install_hint(extra: str | None, package: str | None = None) -> str:
    """The command that installs an optional dependency: the extra's, else (or also) the package's own.

    Examples
    --------
    >>> install_hint("hf", "datasets")
    "pip install 'recordkit[hf]' (or pip install datasets)"
    >>> install_hint(None, "torchdata")
    'pip install torchdata'
    """
    if extra is None:
        return f"pip install {package}"
    hint = f"pip install 'recordkit[{extra}]'"
    return f"{hint} (or pip install {package})" if package else hint


@contextlib.contextmanager
def needs(
    what: str, dependency: str, extra: str | None, package: str | None = None
) -> Iterator[None]:
    """Within it, an import that fails raises an ``ImportError`` saying how to install the dependency.

    Parameters
    ----------
    what
        What needs it (``"recordkit.tensorboard"``, ``"recordkit.Image"``).
    dependency
        What is needed, in words (``"pandas"``, ``"HuggingFace datasets"``).
    extra
        The recordkit extra that installs it (``None``: none does).
    package
        The package to install without the extra (its pip name, a version bound if one matters).

    Examples
    --------
    ::

        with needs("recordkit.tensorboard", "pandas", "tensorboard"):
            import pandas as pd
    """
    try:
        yield
    except ImportError as exc:
        message = f"{what} needs {dependency}: {install_hint(extra, package)}"
        error_type = ModuleNotFoundError if isinstance(exc, ModuleNotFoundError) else ImportError
        raise error_type(message, name=exc.name) from exc


def require(
    module: str, what: str, dependency: str, extra: str | None, package: str | None = None
) -> ModuleType:
    """Import and return ``module``, under :func:`needs` (its other parameters)."""
    with needs(what, dependency, extra, package):
        importlib.import_module(module)
    return sys.modules[module]
