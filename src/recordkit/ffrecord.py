"""The ffrecord drop-in under the import line that scripts written for HFAiLab's ffrecord use.

``from recordkit.ffrecord import FileReader, FileWriter`` replaces ``from ffrecord import ...``. This name is the
same module object as :mod:`recordkit.compat.ffrecord`, where the drop-in lives with the other compatibility
APIs.
"""

import sys

from recordkit.compat import ffrecord

sys.modules[__name__] = ffrecord
