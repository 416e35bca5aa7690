"""Time series in bounded memory (``dcpfast.reporting.grid``): cells added in pieces as the
grid widens, or merged, sum as all at once; a thinned sample bounded and exact where it
can be."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast.reporting.grid import BUCKETS, Cells, Grid, Thinned


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 2**48), st.integers(0, 1000)),
                min_size=1, max_size=300),
       st.integers(1, 40), st.integers(0, 2**40))
def test_cells_in_pieces_equal_the_cells_of_all(points, piece, base):
    """Values added a piece at a time, as the grid widens, sum to what the final width
    gives for all of them at once; two halves merged give the same."""
    rows = np.array([p[0] for p in points])
    times = np.array([p[1] + base for p in points], np.int64)
    values = np.array([p[2] for p in points], np.int64)

    def built(parts) -> tuple[Grid, Cells]:
        grid, cells = Grid(), Cells({"n": "sum", "top": "max"}, {"n": np.int64, "top": np.int64})
        for at in parts:
            cells.add(rows[at], times[at], grid.see(times[at]), n=values[at], top=values[at])
        return grid, cells

    grid, cells = built([slice(k, k + piece) for k in range(0, len(points), piece)])
    got_rows, got_buckets, got = cells.table(grid.shift)
    assert got_buckets.max() - got_buckets.min() < BUCKETS
    want: dict = {}
    for r, tm, v in zip(rows.tolist(), times.tolist(), values.tolist()):
        n, top = want.get((r, tm >> grid.shift), (0, -1))
        want[(r, tm >> grid.shift)] = (n + v, max(top, v))
    assert dict(zip(zip(got_rows.tolist(), got_buckets.tolist()),
                    zip(got["n"].tolist(), got["top"].tolist()))) == want
    half = len(points) // 2
    first, a = built([slice(0, half)])
    second, b = built([slice(half, None)])
    first.merge(second)
    a.merge(b)
    assert first.shift == grid.shift
    merged = a.table(grid.shift)
    assert [m.tolist() for m in merged[:2]] == [got_rows.tolist(), got_buckets.tolist()]
    assert merged[2]["n"].tolist() == got["n"].tolist()


def test_a_thinned_sample_stays_bounded_and_exact_where_it_can():
    sample = Thinned()
    sample.add(np.arange(1000.0))
    assert sample.quantile(0.5) == 499.5 and sample.max == 999
    for _ in range(40):
        sample.add(np.arange(10_000.0))
    assert len(sample.kept) <= 1 << 16 and sample.count == 401_000
    assert sample.max == 9999 and abs(sample.quantile(0.5) - 5000) < 100


