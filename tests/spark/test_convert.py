"""Frames to the Arrow batches Spark takes (``dcpfast.spark.convert``): unsigned 64-bit
values reinterpreted, keys as text where they are UTF-8, the source named."""

from __future__ import annotations

import numpy as np

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing as T
from dcpfast.spark.convert import to_record_batch


def test_record_batches_reinterpret_uint64(tmp_path):
    data = T.snapshot_marker(5, 2**64 - 1, vbucket=3) + \
        T.mutation(b"k\xff", b"v", by_seqno=2**63 + 1, cas=2**64 - 2, vbucket=3)
    batch = dcpfast.scan(data, final=True, collections=False)
    rb = to_record_batch(batch, "x", dspark.spark_arrow_schema())
    assert rb.column("snap_end").to_pylist() == [-1, None]
    assert rb.column("by_seqno").to_pylist() == [None, -(2**63) + 1]
    assert rb.column("cas").to_numpy().view(np.uint64)[1] == 2**64 - 2
    assert rb.column("key_str").to_pylist() == [None, None]       # b"k\xff" is not UTF-8
    assert rb.column("source").to_pylist() == ["x", "x"]
    data = T.snapshot_marker(5, 9, vbucket=3) + T.mutation(b"k\xc3\xa9", b"v", by_seqno=6)
    rb = to_record_batch(dcpfast.scan(data, final=True, collections=False), None,
                                dspark.spark_arrow_schema())
    assert rb.column("key_str").to_pylist() == [None, "k\u00e9"]
    assert rb.column("key").to_pylist() == [None, b"k\xc3\xa9"]
    assert rb.column("source").to_pylist() == [None, None]
