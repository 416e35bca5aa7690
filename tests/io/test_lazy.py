"""``scan_polars`` (``dcpfast.io.lazy``): a lazy polars frame with projection and predicate
pushdown, read only as far as the query asks."""

from __future__ import annotations

import dcpfast
from dcpfast import testing as t


def test_scan_polars_is_lazy_with_projection_and_predicate_pushdown():
    import polars as pl

    data = t.synthetic_stream(3000, seed=44, vbuckets=4)
    chunks_read = []

    def chunks():
        for at in range(0, len(data), 10_000):
            chunks_read.append(at)
            yield data[at:at + 10_000]

    eager = pl.from_arrow(dcpfast.scan(data, final=True).to_arrow())
    vb = int(eager["vbucket"][100])
    lazy = dcpfast.scan_polars(data, batch_bytes=20_000)
    query = lazy.filter((pl.col("opcode") == 0x57) & (pl.col("vbucket") == vb)) \
        .select("by_seqno", "key")
    expected = eager.filter((pl.col("opcode") == 0x57) & (pl.col("vbucket") == vb)) \
        .select("by_seqno", "key")
    assert query.collect().equals(expected)
    assert lazy.select(pl.len()).collect().item() == eager.height
    assert "SELECTION" in query.explain()                 # the filter reaches the source
    first = dcpfast.scan_polars(chunks(), batch_bytes=20_000, collections=True).head(5) \
        .collect()
    assert first.height == 5 and first["offset"].to_list() == eager["offset"][:5].to_list()
    assert len(chunks_read) < len(data) // 10_000         # stopped early
