"""The documents a report saw (``dcpfast.reporting.content``): the key table bounded, its
counts lower bounds, the hottest keys kept."""

from __future__ import annotations

import numpy as np

import dcpfast
from dcpfast import testing as t
from dcpfast.events import Manifest


def test_key_versions_are_bounded_and_lower_bounds(monkeypatch):
    """Past ``KEEP`` distinct keys the table drops the least changed; what it reports of a
    key is at most its versions and short by at most ``floor``; the hottest keys stay."""
    import random
    from collections import Counter

    from dcpfast.reporting import content as C

    monkeypatch.setattr(C, "KEEP", 50)
    rng = random.Random(5)
    keys = [b"hot-%d" % k for k in range(5)] * 40 + [b"cold-%d" % rng.randrange(2000)
                                                     for _ in range(3000)]
    rng.shuffle(keys)
    counted, seqno = C.Content(), 0
    for at in range(0, len(keys), 97):
        frames = []
        for key in keys[at:at + 97]:
            seqno += 1
            frames.append(t.mutation(key, b"{}", by_seqno=seqno))
        batch = dcpfast.scan(b"".join(frames), collections=False)
        counted.update(batch, np.arange(len(batch)), Manifest())
    truth = Counter(keys)
    top = counted.top_keys(10)
    assert counted.floor > 0 and len(counted.keys) <= 2 * C.KEEP
    assert {k for _, k, _ in top[:5]} == {b"hot-%d" % k for k in range(5)}
    for _, key, n in top:
        assert n <= truth[key] <= n + counted.floor
