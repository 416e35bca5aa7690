"""A stretch of a stream as the state engine reads it (``dcpfast.documents.rows``): rows read
lazily, with extra rows among them, gathered and taken as the full columns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast._core import contract as C


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.lists(st.integers(0, 40), min_size=1, max_size=6),
       st.data())
def test_rows_with_extra_rows_give_every_row_gathered(n, places, data):
    """Rows read lazily from a batch, with extra rows (restarts, losses) put in among them:
    a gather at any rows (in any order, repeated) or a ``take``, the extra ones too, gives
    the full columns there."""
    from dcpfast.documents.rows import NUMERIC, Rows, make_rows, merged, take

    rng = np.random.default_rng(n * 1000 + len(places))
    columns = {name: rng.integers(1, 200, n).astype(dtype) for name, dtype in NUMERIC.items()
               if name != "pos"}
    base = make_rows(n, False, pos=np.arange(n) * 2, **columns)
    lazy = Rows({"what": base.what}, size=n, fill=lambda name: base.columns[name],
                pick=lambda name, index: base.columns[name][index])
    extra = make_rows(len(places), False, pos=np.minimum(places, n) * 2 - 1,
                      what=np.full(len(places), C.W_OSO), seqno=np.arange(len(places)) + 1000)
    whole = merged(base, extra)
    index = np.array(sorted(data.draw(st.sets(st.integers(0, n + len(places) - 1)))),
                     np.int64)
    taken = take(merged(lazy, extra), index)
    anyhow = np.array(data.draw(st.lists(st.integers(0, n + len(places) - 1))), np.int64)
    for name in NUMERIC:
        assert taken.columns[name].tolist() == whole.columns[name][index].tolist(), name
        assert merged(lazy, extra).gather(name, anyhow).tolist() \
            == whole.columns[name][anyhow].tolist(), name
