"""HuggingFace ``datasets`` under a short import line: ``import recordkit.hf`` or ``rk.hf.to_dataset(...)``.

This name is the same module object as :mod:`recordkit.integrations.hf`, where the integration lives with
the other libraries' (PyTorch, Ray, Dask).
"""

import sys

from recordkit.integrations import hf

sys.modules[__name__] = hf
