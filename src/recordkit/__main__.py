"""Run the ``recordkit`` command line as ``python -m recordkit``."""

import sys

from recordkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
