"""The ``dcp`` stream reader (``dcpfast.spark.stream_reader``: ``spark.readStream``) on the
shared session: a dump written in pieces cut inside frames, a second file, restarts from
the checkpoint, into a Parquet sink and into a Delta table through ``foreachBatch``; every
frame exactly once. Files that shrink or are replaced, and captures, fail in one line
naming them. Micro-batches under a byte limit, as Spark asks a reader for them (no
JVM)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import dcpfast
from dcpfast import testing as T

dspark = pytest.importorskip("dcpfast.spark")
from dcpfast.spark.job import spark_error  # noqa: E402


def _offsets(path) -> list[int]:
    return dcpfast.read(path)["offset"].tolist()


def _stream(spark, where, checkpoint, sink, *, max_bytes=None, delta=None):
    """Run the stream with Trigger.AvailableNow until it has read what is there."""
    reader = spark.readStream.format("dcp").option("columns", "offset,vbucket,source")
    if max_bytes:
        reader = reader.option("maxBytesPerTrigger", str(max_bytes))
    frames = reader.load(str(where))
    writer = frames.writeStream.option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True)
    if delta is None:
        writer = writer.format("parquet").option("path", str(sink))
    else:
        writer = writer.foreachBatch(delta)
    query = writer.start()
    query.awaitTermination()
    return query


def _to_delta(table: str):
    """A ``foreachBatch`` function that appends each micro-batch to a Delta table once:
    the batch id is the application transaction version of the query's id."""
    import deltalake

    def append(df, batch_id):
        app = "dcp-stream"
        try:
            done = deltalake.DeltaTable(table).transaction_version(app)
        except deltalake.exceptions.TableNotFoundError:
            done = None
        if done is not None and done >= batch_id:
            return                                     # replayed after a restart
        deltalake.write_deltalake(table, df.toArrow(), mode="append",
                                  commit_properties=deltalake.CommitProperties(
                                      app_transactions=[deltalake.Transaction(app, batch_id)]))
    return append


@pytest.mark.spark
def test_a_growing_dump_streams_every_frame_once(spark, tmp_path):
    dspark.register(spark)
    data = T.synthetic_stream(500, seed=7)
    more = T.synthetic_stream(120, seed=8)
    offsets = dcpfast.scan(data, final=True)["offset"].tolist()
    where = tmp_path / "dumps"
    where.mkdir()
    grow = where / "a.dcp"
    pieces = [0, offsets[40] + 5, offsets[41] + 30, offsets[300] + 1, len(data)]
    sink, check = tmp_path / "out", tmp_path / "ckpt"
    table = str(tmp_path / "table")
    dcheck = tmp_path / "dckpt"
    for k, (lo, hi) in enumerate(zip(pieces, pieces[1:])):
        with open(grow, "ab") as f:
            f.write(data[lo:hi])
        if k == 2:
            (where / "b.dcp").write_bytes(more)                 # a second file appears
        _stream(spark, where, check, sink, max_bytes=9_000 if k == 1 else None)
        _stream(spark, where, dcheck, None, delta=_to_delta(table))
        back = spark.read.parquet(str(sink)).select("source", "offset").collect()
        complete = [o for o in offsets if o < _end(offsets, len(data), hi)]
        got = sorted(r.offset for r in back if r.source.endswith("a.dcp"))
        assert got == complete                                 # each once, none cut
    import deltalake

    rows = deltalake.DeltaTable(table).to_pyarrow_table(columns=["source", "offset"])
    want = {("a", o) for o in offsets} | {("b", o) for o in _offsets(where / "b.dcp")}
    got = [(Path(r["source"]).stem, r["offset"]) for r in rows.to_pylist()]
    assert len(got) == len(want) and set(got) == want
    parquet = spark.read.parquet(str(sink)).select("source", "offset").collect()
    assert sorted((Path(r.source).stem, r.offset) for r in parquet) == sorted(want)


def _end(offsets, size, hi):
    """The end of the last complete frame within ``hi`` bytes."""
    ends = [b for b in offsets[1:] + [size] if b <= hi]
    return ends[-1] if ends else 0


def _renamed_over(path, data: bytes) -> None:
    """``data`` put at ``path`` as a writer replaces a file: written beside, renamed."""
    beside = path.with_name(".new")
    beside.write_bytes(data)
    os.replace(beside, path)


def _rewritten(path, data: bytes) -> None:
    """``path`` rewritten in place with ``data``, its modification time a second later."""
    was = os.stat(path)
    path.write_bytes(data)
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns + 1_000_000_000))


@pytest.mark.spark
def test_a_dump_that_shrinks_or_is_replaced_fails_in_one_line(spark, tmp_path):
    """Truncated, replaced by a rename of another dump of the same first bytes (longer,
    so that reading on from the old end would find its frames), rewritten in place with
    the same size, or with other first bytes: the query fails in one line naming the
    file, and nothing of the new content is read."""
    dspark.register(spark)
    data = T.synthetic_stream(80, seed=9)
    other = T.synthetic_stream(300, seed=10)
    assert other[:64] == data[:64] and len(other) > len(data)
    where = tmp_path / "dumps"
    where.mkdir()
    path = where / "a.dcp"
    path.write_bytes(data)
    check = tmp_path / "ckpt"
    _stream(spark, where, check, tmp_path / "out")
    same_size = bytearray(data)
    same_size[len(data) // 2] ^= 0xFF
    for change, said in ((lambda: path.write_bytes(data[:100]),
                          f"{path} shrank to 100 bytes below the {len(data)}"),
                         (lambda: _rewritten(path, bytes(same_size)),
                          f"{path} was rewritten (it changed without growing)"),
                         (lambda: path.write_bytes(data[:10] + bytes([data[10] ^ 0xFF]) +
                                                   data[11:] + data),
                          f"{path} was replaced (its first bytes changed)"),
                         (lambda: _renamed_over(path, other),
                          f"{path} was replaced (another file has its name)")):
        change()
        with pytest.raises(Exception) as failure:
            _stream(spark, where, check, tmp_path / "out")
        line = spark_error(failure.value)
        assert said in line and "\n" not in line, line
    read = spark.read.parquet(str(tmp_path / "out")).select("offset").collect()
    assert sorted(r.offset for r in read) == dcpfast.scan(data, final=True)["offset"].tolist()
    os.unlink(path)
    from dcpfast.testing import capture

    (where / "c.pcap").write_bytes(capture.pcap_file([]) + bytes(100))
    with pytest.raises(Exception) as failure:
        _stream(spark, where, tmp_path / "ckpt2", tmp_path / "out2")
    line = spark_error(failure.value)
    assert line == f"{where / 'c.pcap'}: a packet capture (pcap or pcapng), not a DCP dump: " \
        "decode it with dcpfast convert or dcpfast.pcap.read_pcap; the dcp stream reads raw " \
        "DCP dumps"


def _reader(where, **options):
    """A stream reader of the ``dcp`` source as Spark makes one (no JVM needed)."""
    pytest.importorskip("pyspark")
    from dcpfast.spark.schema import spark_schema
    from dcpfast.spark.stream_reader import DcpStreamReader

    columns = "offset,opcode_name,source"
    return DcpStreamReader({"path": str(where), "columns": columns, **options},
                           spark_schema(columns))


def _read(reader, start, end) -> list[int]:
    return [o for part in reader.partitions(start, end) for rb in reader.read(part)
            for o in rb.column("offset").to_pylist()]


def test_micro_batches_under_a_byte_limit_and_a_replanned_batch(tmp_path):
    """Offsets under ``ReadMaxBytes`` cover every complete frame once, a frame cut at the
    end waits, and a reader that did not plan a batch (a restart) reads the same frames;
    ``Trigger.AvailableNow`` stops at what was there when it began."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

    data = T.synthetic_stream(200, seed=12)
    offsets = dcpfast.scan(data, final=True)["offset"].tolist()
    path = tmp_path / "a.dcp"
    cut = offsets[150] + 10
    path.write_bytes(data[:cut])
    reader = _reader(tmp_path, maxBytesPerTrigger="3k", partitionBytes="2k")
    assert reader.getDefaultReadLimit() == ReadMaxBytes(3072)
    start, got, ends = reader.initialOffset(), [], []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start:
            break
        ends.append(end["files"][str(path)]["position"]["offset"])
        got += _read(reader, start, end)
        again = _reader(tmp_path)                 # restarted: plans the batch itself
        assert _read(again, start, end) == got[len(got) - len(_read(again, start, end)):]
        start = end
    assert got == offsets[:150] and ends[-1] == offsets[150] and len(ends) > 3
    assert all(b - a <= 3072 for a, b in zip([0] + ends, ends))
    reader.prepareForTriggerAvailableNow()
    with open(path, "ab") as f:
        f.write(data[cut:])
    assert reader.latestOffset(start, ReadAllAvailable()) == start     # after its start
    fresh = _reader(tmp_path)
    end = fresh.latestOffset(start, ReadAllAvailable())
    assert _read(fresh, start, end) == offsets[150:]


def test_a_frame_awaited_for_long_is_said_once(tmp_path, caplog):
    """A file that ends inside a frame claiming 40 MB: the stream waits for the rest as
    for any cut frame, and once it has waited ``WAIT_WARNING_SECONDS`` says so in one
    warning naming the file and the frame; what it reads does not change."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from dcpfast.spark import stream

    data = T.synthetic_stream(20, seed=3)
    offsets = dcpfast.scan(data, final=True)["offset"].tolist()
    huge = T.mutation(b"big", bytes(40_000_000), by_seqno=99)
    path = tmp_path / "a.dcp"
    path.write_bytes(data + huge[:5000])
    reader = _reader(tmp_path)
    now = [1000.0]
    reader.waiting.clock = lambda: now[0]
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert _read(reader, start, end) == offsets
    assert end["files"][str(path)]["position"]["offset"] == len(data)
    caplog.set_level("WARNING", logger="dcpfast.spark")
    for step in (1, stream.WAIT_WARNING_SECONDS - 2, 1, 5, 600):
        now[0] += step
        assert reader.latestOffset(end, ReadAllAvailable()) == end
    (said,) = [r.getMessage() for r in caplog.records]
    assert str(path) in said and f"byte {len(data)}" in said and "40,000,0" in said
    assert "5,000" in said and len(said.splitlines()) == 1
    with open(path, "ab") as f:                         # the rest comes: it is read
        f.write(huge[5000:])
    later = reader.latestOffset(end, ReadAllAvailable())
    assert later["files"][str(path)]["position"]["offset"] == len(data) + len(huge)
