"""The suite's corpora: four deterministic conversations written by ``dcpfast.testing``,
generated or read from a cache directory, each with the generator's record of its frames
(what the decoders are checked against)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dcpfast import protocol, testing


def large_frames(items: int, *, seed: int, vbuckets: int, min_value: int, max_value: int,
                 snapshot_size: int = 8) -> list[testing.SyntheticFrame]:
    """Mutations of binary values of ``min_value`` to ``max_value`` bytes (uniform) on a
    collection stream, in snapshots of ``snapshot_size`` per vbucket, round robin."""
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1024), vbuckets))
    seqnos = dict.fromkeys(ids, 0)
    out = []
    for start in range(0, items, snapshot_size):
        vbucket = ids[(start // snapshot_size) % vbuckets]
        count = min(snapshot_size, items - start)
        first = seqnos[vbucket] + 1
        out.append(testing.SyntheticFrame(
            testing.snapshot_marker(first, first + count - 1, vbucket=vbucket),
            {"opcode": protocol.Opcode.SNAPSHOT_MARKER}))
        for seqno in range(first, first + count):
            key = b"blob::%08d" % rng.randrange(10**8)
            value = rng.randbytes(rng.randint(min_value, max_value))
            data = testing.mutation(key, value, by_seqno=seqno, collection_id=8,
                                    vbucket=vbucket, cas=rng.getrandbits(63))
            out.append(testing.SyntheticFrame(
                data, {"opcode": protocol.Opcode.MUTATION, "by_seqno": seqno, "key": key,
                       "value": value}, body=value))
        seqnos[vbucket] = first + count - 1
    return out


@dataclass(frozen=True)
class Corpus:
    """A benchmark corpus: ``build(items, **params)`` gives its frames."""

    name: str
    title: str
    params: dict
    items: int                     # document changes in the full-size run
    build: Callable = testing.synthetic_frames


CORPORA = (
    Corpus("mixed", "mixed document changes, frames of ~240 bytes",
           dict(seed=0, vbuckets=4, collections=True, sync_writes=True, value_size=205),
           880_000),
    Corpus("small", "small binary documents, frames of ~100 bytes",
           dict(seed=1, vbuckets=4, collections=True, sync_writes=True, value_size=28,
                json_ratio=0.0, xattr_ratio=0.0), 880_000),
    Corpus("large", "values of 64 KiB to 1 MiB",
           dict(seed=2, vbuckets=2, min_value=64 << 10, max_value=1 << 20), 480, large_frames),
    Corpus("stream_ids", "collections with stream-ids, frames of ~250 bytes",
           dict(seed=3, vbuckets=4, collections=True, stream_ids=True, value_size=205),
           440_000),
)
CORPUS_NAMES = tuple(c.name for c in CORPORA)


def corpus_items(corpus: Corpus, items: int) -> int:
    """Document changes of ``corpus`` when the mixed corpus has ``items``."""
    return max(1, round(corpus.items * items / CORPORA[0].items))


def generator_source() -> str:
    """The source of every module of ``dcpfast.testing``, which writes the corpora."""
    package = Path(testing.__file__).parent
    return "".join(path.read_text() for path in sorted(package.glob("*.py")))


def corpus_key(corpus: Corpus, items: int) -> dict:
    """Everything the corpus bytes depend on, the generator's source included."""
    source = generator_source()
    if corpus.build is not testing.synthetic_frames:
        source += inspect.getsource(corpus.build)
    return {"items": items, **corpus.params,
            "generator": hashlib.sha256(source.encode()).hexdigest()[:16]}


def generate(corpus: Corpus, items: int) -> tuple[bytes, dict]:
    """The corpus bytes, and the generator's record of them to check the decoders against."""
    frames = corpus.build(items, **corpus.params)
    data = b"".join(f.data for f in frames)
    opcodes = Counter(int(f.fields["opcode"]) for f in frames)
    expected = {
        "frames": len(frames), "bytes": len(data),
        "opcodes": {str(op): n for op, n in sorted(opcodes.items())},
        "by_seqno_sum": sum(f.fields.get("by_seqno", 0) for f in frames),
        "key_len_sum": sum(len(f.fields.get("key", b"")) for f in frames),
        "value_len_sum": sum(len(f.fields.get("value", b"")) for f in frames),
    }
    return data, expected


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_corpus(corpus: Corpus, items: int, cache: Path | None = None) -> tuple[bytes, dict, str]:
    """The corpus with ``items`` document changes: read from ``cache`` when it is there,
    else generated (and written to ``cache`` when one is given); returns the bytes, the
    generator's record and where they came from."""
    key = corpus_key(corpus, items)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    if cache is not None:
        path = Path(cache) / f"{corpus.name}-{items}-{digest}.dcp"
        meta = path.with_suffix(".json")
        if path.exists() and meta.exists():
            record = json.loads(meta.read_text())
            data = path.read_bytes()
            if record.get("key") == key and len(data) == record["expected"]["bytes"]:
                return data, record["expected"], f"cache {_shown(path)}"
    start = time.perf_counter()
    data, expected = generate(corpus, items)
    elapsed = time.perf_counter() - start
    if cache is None:
        return data, expected, f"generated in {elapsed:.1f} s"
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, content in ((path, data),
                            (meta, json.dumps({"key": key, "expected": expected}).encode())):
        partial = target.with_suffix(target.suffix + ".partial")
        partial.write_bytes(content)
        os.replace(partial, target)
    return data, expected, f"generated in {elapsed:.1f} s, cached in {_shown(path)}"


def opcode_name(code: int) -> str:
    """The opcode's name, or its number in hex when it has none."""
    try:
        return protocol.Opcode(code).name
    except ValueError:
        return f"0x{code:02x}"


def print_corpus(corpus: Corpus, items: int, expected: dict, origin: str) -> None:
    """What a corpus holds: sizes, generator settings and the opcode mix."""
    frames, size = expected["frames"], expected["bytes"]
    print(f"\ncorpus {corpus.name}: {corpus.title} ({origin})")
    print(f"  {items:,} document changes: {frames:,} frames, {size:,} bytes, "
          f"mean frame {size / frames:,.1f} bytes")
    print("  " + ", ".join(f"{k}={v}" for k, v in corpus.params.items()))
    mix = sorted(((n, int(op)) for op, n in expected["opcodes"].items()), reverse=True)
    cells = [f"{opcode_name(op):<16}{n:>9,} {100 * n / frames:5.1f}%" for n, op in mix[:6]]
    for at in range(0, len(cells), 3):
        print("    " + "  ".join(cells[at:at + 3]))
    if len(mix) > 6:
        print(f"    and {len(mix) - 6} more opcodes, {sum(n for n, _ in mix[6:]):,} frames")
