"""Public path of ``dcpfast.content.values``: document bodies, xattrs and JSON flags."""

from .content.values import values, values_schema

__all__ = ["values", "values_schema"]
