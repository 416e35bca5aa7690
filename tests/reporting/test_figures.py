"""The figures of a report stay bounded by the input whatever its shape: the per-stream
series draw the troubled and the busiest streams and count the rest, a report of 100,000
streams ends, and the series' work grows with the streams, not faster."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import dcpfast
from dcpfast import testing as t
from dcpfast.reporting import figures

START = 1_700_000_000 * 10**9
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def many_streams(count: int, cells: int = 1, busy=()) -> bytes:
    """A dump of ``count`` streams (vbuckets 0 to 1,023, under stream ids 1, 2, ...), each
    a snapshot marker and ``cells`` mutations, each mutation of a stream in a time bucket
    of its own; the streams numbered in ``busy`` carry twice as many items (two a bucket)."""
    def where(i: int) -> dict:
        return {"vbucket": i % 1024, "stream_id": i // 1024 + 1}
    out = [t.snapshot_marker(1, 2 * cells, **where(i)) for i in range(count)]
    for j in range(cells):
        for i in range(count):
            cas = START + (j * count + i) * 10**6
            out.append(t.mutation(b"k", by_seqno=2 * j + 1, cas=cas, **where(i)))
            if i in busy:
                out.append(t.mutation(b"k", by_seqno=2 * j + 2, cas=cas, **where(i)))
    return b"".join(out)


#: The child: the report of a dump, what its series drew and left out.
_CHILD = """
import json, sys
import dcpfast
f = dcpfast.report(sys.argv[1]).figures
print(json.dumps({"streams": len(f["streams"]), "drawn": len(f["series"]["streams"]),
                  "not_drawn": f["series"]["streams_not_drawn"], "warnings": f["warnings"],
                  "points": sum(len(s["buckets"]) for s in f["series"]["streams"])}))
"""


def test_a_hundred_thousand_streams_end_and_say_what_is_not_drawn(tmp_path):
    count = 98 * 1024
    path = tmp_path / "many.dcp"
    path.write_bytes(many_streams(count))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True,
                          env=ENV, timeout=900)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    got = json.loads(done.stdout.decode().splitlines()[-1])
    assert got["streams"] == count
    assert got["drawn"] == figures.SERIES_STREAMS
    assert got["not_drawn"] == count - figures.SERIES_STREAMS
    assert got["points"] <= figures.STREAM_POINTS
    assert any(f"{count - figures.SERIES_STREAMS:,} streams" in w for w in got["warnings"])


def test_the_series_draw_the_troubled_and_the_busiest(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "SERIES_STREAMS", 8)
    path = tmp_path / "some.dcp"
    busy = {3, 5, 11, 17, 19, 23}
    stalled = 30                     # its last item a minute after the others: a stall
    data = many_streams(32, cells=4, busy=busy)
    data += t.mutation(b"k", by_seqno=8, cas=START + 60 * 10**9, vbucket=stalled,
                       stream_id=1)
    path.write_bytes(data)
    found = dcpfast.report(path)
    f = found.figures
    drawn = {f["streams"][s["stream"]]["vbucket"] for s in f["series"]["streams"]}
    assert f["streams"][stalled]["stalls"] == 1
    # the stalled one first, then the busiest, then the first of those as busy
    assert drawn == {stalled, *busy, 0}
    assert f["series"]["streams_not_drawn"] == 32 - 8
    assert "24 streams" in " ".join(f["warnings"])
    if importlib.util.find_spec("bokeh") is not None:
        assert "24 streams" in found.to_html()


def _work(tmp_path, monkeypatch, count: int) -> int:
    """The cells the thinning of the stream series looked at, for ``count`` streams."""
    seen = []
    real = figures._cells_after

    def counted(rows, buckets, coarser):
        seen.append(len(rows))
        return real(rows, buckets, coarser)
    monkeypatch.setattr(figures, "_cells_after", counted)
    path = tmp_path / f"{count}.dcp"
    path.write_bytes(many_streams(count, cells=8))
    dcpfast.report(path)
    monkeypatch.undo()
    return sum(seen)


def test_the_series_work_grows_with_the_streams(tmp_path, monkeypatch):
    """Eight times the streams, each in eight buckets: at most about eight times the cells
    looked at (loose: twice that), however many passes merge their buckets."""
    small = _work(tmp_path, monkeypatch, 2048)
    large = _work(tmp_path, monkeypatch, 16384)
    assert large <= 16 * small, (small, large)
