"""The ``dcpfast`` command: one module per command, the group and shared input handling in
``app``."""

from . import (  # noqa: F401  (they add the commands)
    audit,
    bench,
    changes,
    convert,
    diff,
    head,
    info,
    mirror,
    report,
    spark_decode,
    state,
)
from .app import main

__all__ = ["main"]
