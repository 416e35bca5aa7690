"""``changes.sent``: the versions a capture sent, one per (vbucket, key, CAS), found again
by that identity; held against a dict, CAS values shared by several versions included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast.changes.sent import Sent

_SENDING = st.tuples(st.integers(0, 2), st.sampled_from(["a", "b", "c", None]),
                     st.integers(1, 4), st.booleans())


@given(st.lists(_SENDING, max_size=40), st.lists(st.tuples(
    st.integers(0, 3), st.sampled_from(["a", "b", "c", "d", None]), st.integers(0, 5)),
    max_size=20))
@settings(max_examples=300, deadline=None)
def test_one_version_per_identity_found_again(sendings, asked):
    model: dict = {}
    for place, (vb, key, cas, stands) in enumerate(sendings):
        doc = hash((vb, key)) % 7
        was = model.get((vb, key, cas))
        model[(vb, key, cas)] = (place, doc, stands) if was is None else \
            (was[0], min(was[1], doc), was[2] or stands)
    n = len(sendings)
    sent = Sent.of(np.array([s[0] for s in sendings], np.int64),
                   pa.array([s[1] for s in sendings], pa.string()),
                   np.array([s[2] for s in sendings], np.uint64), np.arange(n),
                   np.array([hash((s[0], s[1])) % 7 for s in sendings], np.int64),
                   np.array([s[3] for s in sendings], bool))
    got = {(int(sent.vbucket[i]), sent.key[i].as_py(), int(sent.cas[i])):
           (int(sent.place[i]), int(sent.doc[i]), bool(sent.stands[i]))
           for i in range(len(sent))}
    assert got == model and len(sent) == len(model)
    assert list(sent.cas) == sorted(sent.cas)
    rows = sent.find(np.array([a[0] for a in asked], np.int64),
                     pa.array([a[1] for a in asked], pa.string()),
                     np.array([a[2] for a in asked], np.uint64))
    for (vb, key, cas), row in zip(asked, rows.tolist(), strict=True):
        if key is None or (vb, key, cas) not in model:
            assert row == -1
        else:
            assert (int(sent.vbucket[row]), sent.key[row].as_py(), int(sent.cas[row])) == \
                (vb, key, cas)
