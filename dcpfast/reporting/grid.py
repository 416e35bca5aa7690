"""Time series in bounded memory: time buckets that widen as the time span grows, and
sparse cells of values per (series row, bucket).

Every series of a report shares one ``Grid``: buckets are ``2**shift`` nanoseconds wide
and aligned to the epoch, and no more than ``BUCKETS`` of them lie between the earliest
and the latest time seen; when a time falls outside, the buckets double in width (two
neighbours become one) until it fits. A ``Cells`` holds the values of many series rows
(an opcode, a stream, a lag bin) per bucket, sparse: a row takes room only in the buckets
it has values in, so a report holds at most ``BUCKETS`` values per row whatever the
input's size, and two of them (two inputs, two Spark tasks) merge exactly.
"""

from __future__ import annotations

import numpy as np

#: The most buckets between the earliest and the latest time of a report.
BUCKETS = 1024
#: The narrowest bucket: 2**20 ns (about a millisecond).
FIRST_SHIFT = 20
#: Elements of small additions a ``Cells`` holds before it counts them.
RAW = 8192
#: Parts added to a ``Cells`` before they are merged, however small.
_PARTS = 64
#: How values of one row and bucket combine.
_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "or": np.bitwise_or}


def shift_for(lo: int, hi: int, shift: int) -> int:
    """The narrowest bucket shift, at least ``shift``, that puts times ``lo`` to ``hi``
    (ns) into at most ``BUCKETS`` buckets."""
    while (hi >> shift) - (lo >> shift) >= BUCKETS:
        shift += 1
    return shift


class Grid:
    """The buckets every series of a report shares: their width (``2**shift`` ns) and the
    span of the times seen (``lo``..``hi`` ns, None before any)."""

    def __init__(self) -> None:
        self.shift = FIRST_SHIFT
        self.lo: int | None = None
        self.hi: int | None = None

    def see(self, times: np.ndarray) -> int:
        """Take the span of ``times`` (int64 ns, all of them real times); returns the
        shift their buckets are counted at."""
        if len(times):
            self.widen(int(times.min()), int(times.max()))
        return self.shift

    def widen(self, lo: int, hi: int) -> None:
        """Take the span ``lo``..``hi`` (ns)."""
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.shift = shift_for(self.lo, self.hi, self.shift)

    def merge(self, other: Grid) -> None:
        """Take ``other``'s span and width."""
        self.shift = max(self.shift, other.shift)
        if other.lo is not None and other.hi is not None:
            self.widen(other.lo, other.hi)

    @property
    def seconds(self) -> float:
        """The width of a bucket in seconds."""
        return (1 << self.shift) / 1e9

    def span(self) -> tuple[int, int] | None:
        """The first and last bucket index at the current width, None before any time."""
        if self.lo is None or self.hi is None:
            return None
        return self.lo >> self.shift, self.hi >> self.shift


def _gathered(op: str, at: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """``values`` combined by ``op`` into a table of ``size`` at positions ``at``."""
    start: float
    if op == "sum" or op == "or":
        start = 0
    elif np.issubdtype(values.dtype, np.integer):
        start = np.iinfo(values.dtype).min if op == "max" else np.iinfo(values.dtype).max
    else:
        start = -np.inf if op == "max" else np.inf
    out = np.full(size, start, values.dtype)
    _REDUCE[op].at(out, at, values)
    return out


def reduced(keys: np.ndarray, values: dict[str, np.ndarray],
            ops: dict[str, str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``keys`` made unique (sorted) and ``values`` combined per key as ``ops`` says."""
    if len(keys) < 2:
        return keys, values
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    if len(heads) == len(keys):
        return keys, {name: v[order] for name, v in values.items()}
    return keys[heads], {name: _REDUCE[ops[name]].reduceat(v[order], heads)
                         for name, v in values.items()}


class Cells:
    """Values by (row, bucket), sparse. ``ops`` names each value and how two of one row
    and bucket combine (``"sum"``, ``"max"``, ``"min"`` or ``"or"``). Added cells are kept
    in parts and merged once they outnumber the merged ones, so n cells cost O(n log n)."""

    def __init__(self, ops: dict[str, str], dtypes: dict[str, type]):
        self.ops, self.dtypes = ops, dtypes
        self.shift = FIRST_SHIFT
        self.keys = np.empty(0, np.int64)              # row << 32 | (bucket - origin)
        self.values: dict[str, np.ndarray] = {name: np.empty(0, dtypes[name]) for name in ops}
        self.origin = 0                                # bucket of key 0 at ``shift``
        self._parts: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
        self._unmerged = 0
        self._raw: list[tuple[np.ndarray, np.ndarray, dict]] = []     # additions waiting
        self._raw_size = 0
        self._raw_shift = FIRST_SHIFT

    def add(self, rows: np.ndarray, times: np.ndarray, shift: int, **values: np.ndarray) -> None:
        """Add one value per element: its row (a small int), its time (ns) and the
        buckets' ``shift`` (the grid's now). Small additions wait and are counted
        together (``RAW`` elements at a time)."""
        if not len(rows):
            return
        self._raw.append((rows, times, values))
        self._raw_shift = max(self._raw_shift, shift)
        self._raw_size += len(rows)
        if self._raw_size >= RAW or len(self._raw) >= _PARTS:
            self._absorb()

    def _absorb(self) -> None:
        """Count the waiting additions into parts, at the latest shift they were given."""
        if not self._raw:
            return
        raw, self._raw, self._raw_size = self._raw, [], 0
        self.rescale(self._raw_shift)
        shift = self.shift
        rows = np.concatenate([r for r, _, _ in raw]).astype(np.int64, copy=False)
        buckets = np.concatenate([t for _, t, _ in raw]) >> shift
        values = {n: np.concatenate([np.asarray(v[n], self.dtypes[n]) for _, _, v in raw])
                  for n in self.ops}
        low, high = int(buckets.min()), int(buckets.max())
        self._rebase(low)
        first, width = int(rows.min()), high - low + 1
        size = (int(rows.max()) - first + 1) * width
        if size <= max(4 * len(rows), 1 << 16):         # a batch spans few buckets: a dense
            at = (rows - first) * width + (buckets - low)   # table, no sort
            seen = np.zeros(size, bool)
            seen[at] = True
            cells = np.flatnonzero(seen)
            keys = (cells // width + first) << 32 | (cells % width + low - self.origin)
            values = {n: _gathered(self.ops[n], at, v, size)[cells] for n, v in values.items()}
        else:
            keys, values = reduced(rows << 32 | (buckets - self.origin), values, self.ops)
        self._parts.append((keys, values))
        self._unmerged += len(keys)
        if self._unmerged > len(self.keys) + 4096 or len(self._parts) > _PARTS:
            self.compact()

    def _rebase(self, low: int) -> None:
        """Make bucket ``low`` representable: key buckets count from the lowest."""
        if not self.keys.size and not self._parts:
            self.origin = low
        elif low < self.origin:
            self.compact()
            self.keys = (self.keys >> 32) << 32 | ((self.keys & 0xFFFFFFFF)
                                                   + (self.origin - low))
            self.origin = low

    def rescale(self, shift: int) -> None:
        """Count the buckets at ``shift`` (at least the present one): neighbours merge."""
        if shift <= self.shift:
            return
        self._compact()
        step = shift - self.shift
        rows, buckets = self.keys >> 32, (self.keys & 0xFFFFFFFF) + self.origin
        self.origin >>= step
        self.shift = shift
        self.keys, self.values = reduced(rows << 32 | ((buckets >> step) - self.origin),
                                         self.values, self.ops)

    def compact(self) -> None:
        """Merge every addition into the cells."""
        self._absorb()
        self._compact()

    def _compact(self) -> None:
        """Merge the parts into the cells."""
        if not self._parts:
            return
        keys = np.concatenate([self.keys, *(k for k, _ in self._parts)])
        values = {name: np.concatenate([self.values[name], *(v[name] for _, v in self._parts)])
                  for name in self.ops}
        self._parts, self._unmerged = [], 0
        self.keys, self.values = reduced(keys, values, self.ops)

    def merge(self, other: Cells) -> None:
        """Add ``other``'s cells (of the same values)."""
        other.compact()
        if not len(other.keys):
            return
        shift = max(self.shift, other.shift)
        self.rescale(shift)
        rows = other.keys >> 32
        buckets = ((other.keys & 0xFFFFFFFF) + other.origin) >> (shift - other.shift)
        self._rebase(int(buckets.min()))
        self._parts.append((rows << 32 | (buckets - self.origin), dict(other.values)))
        self.compact()

    def rows(self, offset: int) -> None:
        """Renumber the rows: add ``offset`` to each (before a merge with another's)."""
        self.compact()
        self.keys = ((self.keys >> 32) + offset) << 32 | (self.keys & 0xFFFFFFFF)

    def table(self, shift: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(rows, buckets, values)`` at ``shift`` (the grid's final width), sorted by
        row then bucket."""
        self.rescale(shift)
        self.compact()
        return self.keys >> 32, (self.keys & 0xFFFFFFFF) + self.origin, self.values

    def __getstate__(self) -> dict:
        self.compact()
        return self.__dict__


#: Values a ``Thinned`` sample holds before it keeps only every other one.
SAMPLE_SIZE = 1 << 16


class Thinned:
    """A bounded, deterministic sample of a stream of numbers for its quantiles: every
    value while there are at most ``SAMPLE_SIZE``, then every second one, every fourth...
    (``stride``), in arrival order; the count, the sum and the maximum stay exact."""

    def __init__(self) -> None:
        self.kept = np.empty(0, np.float64)
        self.stride = 1
        self.count = 0
        self.total = 0.0
        self.max: float | None = None
        self._skip = 0                 # values to pass over before the next one kept

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, np.float64)
        if not len(values):
            return
        self.count += len(values)
        self.total += float(values.sum())
        top = float(values.max())
        self.max = top if self.max is None else max(self.max, top)
        picked = values[self._skip::self.stride]
        self._skip = (self._skip - len(values)) % self.stride
        self.kept = np.concatenate([self.kept, picked])
        while len(self.kept) > SAMPLE_SIZE:
            self.kept = self.kept[::2]
            self.stride *= 2
            self._skip = 0

    def merge(self, other: Thinned) -> None:
        """Add ``other``'s sample: its kept values count at the coarser stride."""
        self.count += other.count
        self.total += other.total
        if other.max is not None:
            self.max = other.max if self.max is None else max(self.max, other.max)
        stride = max(self.stride, other.stride)
        self.kept = np.concatenate([self.kept[::stride // self.stride],
                                    other.kept[::stride // other.stride]])
        self.stride, self._skip = stride, 0
        while len(self.kept) > SAMPLE_SIZE:
            self.kept = self.kept[::2]
            self.stride *= 2

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the sample (exact while nothing was thinned)."""
        return float(np.quantile(self.kept, q)) if len(self.kept) else None
