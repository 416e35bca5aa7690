"""The options of ``state`` (``dcpfast.documents.options``): checked before any work, in
one-line messages; numpy integers welcome; ``only_collections`` apart from the scan's
``collections``; times on the CAS clock."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.documents import nanoseconds
from dcpfast.documents.output import metadata
from dcpfast.protocol import SnapshotFlag
from tests.documents.test_api import T0

HDR = dict(vbucket=5, opaque=0x1005)


def marker(start, end, **kw):
    return t.snapshot_marker(start, end, SnapshotFlag.MEMORY, **{**HDR, **kw})


def mutation(key, seqno, cid=None, **kw):
    return t.mutation(key, b'{"v":%d}' % seqno, by_seqno=seqno, cas=seqno << 16, datatype=1,
                      collection_id=cid, **{**HDR, **kw})


def collections_dump() -> bytes:
    hdr = dict(scope_id=0, **HDR)
    return b"".join([
        marker(1, 4),
        t.create_collection(b"fleet", by_seqno=1, manifest_uid=1, collection_id=8, **hdr),
        mutation(b"a", 2, cid=8), mutation(b"b", 3, cid=0), mutation(b"c", 4, cid=8)])


@pytest.mark.parametrize("kwargs, error, words", [
    ({"only_collections": True}, TypeError, "only_collections takes"),
    ({"only_collections": [1.5]}, TypeError, "not 1.5"),
    ({"only_collections": {"a": 1}}, TypeError, "not dict"),
    ({"only_collections": [-1]}, ValueError, "not a collection id"),
    ({"collections": ["fleet"]}, TypeError, "only_collections= keeps collections"),
    ({"at_seqno": {"0": 5}}, TypeError, "vbuckets must be integers"),
    ({"at_seqno": {0: True}}, TypeError, "at_seqno[0] must be an integer"),
    ({"at_seqno": {70000: 5}}, ValueError, "not in 0..65535"),
    ({"at_seqno": -1}, ValueError, "not a seqno"),
    ({"at_seqno": "12"}, TypeError, "not str"),
    ({"values": "yes"}, TypeError, "values must be True or False"),
    ({"history": 1}, TypeError, "history must be True or False"),
    ({"batch_bytes": 0}, ValueError, "batch_bytes"),
    ({"threads": 0}, ValueError, "threads"),
    ({"errors": "ignore"}, ValueError, "errors must be"),
])
def test_wrong_options_are_one_line_before_any_work(kwargs, error, words):
    class Unread:                  # a source that fails if anything is read of it
        def read(self, *_):
            raise AssertionError("read before the options were checked")
    with pytest.raises(error) as e:
        dcpfast.state(Unread(), **kwargs)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_numpy_integers_are_integers():
    data = collections_dump()
    seqno = dcpfast.scan(data)["by_seqno"][3]                 # np.uint64(3)
    at = dcpfast.state(data, at_seqno=seqno)
    assert at.num_rows == 2 and metadata(at)["at_seqno"] == 3
    mapped = dcpfast.state(data, at_seqno={np.uint16(5): np.int64(3)})
    assert metadata(mapped)["at_seqno"] == {"5": 3} and mapped.num_rows == 2
    assert dcpfast.state(data, only_collections=np.uint32(8)).num_rows == 2
    assert dcpfast.state(data, at_time=np.int64(2 << 16) + 1).num_rows == 1


def test_collections_filter_and_the_scan_option_apart():
    data = collections_dump()
    assert dcpfast.state(data, collections=True).num_rows == 3       # keys carry prefixes
    assert dcpfast.state(data, only_collections="_default.fleet").column(
        "key").to_pylist() == [b"a", b"c"]
    assert dcpfast.state(data, only_collections=["fleet", 0]).num_rows == 3
    with pytest.raises(ValueError) as e:
        dcpfast.state(data, only_collections=["scope.name", "fleet", "nope"])
    assert "scope.name, nope" in str(e.value) and "_default.fleet" in str(e.value)


def test_options_are_checked():
    with pytest.raises(ValueError):
        dcpfast.state(b"", errors="ignore")
    with pytest.raises(TypeError):
        dcpfast.state(b"", at_seqno="12")
    with pytest.raises(ValueError):
        dcpfast.state(b"", at_time="yesterday")
    for outside in (-1, 2**64, "1969-12-31T23:59:59Z", dt.datetime(2600, 1, 1)):
        with pytest.raises(ValueError, match="CAS clock"):
            dcpfast.state(b"", at_time=outside)
    assert dcpfast.state(b"", at_time=2**64 - 1).num_rows == 0
    with pytest.raises(TypeError):
        dcpfast.state(b"", only_collections=[1.5])
    assert nanoseconds("2023-11-14T22:13:20Z") == T0
    assert nanoseconds(dt.datetime(2023, 11, 14, 22, 13, 20)) == T0
    assert dcpfast.state(b"").num_rows == 0
