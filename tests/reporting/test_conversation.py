"""What a report keeps of a connection stays bounded: its longest stalls (``MAX_STALLS``),
its first anomalies (``MAX_ANOMALIES``) with every one counted, so that its memory does
not follow the number of stalls or anomalies."""

from __future__ import annotations

import os
import tempfile

import dcpfast
from dcpfast import testing as t
from dcpfast.reporting.conversation import MAX_ANOMALIES, MAX_STALLS
from tests.memory import peak_in_child

START = 1_700_000_000 * 10**9
S = 10**9


def items(count: int, *, repeated: bool) -> bytes:
    """One stream of ``count`` items; ``repeated``: all carry seqno 5, each after the
    first an anomaly (``seqno_not_increasing``)."""
    frames = [t.mutation(b"k", b"v", by_seqno=5 if repeated else i + 1, vbucket=3, cas=START)
              for i in range(count)]
    return t.snapshot_marker(1, 10 if repeated else count, vbucket=3) + b"".join(frames)


def anomalies_job(count: str, repeated: str):
    """The report of ``items(count)`` read 64 KiB at a time: its anomalies counted, listed
    and counted on their stream."""
    fd, path = tempfile.mkstemp(suffix=".dcp")
    with os.fdopen(fd, "wb") as f:
        f.write(items(int(count), repeated=repeated == "True"))
    dcpfast.report(t.SAMPLE, threads=1)                    # imports and caches warmed

    def job():
        try:
            f = dcpfast.report(path, threads=1, batch_bytes=1 << 16,
                               collections=False).figures
        finally:
            os.unlink(path)
        return [f["anomaly_counts"], len(f["anomalies"]), f["anomalies_not_listed"],
                f["streams"][0]["anomalies"]]
    return job


def test_memory_does_not_follow_the_anomalies():
    """Eight times the anomalies: what they cost over the same items without them (in
    peak memory) grows by less than 1 MiB (each anomaly kept cost hundreds of bytes),
    and every one is still counted."""
    extra = []
    for count in (2_000, 16_000):
        _, clean = peak_in_child("tests.reporting.test_conversation", "anomalies_job", count,
                                 False)
        (counts, listed, not_listed, on_stream), peak = peak_in_child(
            "tests.reporting.test_conversation", "anomalies_job", count, True)
        assert counts == {"seqno_not_increasing": count - 1} and on_stream == count - 1
        assert listed == MAX_ANOMALIES and not_listed == count - 1 - MAX_ANOMALIES
        extra.append(peak - clean)
    assert extra[1] - extra[0] < 1 << 20, extra


def test_a_connection_lists_its_longest_stalls_and_counts_the_rest(tmp_path):
    count = MAX_STALLS + 99
    tick = 1 << 16                                      # a CAS's clock counts in these
    times = [(START // tick + i * (6 * S // tick) + i * i) * tick for i in range(count + 1)]
    items = [t.mutation(b"k", by_seqno=i + 1, vbucket=3, cas=at) for i, at in enumerate(times)]
    path = tmp_path / "stalls.dcp"
    path.write_bytes(t.snapshot_marker(1, count + 1, vbucket=3) + b"".join(items))
    f = dcpfast.report(path).figures
    assert f["streams"][0]["stalls"] == f["connections"][0]["stalls"] == count
    assert len(f["stalls"]) == MAX_STALLS and f["stalls_not_listed"] == count - MAX_STALLS
    gaps = sorted((b - a) / 1e9 for a, b in zip(times, times[1:]))     # each longer
    assert sorted(s["seconds"] for s in f["stalls"]) == gaps[-MAX_STALLS:]
