"""The package version, read by the build backend."""

__version__ = "0.4.0"
