"""What the report says of a pause: one pause of a whole connection is one stall in the
figures and one line of the headline, naming how many streams it stopped (their own
stalls folded into it, though each began a few milliseconds before it); the flow-control
chart shows the buffer line within its y range; the lag chart says why it is empty when
the capture's clock is behind the CAS clock."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.testing.capture import pcap_file, timed_packets

pytest.importorskip("bokeh", reason="the charts need the report extra")

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
STREAMS = 16


def paused(tmp_path, *, pause_s: float = 9.0, cas_ahead_ns: int = -MS, buffer: int = 65536,
           item: int = 1000, quiet: tuple[int, ...] = ()):
    """A capture of ``STREAMS`` streams each sent a 1 KB mutation every 200 ms (vbucket
    v ``v`` ms into each tick) for 2 s, then nothing for ``pause_s``, then 1 s more;
    ``quiet``: vbuckets silent from their second mutation to the pause (their stalls
    begin 1.8 s before the connection's). ``cas_ahead_ns``: each CAS minus its capture time."""
    events = [(T0, True, t.open(b"c", flags=1) + t.control(b"connection_buffer_size",
                                                           str(buffer).encode())
               + b"".join(t.stream_request(vbucket=v, opaque=v + 1) for v in range(STREAMS)))]
    events.append((T0 + MS, False, b"".join(t.failover_log_response([(5, 0)], opaque=v + 1)
                                            for v in range(STREAMS))))
    seqno, acked = dict.fromkeys(range(STREAMS), 0), 0
    ticks = [T0 + 10 * MS + k * 200 * MS for k in range(10)]
    ticks += [ticks[-1] + int(pause_s * 1e9) + k * 200 * MS for k in range(6)]
    for k, tick in enumerate(ticks):
        for v in range(STREAMS):
            if v in quiet and 1 <= k < 10:
                continue
            seqno[v] += 1
            at = tick + v * MS
            frames = b"" if seqno[v] > 1 else t.snapshot_marker(1, 1000, vbucket=v,
                                                                  opaque=v + 1)
            events.append((at, False, frames + t.mutation(
                b"k%d" % seqno[v], b"v" * item, by_seqno=seqno[v], vbucket=v, opaque=v + 1,
                cas=at + cas_ahead_ns)))
            acked += 1
        events.append((tick + 50 * MS, True, t.buffer_ack(STREAMS * (item + 60), opaque=1)))
    path = tmp_path / "pause.pcap"
    path.write_bytes(pcap_file(timed_packets(events, fin=False)))
    return path


def test_one_pause_of_the_connection_is_one_stall(tmp_path):
    report = dcpfast.report(paused(tmp_path))
    f = report.figures
    (stall,) = f["stalls"]
    assert stall["vbucket"] is None and stall["streams_open"] == STREAMS
    assert stall["streams_folded"] == STREAMS
    assert 8.9 < stall["seconds"] < 9.1
    assert f["connections"][0]["stalls"] == 1
    assert all(s["stalls"] == 1 for s in f["streams"])          # each stream did stall
    page = report.to_html()
    headline = page.split('<div class="headline">')[1].split("</div>")[0]
    assert headline.count("<li>") == 1
    assert f"every stream of the connection ({STREAMS} open) stalled 9.0 s" in headline


def test_a_stream_silent_longer_than_the_pause_keeps_its_own_stall(tmp_path):
    """vb 3 fell silent 1.8 s before the connection paused: its stall is its own (it
    began more than a tenth of the pause before it); the other streams' fold."""
    f = dcpfast.report(paused(tmp_path, quiet=(3,))).figures
    wide = [s for s in f["stalls"] if s["vbucket"] is None]
    own = [s for s in f["stalls"] if s["vbucket"] is not None]
    assert len(wide) == 1 and wide[0]["streams_folded"] == STREAMS - 1
    assert [s["vbucket"] for s in own] == [3] and own[0]["streams_folded"] == 0
    assert own[0]["seconds"] > wide[0]["seconds"] + 1.5


def test_the_flow_chart_shows_its_buffer_line(tmp_path):
    """About 17 KB unacknowledged against a 65,536-byte buffer: the y range reaches the
    dashed line."""
    from bokeh.models import Span

    from dcpfast.reporting.charts import Charts

    f = dcpfast.report(paused(tmp_path)).figures
    assert f["flow_control"][0]["buffer_bytes"] == 65536
    assert f["flow_control"][0]["max_unacked_bytes"] < 65536 * 0.7
    chart = Charts(f).all()["flow"]
    (line,) = [a for a in chart.center if isinstance(a, Span) and a.dimension == "width"]
    assert line.location == 65536
    assert chart.y_range.start == 0 and chart.y_range.end >= 65536


def test_the_lag_chart_says_why_it_is_empty(tmp_path):
    """The capture's clock a second behind the CAS clock: every lag is below 0, none can
    be drawn on a log scale, and the chart says so (and the page with it)."""
    from dcpfast.reporting.charts import Charts

    report = dcpfast.report(paused(tmp_path, cas_ahead_ns=10**9))
    f = report.figures
    assert f["lag_ms"]["max"] < 0
    chart = Charts(f).all()["lag"]
    said = " ".join(str(getattr(a, "text", "")) for a in [*chart.center, *chart.above])
    assert "behind the CAS clock" in said
    assert "behind the CAS clock" in report.to_html()
    drawn = Charts(dcpfast.report(paused(tmp_path, cas_ahead_ns=-MS)).figures).all()["lag"]
    assert "behind the CAS clock" not in " ".join(
        str(getattr(a, "text", "")) for a in [*drawn.center, *drawn.above])
