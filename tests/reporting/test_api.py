"""``dcpfast.report``: its figures against conversations with known timing (the plain-Python
model of ``report_scenarios``), as captures and as dumps, whole and in pieces; the JSON
contract; bad and empty input; threads. The bounded series it is built on are tested in
test_grid.py and test_content.py."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.reporting import Report
from dcpfast.reporting.clock import iso
from dcpfast.reporting.inputs import Options, plan, read_unit
from tests.report_scenarios import MS, START, S, expected, known, randomized

STALL = 5 * S
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def known_files(tmp_path_factory):
    """The known conversation as a capture, and as a server's and a client's dump."""
    where = tmp_path_factory.mktemp("known")
    script = known()
    server, client = script.dumps()
    paths = {"pcap": where / "known.pcap", "server": where / "server.dcp",
             "client": where / "client.dcp"}
    paths["pcap"].write_bytes(script.capture())
    paths["server"].write_bytes(server)
    paths["client"].write_bytes(client)
    return script, paths


def _stalls(figures) -> list[tuple]:
    return [(None if s["vbucket"] is None else (s["vbucket"], s["stream_id"] or 0),
             s["start"], s["end"], s["ongoing"]) for s in figures["stalls"]]


def _model_stalls(model) -> list[tuple]:
    return [(key, iso(start), iso(end), ongoing) for key, start, end, ongoing in model["stalls"]]


def check_against_model(figures: dict, script, *, capture: bool = True) -> None:
    """Every figure the model predicts, as the report gives it."""
    model = expected(script, STALL)
    assert figures["frames"] == model["frames"]
    assert figures["bytes"] == model["bytes"]
    assert _stalls(figures) == _model_stalls(model)
    assert figures["noops"]["count"] == model["noops"]
    rtt = figures["noops"]["rtt_ms"]
    if model["rtt_ms"]:
        assert rtt["median"] == pytest.approx(float(np.median(model["rtt_ms"])), abs=1e-3)
        assert rtt["max"] == pytest.approx(max(model["rtt_ms"]), abs=1e-3)
    else:
        assert rtt is None
    (flow,) = figures["flow_control"]
    assert (flow["buffer_bytes"], flow["acks"]) == (model["buffer"], model["acks"])
    assert flow["max_unacked_bytes"] == model["max_unacked"]
    if capture:
        lag = figures["lag_ms"]
        assert lag["count"] == len(model["lag_ms"])
        # the CAS clock ticks every 65.536 us: a change's lag is its own to within that
        assert lag["median"] == pytest.approx(float(np.median(model["lag_ms"])), abs=0.07)
        assert lag["max"] == pytest.approx(max(model["lag_ms"]), abs=0.07)
    streams = {(s["vbucket"], s["stream_id"] or 0): s for s in figures["streams"]}
    assert set(streams) == set(model["streams"])
    for key, want in model["streams"].items():
        got = streams[key]
        assert got["requests"] == want["requests"]
        assert got["rollback_seqnos"] == want["rollbacks"]
        assert got["rollbacks"] == len(want["rollbacks"])
        assert (got["end"], got["snapshots"], got["last_seqno"], got["items"]) == \
            (want["end"], want["snapshots"], want["last_seqno"], want["items"])


def test_the_known_capture(known_files):
    script, paths = known_files
    figures = dcpfast.report(paths["pcap"]).figures
    check_against_model(figures, script)
    assert figures["time"] == {"first": iso(START), "last": iso(START + 12_010 * MS),
                               "clock": "capture", "seconds": 12.01}
    (stall,) = figures["stalls"]
    assert (stall["vbucket"], stall["seconds"]) == (5, pytest.approx(8.1))
    assert stall["at_flow_control_limit"] is False
    events = {s["vbucket"]: [e["what"] for e in s["events"]] for s in figures["streams"]}
    assert events[9] == ["request", "rollback", "request", "accepted", "end"]
    assert events[5] == ["request", "accepted", "end"]
    assert figures["anomaly_counts"] == {"ended_in_snapshot": 1}    # vb 9 closed mid-snapshot
    assert figures["connections"][0]["unplaced_responses"] == 0
    assert figures["warnings"] == []


@pytest.mark.parametrize("seed", range(6))
def test_random_conversations_as_the_model_says(seed, tmp_path):
    script = randomized(seed)
    path = tmp_path / "random.pcap"
    path.write_bytes(script.capture())
    check_against_model(dcpfast.report(path).figures, script)


def test_a_stall_threshold_of_ones_choosing(known_files):
    script, paths = known_files
    assert dcpfast.report(paths["pcap"], stall_seconds=9).figures["stalls"] == []
    short = dcpfast.report(paths["pcap"], stall_seconds=0.15).figures
    assert _stalls(short) == _model_stalls(expected(script, 150 * MS))
    # vb 9's items come 0.2 s apart: while vb 5 is silent, so is the connection
    assert {s["vbucket"] for s in short["stalls"]} == {None, 5, 9}


def test_the_dumps_on_the_cas_clock(known_files):
    """The server's dump with the client's beside it, in either order: one connection, the
    requests from the client, the times from the CAS; no arrival times, so no NOOP round
    trips and no unacknowledged bytes."""
    script, paths = known_files
    model = expected(script, STALL)
    for order in (["server", "client"], ["client", "server"]):
        figures = dcpfast.report([paths[k] for k in order]).figures
        assert figures["time"]["clock"] == "cas"
        assert [c["name"] for c in figures["connections"]] == ["server.dcp + client.dcp"]
        assert [i["side"] for i in figures["inputs"]] == ["client", "server"]   # read so
        assert figures["frames"] == model["frames"]
        streams = {s["vbucket"]: s for s in figures["streams"]}
        assert (streams[9]["requests"], streams[9]["rollback_seqnos"]) == (2, [7])
        assert figures["noops"] == {"count": 2, "answered": 0, "rtt_ms": None}
        (flow,) = figures["flow_control"]
        assert (flow["buffer_bytes"], flow["acks"], flow["max_unacked_bytes"]) == \
            (4096, model["acks"], None)
        assert figures["lag_ms"] is None
        # vb 5's silence is in its documents' CAS times too: 250 ms earlier each
        (stall,) = figures["stalls"]
        assert stall["vbucket"] == 5 and stall["seconds"] == pytest.approx(8.1, abs=1e-3)
        assert any("CAS clock" in w for w in figures["warnings"])


def test_a_server_dump_alone_and_compressed(known_files, tmp_path):
    _, paths = known_files
    plain = dcpfast.report(paths["server"]).figures
    packed = tmp_path / "server.dcp.gz"
    packed.write_bytes(gzip.compress(paths["server"].read_bytes()))
    squeezed = dcpfast.report(packed).figures
    assert squeezed["inputs"][0]["compression"] == "gzip"
    for name in ("frames", "bytes", "time", "documents", "series"):
        assert squeezed[name] == plain[name]
    for name in ("streams", "stalls"):
        for mine, theirs in zip(squeezed[name], plain[name], strict=True):
            assert {**mine, "connection": None} == {**theirs, "connection": None}
    assert {s["vbucket"]: s["requests"] for s in plain["streams"]} == {5: 0, 9: 0}


def test_batches_cut_anywhere_give_the_same_figures(known_files):
    """Stalls, carried times and key counts do not depend on where batches end."""
    _, paths = known_files
    units = plan([paths["client"], paths["server"]])
    whole = Report.of(read_unit(units[0], Options())).figures
    for size in (4096, 4099, 20_000):
        cut = Report.of(read_unit(units[0], Options(batch_bytes=size))).figures
        assert {k: v for k, v in cut.items() if k != "generator"} == \
            {k: v for k, v in whole.items() if k != "generator"}


def test_many_inputs_on_threads_as_one_after_another(tmp_path):
    paths = []
    for seed in range(5):
        paths.append(tmp_path / f"c{seed}.pcap")
        paths[-1].write_bytes(randomized(seed).capture(client=(f"10.1.0.{seed}", 40000)))
    one = dcpfast.report(paths, threads=1).figures
    many = dcpfast.report(paths, threads=4).figures
    assert one == many
    assert len(one["connections"]) == 5
    assert [c["name"] for c in one["connections"]][0] == "10.1.0.0:40000 -> 10.0.0.2:11210"
    # the same connection in two files is two connections, told apart
    twice = dcpfast.report([paths[0], paths[0]]).figures
    assert [c["name"] for c in twice["connections"]] == [
        "10.1.0.0:40000 -> 10.0.0.2:11210", "10.1.0.0:40000 -> 10.0.0.2:11210 #2"]


def test_the_json_contract(known_files):
    _, paths = known_files
    report = dcpfast.report(paths["pcap"])
    figures = json.loads(report.to_json())
    assert figures == report.figures
    assert figures["version"] == 1
    for key in ("frames", "bytes", "time", "streams", "stalls", "noops", "flow_control",
                "anomalies"):
        assert key in figures
    assert set(figures["streams"][0]) >= {"connection", "vbucket", "stream_id", "requests",
                                          "rollbacks", "end", "snapshots", "last_seqno"}
    assert set(figures["stalls"][0]) >= {"connection", "vbucket", "start", "seconds"}
    assert set(figures["noops"]) >= {"count", "rtt_ms"}
    assert set(figures["flow_control"][0]) >= {"connection", "buffer_bytes", "acks",
                                               "max_unacked_bytes"}
    assert set(figures["anomalies"][0]) >= {"kind", "vbucket", "offset", "detail"}
    times = [figures["time"]["first"], figures["time"]["last"], figures["series"]["start"],
             *(s[k] for s in figures["stalls"] for k in ("start", "end")),
             *(e["time"] for s in figures["streams"] for e in s["events"])]
    assert all(ISO.match(x) for x in times), times
    assert report.table("streams").num_rows == 2
    assert report.table("stalls").column("vbucket").to_pylist() == [5]
    with pytest.raises(ValueError, match="no table"):
        report.table("frames")


def test_an_empty_input_says_so(tmp_path):
    empty = tmp_path / "empty.dcp"
    empty.write_bytes(b"")
    figures = dcpfast.report(empty).figures
    assert figures["frames"] == 0 and figures["streams"] == [] and figures["stalls"] == []
    assert figures["time"] == {"first": None, "last": None, "clock": "cas", "seconds": None}
    assert any("no DCP frames" in w for w in figures["warnings"])
    json.loads(dcpfast.report(empty).to_json())
    with pytest.raises(ValueError, match="no input"):
        dcpfast.report([])


def test_answers_to_no_request_are_counted_not_placed(tmp_path):
    """A server dump that begins with Stream Request answers to requests it never saw:
    they open no stream and the connection counts them."""
    path = tmp_path / "answers.dcp"
    path.write_bytes(t.failover_log_response([(7, 0)], opaque=41)
                     + t.rollback_response(12, opaque=42))
    figures = dcpfast.report(path).figures
    assert figures["streams"] == []
    assert figures["connections"][0]["unplaced_responses"] == 2


def test_captures_and_dumps_are_not_mixed(known_files):
    _, paths = known_files
    with pytest.raises(ValueError, match="report them apart"):
        dcpfast.report([paths["pcap"], paths["server"]])


def test_capture_gaps_are_anomalies_in_either_mode(tmp_path):
    """Bytes the capture lost are reported, never raised (they are capture loss): the
    report lists them and warns that its figures miss what they held."""
    script = known()
    events = [(f.time, f.client, f.data) for f in script.frames]
    packets = t.timed_packets(events, mss=200)
    server = [k for k, (_, frame) in enumerate(packets) if b"\x0a\x00\x00\x02" in frame[26:30]]
    del packets[server[len(server) // 2]]                       # one server segment lost
    path = tmp_path / "gap.pcap"
    path.write_bytes(t.pcap_file(packets, nanoseconds=True))
    for mode in ("strict", "skip"):
        figures = dcpfast.report(path, errors=mode).figures
        assert figures["anomaly_counts"].get("capture_gap") == 1
        (gap,) = [a for a in figures["anomalies"] if a["kind"] == "capture_gap"]
        assert gap["side"] == "server" and ISO.match(gap["time"])
        assert any("skipped" in w for w in figures["warnings"])
        assert figures["frames"] < expected(script, STALL)["frames"]


def test_a_damaged_dump_raises_or_is_listed(known_files, tmp_path):
    _, paths = known_files
    data = bytearray(paths["server"].read_bytes())
    at = int(dcpfast.scan(bytes(data))["offset"][50])
    data[at] = 0x42                                             # a magic no frame has
    path = tmp_path / "damaged.dcp"
    path.write_bytes(bytes(data))
    with pytest.raises(dcpfast.DcpFormatError) as raised:
        dcpfast.report(path)
    assert raised.value.source == path
    figures = dcpfast.report(path, errors="skip").figures
    assert figures["anomaly_counts"]["damaged_bytes"] >= 1
    damage = [a for a in figures["anomalies"] if a["kind"] == "damaged_bytes"]
    assert damage[0]["offset"] == at and "bytes" in damage[0]["detail"]


def test_a_damaged_capture_file_raises_or_is_listed(tmp_path):
    data = bytearray(known().capture())
    data[24 + 8:24 + 12] = (1 << 30).to_bytes(4, "little")     # a record longer than the file
    path = tmp_path / "damaged.pcap"
    path.write_bytes(bytes(data))
    with pytest.raises(dcpfast.CaptureFormatError):
        dcpfast.report(path)
    figures = dcpfast.report(path, errors="skip").figures
    assert figures["anomaly_counts"]["capture_damage"] >= 1


def test_bad_options():
    with pytest.raises(ValueError, match="errors"):
        dcpfast.report(t.SAMPLE_PCAP, errors="lenient")
    with pytest.raises(ValueError, match="stall_seconds"):
        dcpfast.report(t.SAMPLE_PCAP, stall_seconds=0)


def test_the_bundled_capture_shows_its_stall():
    figures = dcpfast.report(t.SAMPLE_PCAP).figures
    (stall,) = figures["stalls"]
    assert stall["vbucket"] == 848 and 12 < stall["seconds"] < 13
    assert figures["noops"]["answered"] == figures["noops"]["count"] == 1
    assert not figures["anomalies"] and not figures["warnings"]
    assert len(figures["streams"]) == 4


def _all_vb_seqnos(pairs, **hdr) -> bytes:
    """A GetAllVbSeqnos success response listing ``pairs`` (vbucket, seqno)."""
    return t.response(0x48, value=b"".join(vb.to_bytes(2, "big") + seqno.to_bytes(8, "big")
                                           for vb, seqno in pairs), **hdr)


def test_streams_against_the_servers_high_seqnos(tmp_path):
    """A capture that holds the server's GetAllVbSeqnos answer: each stream has the high
    seqno the server gave for its vbucket, those that did not reach it are listed (the
    furthest short first) and named in the page's headline; the last answer counts."""
    from dcpfast.testing.capture import pcap_file, timed_packets

    def items(vb, op, seqnos):
        return t.snapshot_marker(seqnos[0], seqnos[-1], opaque=op, vbucket=vb) + b"".join(
            t.mutation(b"k%d" % s, b"v", by_seqno=s, opaque=op, vbucket=vb) for s in seqnos)
    events = [
        (START, True, t.frame(0x48) + t.stream_request(vbucket=9, opaque=7) +
         t.stream_request(vbucket=10, opaque=8) + t.stream_request(vbucket=11, opaque=9)),
        (START + MS, False, _all_vb_seqnos([(9, 3), (10, 2), (11, 1)]) +
         t.failover_log_response([(5, 0)], opaque=7) +
         t.failover_log_response([(6, 0)], opaque=8) +
         t.failover_log_response([(7, 0)], opaque=9)),
        (START + 2 * MS, False, items(9, 7, [1, 2]) + items(10, 8, [1, 2]) +
         items(11, 9, [1, 2, 3])),
        (START + 3 * MS, True, t.frame(0x48)),
        (START + 4 * MS, False, _all_vb_seqnos([(9, 6), (10, 2), (11, 3), (12, 9)])),
    ]
    path = tmp_path / "seqnos.pcap"
    path.write_bytes(pcap_file(timed_packets(events)))
    report = dcpfast.report(path)
    figures = report.figures
    got = {s["vbucket"]: (s["last_seqno"], s["server_seqno"]) for s in figures["streams"]}
    assert got == {9: (2, 6), 10: (2, 2), 11: (3, 3)}
    assert [(b["vbucket"], b["last_seqno"], b["server_seqno"])
            for b in figures["behind_server"]] == [(9, 2, 6)]
    page = tmp_path / "page.html"
    pytest.importorskip("bokeh")
    report.to_html(page)
    assert "captured to seqno 2 of the 6 the server gave (GetAllVbSeqnos)" in \
        page.read_text()


def test_the_servers_own_response_times(tmp_path):
    """Responses with magic 0x18 that carry the server's duration (frame info 0) give its
    spread in ms, as kv_engine decodes each code; responses without one, or that decode to
    0 µs, are not counted; a capture with none says null, and the page says it in words."""
    codes = [10, 3000, 250, 1, 65535, 77]
    framed = [t.response(0x53, opaque=i, value=bytes(16),
                         framing=t.frame_info(1, b"\x00\x05")
                         + t.frame_info(0, c.to_bytes(2, "big")))
              for i, c in enumerate(codes)]
    server = b"".join(framed) + t.response(0x53, opaque=9, value=bytes(16),
                                           framing=t.frame_info(1, b"\x00\x07"))
    path = tmp_path / "server.dcp"
    path.write_bytes(server)
    report = dcpfast.report(path)
    kept = np.array([c ** 1.74 / 2 // 1 for c in codes if c ** 1.74 / 2 >= 1]) / 1000
    got = report.figures["server_duration_ms"]
    assert got["count"] == len(kept) == 5
    assert got["max"] == pytest.approx(kept.max(), abs=1e-3)
    assert got["median"] == pytest.approx(float(np.median(kept)), abs=1e-3)
    assert got["max"] == pytest.approx(120125.042)
    plain = tmp_path / "plain.dcp"
    plain.write_bytes(t.response(0x53, opaque=1, value=bytes(16)))
    assert dcpfast.report(plain).figures["server_duration_ms"] is None
    pytest.importorskip("bokeh")
    page = tmp_path / "page.html"
    report.to_html(page)
    assert "server&#x27;s own time from request to answer, in 5 responses: median" \
        in page.read_text()
