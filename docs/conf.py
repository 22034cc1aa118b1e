"""Sphinx configuration of the recordkit documentation.

Build it with ``sphinx-build -W -b html docs build/docs`` after ``pip install ".[docs]"``. The pages
are Markdown (MyST); the API reference is generated from the numpydoc docstrings.
"""

from __future__ import annotations

import recordkit

project = "recordkit"
author = "recordkit developers"
copyright = "recordkit developers"
release = recordkit.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# MyST: anchors for headings so that links like ``design.md#layers`` resolve.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# API reference from numpydoc docstrings.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
# "Attributes" sections as fields: as separate entries they would clash with the documented properties.
napoleon_use_ivar = True
# Fields do not create link targets, so a reference like ``CorruptRecordError.path`` falls back to a search
# that finds ``RecordReader.path`` and ``RecordWriter.path`` too; the first match is fine, do not warn.
suppress_warnings = ["ref.python"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# PyTorch, Ray and Dask are optional and heavy: document recordkit.integrations.torch, recordkit.integrations.ray and
# recordkit.integrations.dask without importing them. pytest is not part of the docs extra: recordkit.testing (a pytest
# suite) is documented against a stand-in.
autodoc_mock_imports = ["torch", "pytest", "ray", "pyarrow", "dask"]

html_theme = "furo"
html_title = f"recordkit {release}"
