"""Which fields of matched documents differ: vectorised over all pairs at once, bodies and
xattr maps included, never a Python object per document."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .rules import DATATYPE_MASK, SYSTEM_XATTR
from .sides import Side

#: Bodies compared at a time (each block's bodies are copied side by side).
BLOCK = 1 << 16


def differing(field: str, a: Side, ra: np.ndarray, b: Side, rb: np.ndarray) -> np.ndarray:
    """Whether ``field`` differs between row ``ra[i]`` of ``a`` and row ``rb[i]`` of
    ``b``, for every ``i``."""
    if field == "body":
        return _bodies(a.column("body"), ra, b.column("body"), rb)
    if field in ("xattrs", "system_xattrs"):
        system = field == "system_xattrs"
        return _maps(a.column("xattrs"), ra, b.column("xattrs"), rb, system=system)
    if field == "datatype":
        mask = np.uint8(DATATYPE_MASK)
        return (a.numbers("datatype", np.uint8)[ra] & mask) != \
            (b.numbers("datatype", np.uint8)[rb] & mask)
    return _numbers(a, ra, b, rb, field)


def _numbers(a: Side, ra: np.ndarray, b: Side, rb: np.ndarray, name: str) -> np.ndarray:
    valid_a = a.column(name).is_valid().to_numpy(zero_copy_only=False)[ra]
    valid_b = b.column(name).is_valid().to_numpy(zero_copy_only=False)[rb]
    return (valid_a != valid_b) | (valid_a & (a.numbers(name)[ra] != b.numbers(name)[rb]))


def _lengths(column) -> np.ndarray:
    """The lengths of a binary column's values (0 for nulls)."""
    return pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)


def _bodies(col_a, ra: np.ndarray, col_b, rb: np.ndarray) -> np.ndarray:
    """Bodies differ where their lengths do, else where their bytes do (compared only for
    the pairs of equal length)."""
    out = _lengths(col_a)[ra] != _lengths(col_b)[rb]
    same = np.flatnonzero(~out)
    for at in range(0, len(same), BLOCK):       # copies of a block of bodies at a time
        block = same[at:at + BLOCK]
        equal = pc.equal(col_a.take(pa.array(ra[block])), col_b.take(pa.array(rb[block])))
        out[block] = ~pc.fill_null(equal, True).to_numpy(zero_copy_only=False)
    return out


def _maps(col_a, ra: np.ndarray, col_b, rb: np.ndarray, *, system: bool) -> np.ndarray:
    """User (or ``system``) xattrs differ where, as maps (their order not counted, no
    xattrs the same as none), they hold other pairs. Only the pairs where one side has
    an xattr section are looked at."""
    out = np.zeros(len(ra), bool)
    has = (col_a.is_valid().to_numpy(zero_copy_only=False)[ra]
           | col_b.is_valid().to_numpy(zero_copy_only=False)[rb])
    look = np.flatnonzero(has)
    if not len(look):
        return out
    pa_ = _entries(col_a, ra[look], system)
    pb_ = _entries(col_b, rb[look], system)
    count_a = np.bincount(pa_[0], minlength=len(look))
    count_b = np.bincount(pb_[0], minlength=len(look))
    differs = count_a != count_b
    # the entries of rows holding as many on both sides line up, sorted alike
    keep_a, keep_b = ~differs[pa_[0]], ~differs[pb_[0]]
    unequal = _unequal(pa_[1].filter(keep_a), pb_[1].filter(keep_b)) | \
        _unequal(pa_[2].filter(keep_a), pb_[2].filter(keep_b))
    differs[pa_[0][keep_a][unequal]] = True
    out[look] = differs
    return out


def _unequal(x, y) -> np.ndarray:
    return ~pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False)


def _entries(column, rows: np.ndarray, system: bool):
    """(row, name, value) of the user (or ``system``) xattrs of ``rows`` of a map column,
    sorted by row, name and value: row numbers as numpy, names and values as Arrow."""
    maps = column.take(pa.array(rows))
    offsets = maps.offsets.to_numpy(zero_copy_only=False)
    start, end = int(offsets[0]), int(offsets[-1])
    names, values = maps.keys.slice(start, end - start), maps.items.slice(start, end - start)
    row = np.repeat(np.arange(len(rows)), np.diff(offsets))
    chosen = pc.starts_with(names, SYSTEM_XATTR)
    if not system:
        chosen = pc.invert(chosen)
    chosen = pc.fill_null(chosen, False)
    entries = pa.table({"row": row, "name": names, "value": values}).filter(chosen)
    entries = entries.sort_by([("row", "ascending"), ("name", "ascending"),
                               ("value", "ascending")])
    return (entries["row"].to_numpy(), entries["name"].combine_chunks(),
            entries["value"].combine_chunks())
