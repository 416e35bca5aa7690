"""Write the fuzzers' seed corpus: frames of every kind and short conversations from
``dcpfast.testing``, each prefixed by the mode byte the harnesses read first."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from dcpfast import testing as t


def seeds() -> list[bytes]:
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
    return out


def main(directory: str) -> None:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    for data in seeds():
        (path / hashlib.sha1(data).hexdigest()).write_bytes(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
