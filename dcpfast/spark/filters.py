"""Spark filters that the ``dcp`` data source applies itself: comparisons of a frame
column with integers, evaluated on a batch's numpy columns right after the scan, so that
Spark never builds the rows they drop.

Spark hands a Python data source its filters when ``spark.sql.python.filterPushdown.enabled``
is true (``DataSourceReader.pushFilters``). Taken are ``=``, ``<=>``, ``<``, ``<=``,
``>``, ``>=``, ``IN``, ``IS NULL``, ``IS NOT NULL`` and their negations on a scanner
column (``opcode``, ``vbucket``, ``by_seqno``...) with integer values; Spark evaluates the
rest. A column a frame does not carry is null there, as in the rows: a comparison with it
is not true, and neither is its negation.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from .. import schema as S

_COMPARE = {"EqualTo": operator.eq, "GreaterThan": operator.gt,
            "GreaterThanOrEqual": operator.ge, "LessThan": operator.lt,
            "LessThanOrEqual": operator.le}


class Condition(NamedTuple):
    """One filter taken: ``column`` compared by ``test`` (a name of a pyspark filter
    class) with ``values``; ``negated`` for a ``Not``."""

    column: str
    test: str
    values: tuple[int, ...]
    negated: bool = False


def condition(spark_filter) -> Condition | None:
    """The ``Condition`` of a pyspark ``Filter``, or None when Spark must evaluate it."""
    negated = type(spark_filter).__name__ == "Not"
    if negated:
        spark_filter = spark_filter.child
    test = type(spark_filter).__name__
    attribute: tuple[str, ...] = getattr(spark_filter, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in S.INDEX:
        return None
    column = attribute[0]
    if test in ("IsNull", "IsNotNull"):
        return Condition(column, test, (), negated)
    if test == "EqualNullSafe" and spark_filter.value is None:
        return Condition(column, "IsNull", (), negated)
    values = tuple(spark_filter.value) if test == "In" else (spark_filter.value,)
    if test not in (*_COMPARE, "EqualNullSafe", "In") or not values or not all(
            type(v) is int and -2**63 <= v < 2**63 for v in values):
        return None
    return Condition(column, test, values, negated)


def wanted(conditions) -> tuple[str, ...]:
    """The scanner columns the conditions read."""
    return tuple(dict.fromkeys(c.column for c in conditions))


def keep(batch, conditions) -> np.ndarray:
    """Which frames of ``batch`` pass every condition (a boolean mask)."""
    out = np.ones(len(batch), dtype=bool)
    for c in conditions:
        out &= _holds(batch, c)
    return out


def _holds(batch, c: Condition) -> np.ndarray:
    raw = batch[c.column]
    # the values Spark sees: uint64 as the same 64 bits signed, the others widened
    column = raw.view(np.int64) if raw.dtype == np.uint64 else raw.astype(np.int64)
    carried = batch.validity(c.column)
    if carried is None:
        carried = np.ones(len(batch), dtype=bool)
    if c.test == "IsNull":
        truth, known = ~carried, None
    elif c.test == "IsNotNull":
        truth, known = carried, None
    else:
        values = np.array(c.values, dtype=np.int64)
        hit = np.isin(column, values) if c.test == "In" else \
            _COMPARE.get(c.test, operator.eq)(column, values[0])
        truth = carried & hit
        known = None if c.test == "EqualNullSafe" else carried   # null <=> x is false
    if not c.negated:
        return truth
    return ~truth if known is None else known & ~truth

