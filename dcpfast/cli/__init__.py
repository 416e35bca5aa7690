"""The ``dcpfast`` command: one module per command, the group and shared input handling in
``app``."""

from . import bench, convert, head, info, report, spark_decode, state  # noqa: F401  (they add the commands)
from .app import main

__all__ = ["main"]
