"""Where a warning should point: the first frame of the stack outside recordkit.

A warning raised deep inside a reader (a stale sidecar index found on the first ``len()``, say) is about the
user's call, but the depth between that call and :func:`warnings.warn` depends on the entry point. A fixed
``stacklevel`` therefore names a line of recordkit for most of them; :func:`user_stacklevel` counts the
frames instead.
"""

from __future__ import annotations

import os
import sys

__all__ = ["user_stacklevel"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """Return the ``stacklevel`` for :func:`warnings.warn` that names the first caller outside recordkit.

    Call it in the function that calls :func:`warnings.warn`. Where every frame is recordkit's (a thread
    that recordkit started), it returns 2: the caller of that function.
    """
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_code.co_filename.startswith(_PACKAGE):
        back = frame.f_back
        if back is None:
            return 2
        frame, level = back, level + 1
    return level
