"""Captures read by ``dcpfast.pcap.read_pcap`` cross-checked against Wireshark's dissector:
tshark decodes the same pcap files, and frame by frame, in each direction, the headers,
keys, frame infos, extras, stream requests and failover logs agree."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import dcpfast.streams
import dcpfast.testing as t
from dcpfast.pcap import CLIENT_TO_SERVER, SERVER_TO_CLIENT, read_pcap
from dcpfast.protocol import Datatype, Opcode, SnapshotFlag, Status

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(
    TSHARK is None, reason="tshark (Wireshark) is not installed: apt-get install tshark")

PORT = 11210
REAL_SERVER = Path(__file__).parent.parent / "data" / "real-server"
SID = 7                                         # the stream id of the hand-made stream
#: A server-duration frame info (response id 0): 42 encodes 333 microseconds.
DURATION = t.frame_info(0, b"\x00\x2a")
#: tshark field: dcpfast field, for the header fields every frame has.
HEADER = {"couchbase.magic": "magic", "couchbase.opcode": "opcode",
          "couchbase.extras.length": "extras_len", "couchbase.datatype": "datatype",
          "couchbase.total_bodylength": "body_len", "couchbase.cas": "cas"}
#: tshark field: dcpfast field, compared wherever tshark decodes the field. tshark 4.0
#: leaves some fields undecoded (Stream End's status and Set VBucket State's state as
#: unknown extras, a Rollback's seqno) and reads a version-2 marker's purge seqno as the
#: version-1 timestamp, without its high prepared seqno: those are not compared.
EXTRAS = {
    **{f"couchbase.extras.{name}": name for name in (
        "by_seqno", "rev_seqno", "expiration", "lock_time", "nru", "delete_time", "deleted",
        "marker_version", "max_visible_seqno", "high_completed_seqno")},
    "couchbase.flex_frame.frame.dcp_stream_id": "stream_id",
    "couchbase.extras.by_seqno_prepared": "prepared_seqno",
    "couchbase.extras.by_seqno_abort": "by_seqno",   # a Commit's: by_seqno, above
    "couchbase.extras.system_event_id": "event_id",
    "couchbase.extras.system_event_version": "event_version",
    "couchbase.extras.bytes_to_ack": "ack_bytes",
    "couchbase.extras.dcp_oso_snapshot_flags": "oso_flags"}
#: The fields of a Stream Request's extras, as ``dcpfast.streams.stream_requests`` names them.
REQUEST = ("flags", "start_seqno", "end_seqno", "vbucket_uuid", "snap_start_seqno",
           "snap_end_seqno")
#: Per opcode, the tshark fields whose meaning depends on it.
BY_OPCODE = {
    Opcode.SNAPSHOT_MARKER: {"couchbase.extras.start_seqno": "snap_start",
                             "couchbase.extras.end_seqno": "snap_end",
                             "couchbase.extras.flags": "snap_flags"},
    Opcode.MUTATION: {"couchbase.extras.flags": "flags"},
    # tshark files a Prepare's durability level (its last extras byte) under the
    # durability frame info's field name
    Opcode.PREPARE: {"couchbase.extras.flags": "flags",
                     "couchbase.flex_frame.frame.durability_req": "durability_level"},
    Opcode.OPEN: {"couchbase.extras.flags": "open_flags"},
    Opcode.STREAM_REQUEST: {"couchbase.extras.flags": "flags",
                            **{f"couchbase.extras.{name}": name for name in REQUEST[1:]}},
}


# -- the conversations --------------------------------------------------------------------


def _client() -> list[bytes]:
    """A consumer's handshake, stream requests, failover log, close, ack and noop answer."""
    return [
        t.hello([0x0F, 0x10, 0x12], agent=b"tshark-check", opaque=1),
        t.open(b"tshark-check", flags=0x25, opaque=2),
        t.control(b"enable_stream_id", b"true", opaque=3),
        t.stream_request(vbucket=5, opaque=0x105, flags=0x04, start=10, vbucket_uuid=0xABCDEF,
                         snap_start=5, snap_end=10, stream_id=SID),
        t.stream_request(vbucket=6, opaque=0x106, start=99, end=1000, vbucket_uuid=77),
        t.get_failover_log(vbucket=6, opaque=0x200),
        t.add_stream(flags=0x02, vbucket=9, opaque=0x201),
        t.buffer_ack(4096, opaque=0x202),
        t.response(Opcode.NOOP, opaque=0x300),
        t.close_stream(vbucket=5, stream_id=SID, opaque=0x203),
    ]


def _documents(**hdr) -> list[bytes]:
    """Document changes on collections (one-, two- and three-byte collection ids)."""
    doc = b'{"city":"Oslo"}'
    return [
        t.mutation(b"k1", doc, by_seqno=11, rev_seqno=3, flags=0x02000006, expiration=3600,
                   lock_time=9, nru=2, datatype=Datatype.JSON, collection_id=8, cas=1 << 60,
                   **hdr),
        t.mutation(b"k2", t.xattr_value({"_sync": "{}"}, doc), by_seqno=12,
                   datatype=Datatype.JSON | Datatype.XATTR, collection_id=0x1234, cas=5, **hdr),
        t.deletion(b"k1", by_seqno=13, rev_seqno=4, delete_time=1_700_000_000,
                   collection_id=8, **hdr),
        t.deletion(b"k2", by_seqno=19, rev_seqno=5, collection_id=0x1234, **hdr),    # V1
        t.expiration(b"k3", by_seqno=14, rev_seqno=2, delete_time=7, collection_id=0x12345,
                     **hdr),
        t.prepare(b"k4", doc, by_seqno=15, flags=3, expiration=60, datatype=Datatype.JSON,
                  collection_id=0, **hdr),
        t.commit(b"k4", prepared_seqno=15, commit_seqno=16, collection_id=0, **hdr),
        t.prepare(b"k5", b"", by_seqno=17, deleted=True, collection_id=9, **hdr),
        t.abort(b"k5", prepared_seqno=17, abort_seqno=18, collection_id=9, **hdr),
    ]


def _server() -> list[bytes]:
    """A producer's answers and stream: 0x18 responses with a server duration, failover
    logs, a rollback, markers of each version, documents, events and stream ends."""
    sid = dict(vbucket=5, opaque=0x105, stream_id=SID)
    return [
        t.hello_response([0x0F, 0x10, 0x12], opaque=1, framing=DURATION),
        t.response(Opcode.OPEN, opaque=2, framing=DURATION),
        t.response(Opcode.CONTROL, opaque=3),
        t.failover_log_response([(0xAABB, 100), (0xCCDD, 0)], opaque=0x105, framing=DURATION),
        t.rollback_response(42, opaque=0x106),
        t.failover_log_response([(77, 50)], opcode=Opcode.GET_FAILOVER_LOG, opaque=0x200),
        t.response(Opcode.ADD_STREAM, status=Status.NOT_MY_VBUCKET, opaque=0x201),
        t.snapshot_marker(10, 20, SnapshotFlag.MEMORY | SnapshotFlag.CHECKPOINT, **sid),
        t.create_collection(b"hotel", by_seqno=10, manifest_uid=2, scope_id=8,
                            collection_id=9, **sid),
        *_documents(**sid),
        t.snapshot_marker(21, 30, SnapshotFlag.DISK, version=0, max_visible_seqno=29,
                          high_completed_seqno=25, **sid),
        t.seqno_advanced(30, **sid),
        t.snapshot_marker(31, 40, SnapshotFlag.MEMORY, version=1, max_visible_seqno=40,
                          timestamp=123, **sid),
        t.oso_snapshot(1, **sid),
        t.oso_snapshot(2, **sid),
        t.noop(opaque=0x300),
        t.stream_end(1, **sid),
        t.response(Opcode.CLOSE_STREAM, status=Status.KEY_ENOENT, opaque=0x203,
                   framing=DURATION),
    ]


def _capture(path: Path, client: list[bytes], server: list[bytes], sizes=(1448,)) -> Path:
    """A clean pcap of one connection carrying ``client`` and ``server`` frames."""
    segments = t.tcp_conversation(b"".join(client), b"".join(server), sizes=sizes, seed=1)
    path.write_bytes(t.pcap_file(t.tcp_packets(segments)))
    return path


# -- the two readings -----------------------------------------------------------------------


def _tshark(path: Path) -> dict[str, list[dict]]:
    """tshark's memcached frames per direction, in stream order: each a dict of field name
    to the list of (shown, raw hex) of its occurrences."""
    run = subprocess.run([TSHARK, "-r", str(path), "-d", f"tcp.port=={PORT},couchbase",
                          "-o", "tcp.desegment_tcp_streams:TRUE", "-T", "pdml"],
                         capture_output=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    out: dict[str, list[dict]] = {CLIENT_TO_SERVER: [], SERVER_TO_CLIENT: []}
    for packet in ET.fromstring(run.stdout).iter("packet"):
        sport = packet.find("proto[@name='tcp']/field[@name='tcp.srcport']")
        direction = SERVER_TO_CLIENT if int(sport.get("show")) == PORT else CLIENT_TO_SERVER
        for proto in packet.findall("proto[@name='couchbase']"):
            fields: dict[str, list] = {}
            for field in proto.iter("field"):
                fields.setdefault(field.get("name"), []).append(
                    (field.get("show"), field.get("value")))
            out[direction].append(fields)
    return out


def _dcpfast(path: Path) -> dict[str, list[dict]]:
    """dcpfast's frames per direction, in stream order: each ``batch.frame(i)``, with a
    Stream Request's fields, an Open's flags and a failover log's entries added."""
    out: dict[str, list[dict]] = {CLIENT_TO_SERVER: [], SERVER_TO_CLIENT: []}
    for batch in read_pcap(path, ports=PORT, errors="strict"):
        assert not batch.errors
        frames = [dict(batch.frame(i)) for i in range(len(batch))]
        for row in dcpfast.streams.stream_requests(batch).to_pylist():
            frames[row["index"]].update({name: row[name] for name in REQUEST})
        for row in dcpfast.streams.opens(batch).to_pylist():
            frames[row["index"]]["open_flags"] = row["flags"]
        for row in dcpfast.streams.failover_logs(batch).to_pylist():
            frames[row["index"]].setdefault("failover_log", []).append(
                (row["vbucket_uuid"], row["seqno"]))
        out[batch.connection.direction] += frames
    for frames in out.values():
        frames.sort(key=lambda f: f["offset"])
    return out


# -- the comparison ---------------------------------------------------------------------------


def _shown(ts: dict, name: str, default: int | None = None) -> int | None:
    """tshark's one value of ``name`` as an int ("0x1f" or "31"), or ``default``."""
    (shown, _), = ts.get(name, [(None, None)])
    return default if shown is None else int(shown, 0)


def _raw(ts: dict, name: str) -> bytes:
    """The bytes of tshark's one field ``name`` (none where it shows no such field)."""
    (_, raw), = ts.get(name, [(None, "")])
    return bytes.fromhex(raw)


def _wire_key_len(frame: dict) -> int:
    """The header's key length: from the extras' end to where dcpfast's logical key ends."""
    start = frame["offset"] + 24 + frame["framing_len"] + frame["extras_len"]
    return frame["key_offset"] + frame["key_len"] - start if "key_offset" in frame else 0


def _check_header(ts: dict, frame: dict) -> None:
    """Every header field, in both magics' layouts."""
    for name, column in HEADER.items():
        assert _shown(ts, name) == frame[column], name
    # tshark shows the framing extras length of 0x08/0x18 frames only
    assert _shown(ts, "couchbase.flex_extras", 0) == frame["framing_len"]
    assert _shown(ts, "couchbase.key.length") == _wire_key_len(frame)
    assert _shown(ts, "couchbase.value.length") == frame.get("value_len", 0)
    # tshark displays the opaque little-endian; kv_engine echoes its bytes and every
    # client reads them big-endian, as dcpfast does: compare the bytes
    assert int.from_bytes(_raw(ts, "couchbase.opaque"), "big") == frame["opaque"]
    if "status" in frame:
        assert _shown(ts, "couchbase.status") == frame["status"]
    elif "vbucket" in frame:       # dcpfast leaves it out where it is no vbucket (HELLO...)
        assert _shown(ts, "couchbase.vbucket") == frame["vbucket"]


def _check_key(ts: dict, frame: dict) -> None:
    """The wire key, and tshark's collection split where dcpfast reads a collection id
    (tshark also splits keys that carry none: system event and DCP Open names)."""
    key = frame.get("key", b"")
    if "collection_id" in frame:
        assert _shown(ts, "couchbase.key.collection_id") == frame["collection_id"]
        assert _raw(ts, "couchbase.key.logical_key") == key
        key = t.leb128(frame["collection_id"]) + key
    assert _raw(ts, "couchbase.key") == key


def _check_extras(ts: dict, frame: dict) -> set[str]:
    """The extras, frame infos and failover log tshark decodes; the fields compared."""
    names = {**EXTRAS, **BY_OPCODE.get(frame["opcode"], {})}
    if "status" in frame:          # a response's extras are not its request's
        names = {n: c for n, c in names.items() if n.startswith("couchbase.flex")}
    compared = set()
    for name in names.keys() & ts.keys():
        column = names[name]
        if column == "high_completed_seqno" and not frame["snap_flags"] & SnapshotFlag.DISK:
            continue    # kv_engine fills and reads it for disk snapshots only (see columns.md)
        assert _shown(ts, name) == frame[column], name
        compared.add(name)
    if "couchbase.flex_frame.frame.duration" in ts:    # microseconds, as a float
        (shown, _), = ts["couchbase.flex_frame.frame.duration"]
        assert int(float(shown)) == frame["server_duration_us"]
        compared.add("couchbase.flex_frame.frame.duration")
    if "couchbase.dcp.failover_log" in ts:
        log = list(zip(*([int(v, 0) for v, _ in ts[f"couchbase.dcp.failover_log.{name}"]]
                         for name in ("vbucket_uuid", "seqno"))))
        assert log == frame["failover_log"]
        compared.add("couchbase.dcp.failover_log")
    return compared


def _compare(path: Path, sent: dict[str, int]) -> set[str]:
    """Assert that tshark and dcpfast read the same ``sent`` frames per direction from
    ``path``; the tshark fields compared beyond the header."""
    tshark, ours = _tshark(path), _dcpfast(path)
    compared = set()
    for direction, count in sent.items():
        assert len(tshark[direction]) == len(ours[direction]) == count, direction
        for i, (ts, frame) in enumerate(zip(tshark[direction], ours[direction])):
            try:
                _check_header(ts, frame)
                _check_key(ts, frame)
                compared |= _check_extras(ts, frame)
            except AssertionError as e:
                raise AssertionError(f"{direction} frame {i}: {frame}") from e
    return compared


# -- the tests -------------------------------------------------------------------------------


def test_hand_made_conversation(tmp_path):
    client, server = _client(), _server()
    path = _capture(tmp_path / "dcp.pcap", client, server, sizes=(50, 7, 300))
    compared = _compare(path, {CLIENT_TO_SERVER: len(client), SERVER_TO_CLIENT: len(server)})
    every = {*EXTRAS, *(n for names in BY_OPCODE.values() for n in names),
             "couchbase.flex_frame.frame.duration", "couchbase.dcp.failover_log"}
    assert compared == every


@pytest.mark.parametrize("options", [
    dict(seed=1, stream_ids=True),
    dict(seed=2, sync_writes=True, marker_version=2),
    dict(seed=3, collections=False, marker_version=0, delete_times=False),
], ids=["stream-ids", "sync-writes", "no-collections"])
def test_synthetic_conversations(tmp_path, options):
    client, server = t.synthetic_conversation(80, vbuckets=3, **options)
    path = _capture(tmp_path / "dcp.pcap", [f.data for f in client], [f.data for f in server],
                    sizes=(700, 13, 2000))
    _compare(path, {CLIENT_TO_SERVER: len(client), SERVER_TO_CLIENT: len(server)})


def test_real_server_frames(tmp_path):
    frames = [(REAL_SERVER / f"frame_0x{op}.bin").read_bytes() for op in ("56", "5f", "57")]
    path = _capture(tmp_path / "dcp.pcap", [], frames)
    compared = _compare(path, {CLIENT_TO_SERVER: 0, SERVER_TO_CLIENT: len(frames)})
    assert {"couchbase.extras.by_seqno", "couchbase.flex_frame.frame.dcp_stream_id"} <= compared
