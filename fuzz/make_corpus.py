"""Write a fuzz target's seed corpus, made with ``dcpfast.testing``, in the input format
its harness reads (see each ``fuzz_*.py``).

    python fuzz/make_corpus.py [DIRECTORY [TARGET]]

TARGET is one of ``scan`` (the default), ``values``, ``events``, ``pcap``, ``files`` and
``reassembly``;
DIRECTORY defaults to ``fuzz/corpus``.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import sys
from pathlib import Path

import cramjam
import lz4.frame
import orders

import dcpfast
from dcpfast import protocol as P
from dcpfast import testing as t

try:
    from compression import zstd
except ImportError:                      # Python < 3.14
    from backports import zstd


def scan_seeds() -> list[bytes]:
    """Streams and single frames of every kind, and a few compressed streams (whole and
    cut short); the first byte is the scan harness's mode byte."""
    out = []
    for seed in range(12):
        for collections in (True, False):
            stream = t.synthetic_stream(6, seed=seed, vbuckets=2, collections=collections,
                                        snapshot_size=3, sync_writes=seed % 3 == 0,
                                        marker_version=(None, 0, 1, 2)[seed % 4],
                                        stream_ids=seed % 3 == 1)
            out.append(bytes([collections | (seed % 4) << 2]) + stream[:4096])
    frames = t.synthetic_frames(40, seed=99, vbuckets=1, sync_writes=True)
    for i, f in enumerate(frames):
        out.append(bytes([1 | (i % 2) << 1]) + f.data)
    stream = t.synthetic_stream(4, seed=7, vbuckets=1, snapshot_size=2)
    for i, packed in enumerate((gzip.compress(stream), zstd.compress(stream),
                                lz4.frame.compress(stream))):
        out.append(bytes([1 | i << 2]) + packed)
        out.append(bytes([1 | (i + 3) << 2]) + packed[:len(packed) * 2 // 3])
    return out


def _value_record(opcode_index: int, datatype: int, value: bytes) -> bytes:
    """One value in the values harness's format: kind byte, length byte, value."""
    return bytes([datatype | opcode_index << 3, len(value)]) + value


def values_seeds() -> list[bytes]:
    """Plain, JSON, xattr, Snappy and Snappy-with-xattr values, sound and damaged; the
    first byte is the values harness's option byte."""
    body = b'{"name":"fuzz","n":[1,2,3]}'
    xattr = t.xattr_value({"_sync": '{"rev":"1-a"}', "meta": "\u00e9t\u00e9"}, body)
    snappy = bytes(cramjam.snappy.compress_raw(body * 3))
    snappy_x = bytes(cramjam.snappy.compress_raw(xattr))
    dt = P.Datatype
    records = [
        (0, int(dt.JSON), body), (1, 0, b""), (0, int(dt.XATTR | dt.JSON), xattr),
        (0, int(dt.SNAPPY | dt.JSON), snappy), (3, int(dt.SNAPPY | dt.XATTR), snappy_x),
        (2, int(dt.XATTR), t.xattr_blob({})), (0, int(dt.SNAPPY), snappy[:-3]),
        (0, int(dt.XATTR), xattr[:9]), (0, int(dt.SNAPPY), b"\xff\xff\xff\xff\xff\x01"),
        (1, int(dt.XATTR), t.xattr_blob({"a": "1"}) + t.xattr_blob({"a": "1"})[4:]),
    ]
    out = []
    for options in range(8):
        chosen = records[options:] + records[:options]
        out.append(bytes([options]) + b"".join(_value_record(*r) for r in chosen[:4]))
    out += [bytes([i % 8]) + _value_record(*r) for i, r in enumerate(records)]
    return out


def events_seeds() -> list[bytes]:
    """System events of every kind and version; the events harness's format is event id,
    version and key length bytes, then the key and the value."""
    common = dict(manifest_uid=5, scope_id=8)
    frames = [
        t.create_collection(b"c1", by_seqno=1, collection_id=9, **common),
        t.create_collection(b"c2", by_seqno=2, collection_id=10, max_ttl=60, **common),
        t.create_collection(b"c3", by_seqno=3, collection_id=11, version=2, history=True,
                            **common),
        t.modify_collection(b"c3", by_seqno=4, collection_id=11, history=False, **common),
        t.drop_collection(by_seqno=5, collection_id=9, **common),
        t.drop_collection(by_seqno=6, collection_id=10, version=2, system=True, **common),
        t.create_scope(b"s1", by_seqno=7, **common),
        t.create_scope(b"s2", by_seqno=8, version=2, manifest_uid=6, scope_id=9),
        t.drop_scope(by_seqno=9, **common),
        t.drop_scope(by_seqno=10, version=2, **common),
    ]
    data = b"".join(frames)
    batch = dcpfast.scan(data, collections=True)
    out = []
    for i in range(len(batch)):
        at, size = int(batch["key_offset"][i]), int(batch["key_len"][i])
        key = data[at:at + size]
        at, size = int(batch["value_offset"][i]), int(batch["value_len"][i])
        out.append(struct.pack("BBB", int(batch["event_id"][i]),
                               int(batch["event_version"][i]), len(key)) + key +
                   data[at:at + size])
    return out


def pcap_seeds() -> list[bytes]:
    """Small pcap and pcapng captures of DCP conversations (clean, reordered, with a lost
    segment, on other link types); the first byte is the pcap harness's mode byte."""
    client = t.open(b"fuzz") + t.stream_request(vbucket=3, opaque=1)
    server = t.synthetic_stream(3, seed=5, vbuckets=1, snapshot_size=2)[:1200]
    out = []
    for i, (link, conversation) in enumerate([
            (1, dict()), (113, dict(reorder=0.3, seed=1)), (1, dict(drop=[(False, 1)])),
            (276, dict(retransmit=0.3, seed=2)), (0, dict(handshake=False))]):
        packets = t.tcp_packets(t.tcp_conversation(client, server, sizes=(300, 170),
                                                   **conversation), link=link)
        capture = t.pcapng_file(packets, links=(link,)) if i % 2 else \
            t.pcap_file(packets, link=link, nanoseconds=i == 4)
        out.append(bytes([i]) + capture)
    return out


def files_seeds() -> list[bytes]:
    """Streams with a mode byte (collections, shorten or grow, batch size) and a cut; the
    files harness's format."""
    out = []
    for seed in range(8):
        stream = t.synthetic_stream(8, seed=seed, vbuckets=2, snapshot_size=3,
                                    collections=seed % 2 == 0)[:3000]
        cut = (len(stream) * (seed + 1) // 9).to_bytes(2, "big")
        out.append(bytes([(seed % 2 == 0) | (seed % 4 >= 2) << 1 | seed << 2]) + cut + stream)
    return out


SEEDS = {"scan": scan_seeds, "values": values_seeds, "events": events_seeds,
         "pcap": pcap_seeds, "files": files_seeds, "reassembly": orders.seeds}


def write(directory, target: str = "scan") -> int:
    """Write ``target``'s seeds into ``directory`` (named by their SHA-1); their number."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    seeds = SEEDS[target]()
    for data in seeds:
        (path / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(seeds)


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus",
          sys.argv[2] if len(sys.argv) > 2 else "scan")
