"""The installed version of openenv_lab (``0.0.0`` when run from a source tree that was never installed).

A leaf module: the servers and launchers that report the version import this, not the package's API.
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("openenv-lab")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
