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
    slow = _replayed(versions, np.arange(len(versions)), kind, gone, EMPTY, no_clears)
    at = np.argsort(slow.pos, kind="stable")
    for name in Feed.__dataclass_fields__:
        assert np.array_equal(getattr(fast, name), getattr(slow, name)[at]), name
    assert len(fast.doc) == len(versions)
