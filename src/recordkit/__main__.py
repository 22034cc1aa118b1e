"""Run the ``recordkit`` command line as ``python -m recordkit``; :func:`run` is also the ``recordkit`` script."""

import sys


def run() -> int:
    """Load the command line and run it; return the exit status.

    Ctrl-C while the command line is still being imported ends the same way as during a command: exit
    status 130 and one line, never a traceback.
    """
    try:
        from recordkit.cli import main
    except KeyboardInterrupt:
        print("recordkit: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
