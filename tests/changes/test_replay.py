"""``changes.replay``: the vectorised path (documents whose stream never restarts and
whose collection is never cleared) and the one-change-at-a-time path give the same feed
where both apply."""

from __future__ import annotations

import numpy as np
import pytest

from dcpfast.changes import ChangesBuilder
from dcpfast.changes.replay import Feed, _replayed, replay
from dcpfast.documents.feeding import fed
from dcpfast.documents.versions import tombstones
from tests.state_scenarios import scenario

EMPTY = (np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.uint64))


@pytest.mark.parametrize("seed", range(6))
def test_both_paths_agree(seed):
    builder = ChangesBuilder(errors="skip")
    reading = {"collections": None, "batch_bytes": 1 << 20, "threads": 1}
    with fed(builder, scenario(seed, restarts=0.0, collections=False), "skip", reading):
        pass
    versions, _ = builder.builder.engine.finish()
    no_clears = (np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.int64),
                 np.zeros(0, np.uint64))
    fast = replay(versions, EMPTY, no_clears)
    gone = tombstones(versions)
    kind = np.where(gone, 1, 0).astype(np.uint8)
    kind[versions["what"] == 2] = 2
    slow, _ = _replayed(versions, np.arange(len(versions)), kind, gone, EMPTY, no_clears)
    at = np.argsort(slow.pos, kind="stable")
    for name in Feed.__dataclass_fields__:
        assert np.array_equal(getattr(fast, name), getattr(slow, name)[at]), name
    assert len(fast.doc) == len(versions)


@pytest.mark.parametrize("seed", range(12))
def test_what_stands_is_the_history_and_the_state(seed):
    """``standing`` (no restart went below it) is the history's versions; ``final`` of the
    versions cut at each stream's consistent seqno is the state at those seqnos,
    tombstones and collection drops included."""
    import dcpfast
    from dcpfast.changes.api import stopped
    from dcpfast.changes.replay import final, standing

    data = scenario(700 + seed, restarts=0.1 * (seed % 4), vbuckets=3,
                    collections=seed % 2 == 0)
    builder = ChangesBuilder(errors="skip", values=False)
    reading = {"collections": None, "batch_bytes": 1 << 20, "threads": 1}
    with fed(builder, data, "skip", reading):
        pass
    done = builder.replayed()
    versions = done.versions

    def named(v, index):
        keys = builder.keys(v["doc"][index]).to_pylist()
        return {(int(u) >> 16, k, int(c)) for u, k, c in
                zip(v["unit"][index].tolist(), keys, v["cas"][index].tolist())}

    history = dcpfast.state(data, history=True, include_deleted=True, errors="skip")
    assert named(versions, np.flatnonzero(standing(versions, done.restarts))) == \
        set(zip(*(history[c].to_pylist() for c in ("vbucket", "key_str", "cas"))))
    cut, clears = stopped(versions, done.clears, done.consistent)
    _, at = final(cut, done.restarts, clears)
    per_vbucket = {u >> 16: s for u, s in done.consistent.items()}
    state = dcpfast.state(data, include_deleted=True, errors="skip", at_seqno=per_vbucket)
    assert named(cut, at[at >= 0]) == \
        set(zip(*(state[c].to_pylist() for c in ("vbucket", "key_str", "cas"))))
