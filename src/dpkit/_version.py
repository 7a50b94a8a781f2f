"""dpkit's version, read from the installed distribution's metadata (one source: pyproject.toml)."""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "dpkit"
"""The name dpkit is installed under (``pip install dpkit``); the import name is ``dpkit`` too."""

try:
    __version__: str = version(DISTRIBUTION)
except PackageNotFoundError:  # pragma: no cover - a source tree used without installing it
    __version__ = "0+unknown"
