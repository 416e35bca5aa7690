"""What the command's tests share: the command run in this process, a clean ending, the
codecs every input may come in, the bundled sample's frame count as the command prints
it, a dump whose names and keys hold terminal escapes, and dumps big enough to take a
while."""

from __future__ import annotations

import gzip
import os
import random
import sys

from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.testing import SAMPLE

#: The environment of a child process that runs this dcpfast.
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def command(*args) -> list[str]:
    """The dcpfast command with ``args``, run by this interpreter (in a child process)."""
    return [sys.executable, "-m", "dcpfast", *map(os.fspath, args)]


def clean(result, code):
    """The command ended with ``code``, with no traceback and no exception but its exit."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _zstd(data):
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data[:3000]) + zstd.compress(data[3000:])


def _lz4(data):
    import lz4.frame
    return lz4.frame.compress(data[:3000]) + lz4.frame.compress(data[3000:])


#: Each codec, by extension: the data in two compressed frames.
PACK = {"gz": lambda d: gzip.compress(d[:3000]) + gzip.compress(d[3000:]), "zst": _zstd,
        "lz4": _lz4}
#: The frames of the bundled sample, as the command counts them.
SAMPLE_FRAMES = f"{len(dcpfast.read(SAMPLE)):,}"


#: Terminal escapes a dump may hold in its names and keys: a colour (CSI), a window title
#: (OSC, ended by BEL), a C1 CSI (U+009B), a line feed that would forge a line of output.
ESCAPES = {"scope": "s\x1b[31mred", "collection": "c\x1b]0;owned\x07",
           "key": "k\x1b[2J\u009bx\nforged"}


def escapes_dump() -> bytes:
    """A dump whose scope, collection and key hold ``ESCAPES``, and a key that is not
    UTF-8."""
    hdr = dict(vbucket=5, opaque=0x1005)
    return b"".join([
        t.snapshot_marker(1, 4, **hdr),
        t.create_scope(ESCAPES["scope"].encode(), by_seqno=1, manifest_uid=1, scope_id=8,
                       **hdr),
        t.create_collection(ESCAPES["collection"].encode(), by_seqno=2, manifest_uid=2,
                            scope_id=8, collection_id=9, **hdr),
        t.mutation(ESCAPES["key"].encode(), b"{}", by_seqno=3, datatype=1, collection_id=9,
                   **hdr),
        t.mutation(b"b\xff\x1b[0m", b"{}", by_seqno=4, datatype=1, collection_id=9, **hdr)])


def assert_escaped(text: str) -> None:
    """``text`` holds no control character but line feeds (ESCAPES shown escaped)."""
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
    assert not bad, (bad, text)
    assert "forged" not in [line.strip() for line in text.splitlines()]


def documents(n: int, key: int = 8, body: int = 2000, seed: int = 1) -> bytes:
    """A dump of ``n`` documents in four vbuckets, with distinct keys of about ``key``
    bytes and incompressible bodies of ``body`` bytes: big enough that writing its state
    (or its differences) takes a while."""
    rng = random.Random(seed)
    parts = []
    per = n // 4
    for vb in range(4):
        parts.append(t.snapshot_marker(1, per, vbucket=vb))
        for i in range(per):
            parts.append(t.mutation(b"doc-%d-%d-" % (vb, i) + rng.randbytes(key),
                                    rng.randbytes(body), by_seqno=i + 1, vbucket=vb))
    return b"".join(parts)
