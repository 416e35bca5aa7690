"""What ``dcpfast info`` says besides its counts (``dcpfast.cli.glance``): the time span, the
collections' names and a line of stream health."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dcpfast.cli import main
from dcpfast.testing import SAMPLE, SAMPLE_PCAP
from tests.report_scenarios import known


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_info_tells_time_names_and_health():
    import datetime as dt

    from dcpfast.pcap import read_pcap

    stamps = [t for b in read_pcap(SAMPLE_PCAP) for t in b.timestamps.tolist()]
    first, last = (dt.datetime.fromtimestamp(t / 1e9, dt.timezone.utc) for t in
                   (min(stamps), max(stamps)))
    text = run("info", SAMPLE_PCAP).output
    assert f"  time: {first:%Y-%m-%d %H:%M:%S.%f}"[:-3] + f" to {last:%Y-%m-%d %H:%M:%S.%f}"[:-3] \
        + f" UTC (capture timestamps), {(max(stamps) - min(stamps)) / 1e9:,.3f} s" in text
    assert "collection names: 0x0 _default._default, 0x8 inventory.airline, " \
           "0x9 inventory.hotel, 0xa _default.route" in text
    health = [line for line in text.splitlines() if "stream health" in line]
    assert health == [f"  stream health: 4 vbucket streams, 0 anomalies, 0 rollbacks, "
                      f"ended: 4 ok; streams over time, stalls and flow control: dcpfast "
                      f"report {SAMPLE_PCAP} -o report.html"]
    dump = json.loads(run("info", "--json", SAMPLE).output)[0]
    assert dump["time"]["clock"] == "cas" and dump["time"]["first"] < dump["time"]["last"]
    assert dump["collection_names"]["0x8"] == "inventory.airline"
    assert dump["stream_health"] == {"streams": 4, "anomalies": 0, "rollbacks": 0,
                                     "ends": {"ok": 4}}


def test_info_health_counts_rollbacks(tmp_path):
    path = tmp_path / "known.pcap"
    path.write_bytes(known().capture())
    health = json.loads(run("info", "--json", path).output)[0]["stream_health"]
    assert health == {"streams": 2, "anomalies": 1, "rollbacks": 1,
                      "ends": {"closed": 1, "ok": 1}}
