"""Capture decoding speed: ``read_pcap`` on a tcpdump-like capture against the same raw dump.

    python benchmarks/bench_pcap.py [--items N] [--repeat R] [--json [PATH]]
    python benchmarks/bench_pcap.py --quick

The corpus is a deterministic DCP conversation from ``dcpfast.testing.synthetic_stream``
sent server to client in 1448-byte TCP segments over Ethernet, with the client's
buffer acknowledgements and a pure ACK for every second server segment going the other
way, written as a pcap file next to the raw dump of the server's bytes (both cached in
``benchmarks/results/cache/``). Before anything is timed, the frames decoded from the
capture are checked against the raw dump's, column for column; a failed check is the
only way this script exits non-zero. Timings are reported (best of ``--repeat`` after a
warm-up), never judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json
import platform
import sys
from pathlib import Path

import numpy as np

import dcpfast
from dcpfast import pcap, testing

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.common import arguments, settle  # noqa: E402
from suite.timing import best  # noqa: E402

CACHE = HERE / "results" / "cache"
DEFAULT_JSON = HERE / "results" / "bench_pcap.json"
CORPUS = dict(seed=0, vbuckets=4, collections=True, sync_writes=True, value_size=205)
DEFAULTS = dict(items=440_000, repeat=5)    # about 120 MB of DCP frames
QUICK = dict(items=44_000, repeat=3)
MSS = 1448


def corpus(items: int) -> tuple[Path, Path]:
    """The raw dump and the capture of the same server bytes, built once and cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    stem = CACHE / f"pcap-{items}-{CORPUS['seed']}"
    raw, capture = stem.with_suffix(".dcp"), stem.with_suffix(".pcap")
    if raw.exists() and capture.exists():
        return raw, capture
    server = testing.synthetic_stream(items, **CORPUS)
    segments = testing.tcp_segments(server, (MSS,), client=False)
    acks = b"".join(testing.buffer_ack(20 * MSS, opaque=i) for i in range(len(segments) // 20))
    sent, out = 0, [testing.TcpSegment(True, -1, b"", testing.TCP_SYN),
                    testing.TcpSegment(False, -1, b"", testing.TCP_SYN | testing.TCP_ACK)]
    for i, seg in enumerate(segments):
        out.append(seg)
        if i % 20 == 19 and sent < len(acks):
            ack = acks[sent:sent + 24]          # one buffer-ack frame per 20 segments
            out.append(testing.TcpSegment(True, sent, ack))
            sent += len(ack)
        elif i % 2:
            out.append(testing.TcpSegment(True, sent, b"", testing.TCP_ACK))
    packets = testing.tcp_packets(out, step_ns=12_000)
    tmp = capture.with_suffix(".tmp")
    tmp.write_bytes(testing.pcap_file(packets))
    raw.write_bytes(server)
    tmp.rename(capture)
    return raw, capture


def server_batches(capture: Path) -> list:
    return [b for b in pcap.read_pcap(capture) if b.connection.direction == pcap.SERVER_TO_CLIENT]


def check(raw: Path, capture: Path) -> int:
    whole = dcpfast.read(raw)
    got = server_batches(capture)
    for name in whole.columns:
        column = np.concatenate([b[name] for b in got])
        if not np.array_equal(column, whole[name]):
            raise SystemExit(f"check failed: column {name} differs between capture and dump")
    if any(b.errors for b in got):
        raise SystemExit("check failed: the capture reported damage")
    return len(whole)


def main(argv=None) -> int:
    args = settle(arguments(__doc__, DEFAULTS, QUICK, DEFAULT_JSON), argv, DEFAULTS, QUICK)
    raw, capture = corpus(args.items)
    frames = check(raw, capture)
    data = raw.read_bytes()
    size, capture_size = len(data), capture.stat().st_size

    def count(batches):
        return sum(len(b) for b in batches)

    runs = {
        "read_pcap(path), all columns": lambda: count(pcap.read_pcap(capture)),
        "read_pcap(path), 5 columns": lambda: count(pcap.read_pcap(
            capture, columns=["offset", "opcode", "vbucket", "by_seqno", "key_len"])),
        "scan(bytes in memory)": lambda: len(dcpfast.scan(data)),
        "read(raw dump path)": lambda: len(dcpfast.read(raw)),
        "iter_batches(raw dump path)": lambda: count(dcpfast.iter_batches(raw)),
    }
    seconds = {name: best(fn, args.repeat) for name, fn in runs.items()}
    capture_time = seconds["read_pcap(path), all columns"]
    print(f"corpus: {frames:,} frames, {size / 1e6:.1f} MB of DCP; capture "
          f"{capture_size / 1e6:.1f} MB in {MSS}-byte segments "
          f"({dcpfast.IMPLEMENTATION} core, {platform.python_version()}, "
          f"numpy {np.__version__}, best of {args.repeat})")
    print(f"{'measurement':<32} {'frames/s':>10} {'DCP MB/s':>9} {'capture vs this':>16}")
    rows = {}
    for name, s in seconds.items():
        ratio = s / capture_time
        rows[name] = dict(seconds=s, frames_per_s=frames / s, mb_per_s=size / s / 1e6,
                          capture_speed_ratio=ratio if "read_pcap" not in name else None)
        shown = "" if "read_pcap" in name else f"{ratio:.0%}"
        print(f"{name:<32} {frames / s / 1e6:>8.2f} M {size / s / 1e6:>9.0f} {shown:>16}")
    print(f"capture file read at {capture_size / capture_time / 1e6:.0f} MB/s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(
            frames=frames, dcp_bytes=size, capture_bytes=capture_size, items=args.items,
            repeat=args.repeat, implementation=dcpfast.IMPLEMENTATION,
            python=platform.python_version(), numpy=np.__version__, results=rows), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
