"""Public path of ``dcpfast.content.values``: document bodies, xattrs and JSON flags."""

from .content.values import PIECE_BYTES, iter_values, values, values_schema

__all__ = ["PIECE_BYTES", "iter_values", "values", "values_schema"]
