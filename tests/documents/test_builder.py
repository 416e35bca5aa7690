"""``StateBuilder`` (``dcpfast.documents.builder``): batches fed one by one give the state of
the whole input."""

from __future__ import annotations

import dcpfast
from dcpfast.documents import (
    StateBuilder,
)


def test_builder_takes_batches_one_by_one():
    builder = StateBuilder(history=True)
    for batch in dcpfast.iter_batches(dcpfast.testing.SAMPLE, 10_000):
        builder.update(batch)
    assert builder.table().equals(dcpfast.state(dcpfast.testing.SAMPLE, history=True))
