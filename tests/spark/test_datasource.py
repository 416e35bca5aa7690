"""dcpfast.spark: the schema, byte-range splits of a file, and the three Spark read paths.

The split tests run the partition reader directly (no JVM); the tests marked ``spark``
share one local[2] session and compare every path with ``dcpfast.scan``.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import dcpfast
from dcpfast import schema as S
from dcpfast import spark as dspark
from dcpfast import testing as T
from dcpfast.errors import DcpFormatError
from dcpfast.io.ranges import Piece, plan, range_batches
from dcpfast.options import ScanOptions
from dcpfast.spark.convert import to_record_batch
from dcpfast.spark.schema import EXTRA, VALUE_COLUMNS, output_columns
from dcpfast.spark.source import read_piece

# -- splits ----------------------------------------------------------------------------------


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _split_read(path, size, cuts, *, collections, errors="strict", lead_in=0,
                batch_bytes=1 << 12):
    """Offsets of the frames each range between ``cuts`` yields, in order."""
    bounds = [0, *cuts, size]
    with pafs.LocalFileSystem().open_input_file(path) as f:
        out = []
        for lo, hi in zip(bounds, bounds[1:]):
            piece = Piece(path, lo, hi, size)
            options = ScanOptions(collections, ("offset",), errors)
            for batch in range_batches(f, piece, options, batch_bytes=batch_bytes,
                                       lead_in=lead_in):
                out += batch["offset"].tolist()
    return out


def _whole(data, errors="strict", collections=None):
    return dcpfast.scan(data, final=True, errors=errors, collections=collections)


@pytest.fixture(scope="module")
def stream():
    return T.synthetic_stream(80, seed=7, value_size=60)


def test_one_cut_anywhere_yields_every_frame_once(tmp_path, stream):
    path = _write(tmp_path, "a.dcp", stream)
    ref = _whole(stream)
    want = ref["offset"].tolist()
    ends = [int(o) + 24 + int(b) for o, b in zip(ref["offset"], ref["body_len"])]
    rng = random.Random(1)
    cuts = set(rng.sample(range(1, len(stream)), 150))
    for boundary in (ends[3], ends[len(ends) // 2], ends[-2]):    # and every byte near frame ends
        cuts.update(range(boundary - 26, boundary + 26))
    for cut in sorted(cuts):
        for lead_in in (0, 40):
            got = _split_read(path, len(stream), [cut], collections=ref.collections,
                              lead_in=lead_in)
            assert got == want, (cut, lead_in)


@pytest.mark.parametrize("partition_bytes", [61, 500, 4096])
def test_many_partitions_of_a_planned_file(tmp_path, stream, partition_bytes):
    path = _write(tmp_path, "a.dcp", stream)
    parts = plan([(path, len(stream))], partition_bytes, parallelism=2)
    assert len(parts) >= len(stream) // partition_bytes
    cuts = sorted(piece.lo for part in parts for piece in part if piece.lo)
    ref = _whole(stream)
    assert _split_read(path, len(stream), cuts, collections=ref.collections) == \
        ref["offset"].tolist()


def _damaged(stream):
    """Garbage between frames (one run holds a header-like pattern), a broken magic
    inside a frame and a truncated tail."""
    ref = _whole(stream)
    offsets = ref["offset"].tolist()
    data = bytearray(stream)
    fake = bytes([0x80, 0x57]) + b"\x00" * 22                      # a header with no body
    for at, junk in sorted([(offsets[60], b"\xee" * 300), (offsets[30], fake + b"\x81" * 50),
                            (offsets[10], bytes(range(256)))], reverse=True):
        data[at:at] = junk
    data[offsets[45] + 1000 + 24] ^= 0xFF      # somewhere inside a later frame
    return bytes(data[:-7])


def test_cuts_in_a_damaged_file_skip_mode(tmp_path, stream):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    ref = _whole(data, errors="skip")
    assert len(ref.errors) >= 4
    want = ref["offset"].tolist()
    regions = [(e.offset, e.offset + e.length) for e in ref.errors]
    cuts = set(random.Random(2).sample(range(1, len(data)), 120))
    for lo, hi in regions:                                   # inside and around the garbage
        cuts.update(range(max(1, lo - 3), min(len(data), hi + 3), 5))
    for cut in sorted(cuts):
        got = _split_read(path, len(data), [cut], collections=ref.collections,
                          errors="skip", lead_in=0)
        assert got == want, cut
    many = [c for c in sorted(cuts) if c % 3 == 0]
    assert _split_read(path, len(data), many, collections=ref.collections,
                       errors="skip", lead_in=64) == want


def test_cuts_in_a_damaged_file_strict_mode(tmp_path, stream):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    with pytest.raises(DcpFormatError) as whole:
        _whole(data)
    collections = _whole(data, errors="skip").collections
    for cut in range(1, len(data), 97):
        with pytest.raises(DcpFormatError) as split:
            _split_read(path, len(data), [cut], collections=collections)
        assert split.value.offset == whole.value.offset, cut


def test_skip_mode_logs_what_it_dropped(tmp_path, stream, caplog):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    ref = _whole(data, errors="skip")
    spans = sorted((e.offset, e.offset + e.length) for e in ref.errors)
    schema = dspark.spark_arrow_schema(["offset"])
    whole = Piece(path, 0, len(data), len(data))
    with caplog.at_level("WARNING", logger="dcpfast.spark"):
        rows = sum(rb.num_rows for rb in read_piece(
            whole, schema, collections=None, errors="skip", batch_bytes=4096))
    assert rows == len(ref)
    [record] = caplog.records
    assert f"skipped {len(spans)} damaged region(s), " \
        f"{sum(end - start for start, end in spans)} bytes, the first at byte {spans[0][0]}" \
        in record.getMessage()
    caplog.clear()
    list(read_piece(Piece(path, 0, len(stream) // 2, len(data)), schema,
                           collections=None, errors="skip"))
    assert "bad.dcp (bytes 0 to" in caplog.records[0].getMessage()
    caplog.clear()
    list(read_piece(Piece(_write(tmp_path, "good.dcp", stream), 0,
                                        len(stream), len(stream)),
                           schema, collections=None, errors="skip"))
    assert not caplog.records


def test_values_holding_frames_never_give_wrong_rows(tmp_path):
    """A document whose value is itself a DCP stream: a cut inside it either yields the
    whole-file frames or raises; with a lead-in reaching the document, always the former."""
    inner = T.synthetic_stream(30, seed=3, handshake=False, value_size=40)
    prefix = T.synthetic_stream(10, seed=4)
    outer = prefix + T.mutation(b"dump", inner, by_seqno=999, collection_id=0) + \
        T.synthetic_stream(10, seed=5, handshake=False)
    path = _write(tmp_path, "nested.dcp", outer)
    ref = _whole(outer, collections=True)
    want = ref["offset"].tolist()
    start = len(prefix)
    value_at = start + 24 + 31 + 5
    failures = 0
    for cut in range(value_at, value_at + len(inner), 11):
        try:
            got = _split_read(path, len(outer), [cut], collections=True, lead_in=0)
        except DcpFormatError as e:
            assert "do not end there" in str(e) or "starts before" in str(e)
            failures += 1
        else:
            assert got == want, cut
        assert _split_read(path, len(outer), [cut], collections=True,
                           lead_in=cut - start + 10) == want, cut
    assert failures, "no cut inside the nested stream exercised the check"


@pytest.mark.parametrize("partition_bytes, parallelism", [(100, 1), (100, 2), (1000, 4)])
def test_plan_packs_small_files_and_splits_large_ones(partition_bytes, parallelism):
    files = [("a", 10), ("b", 70), ("c", 30), ("d", 250), ("e", 55), ("f", 0)]
    parts = plan(files, partition_bytes, parallelism)
    pieces = sorted((p for part in parts for p in part), key=lambda p: (p.uri, p.lo))
    for uri, size in files:                          # each file tiled exactly once
        mine = [(p.lo, p.hi) for p in pieces if p.uri == uri]
        assert mine[0][0] == 0 and mine[-1][1] == size
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))
    total = sum(size for _, size in files)
    count = -(-total // partition_bytes)
    count = -(-count // parallelism) * parallelism
    assert len(parts) == count
    target = -(-total // count)
    assert [p.uri for p in pieces if not p.whole] == ["d"] * -(-250 // target)
    largest = max(p.hi - p.lo for p in pieces)
    assert all(sum(p.hi - p.lo for p in part) <= target + largest for part in parts)
    assert not plan(files, 100, splittable=lambda uri: False)[0][0].lo


# -- the schema ----------------------------------------------------------------------------------


def test_spark_schema_is_the_arrow_schema():
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    for columns, values in ((None, False), (None, True), (["by_seqno", "key_str"], False)):
        assert to_arrow_schema(dspark.spark_schema(columns, values), timezone="UTC") == \
            dspark.spark_arrow_schema(columns, values)
    schema = dspark.spark_arrow_schema()
    assert schema.field("cas").type == pa.int64()
    assert schema.field("opcode").type == pa.int16()
    assert schema.field("vbucket").type == pa.int32()
    assert schema.field("flags").type == pa.int64()
    assert schema.names[-4:] == ["key", "key_str", "value", "source"]
    with pytest.raises(ValueError, match="need values=True"):
        output_columns(["content"])


def test_record_batches_reinterpret_uint64(tmp_path):
    data = T.snapshot_marker(5, 2**64 - 1, vbucket=3) + \
        T.mutation(b"k\xff", b"v", by_seqno=2**63 + 1, cas=2**64 - 2, vbucket=3)
    batch = dcpfast.scan(data, final=True, collections=False)
    rb = to_record_batch(batch, "x", dspark.spark_arrow_schema())
    assert rb.column("snap_end").to_pylist() == [-1, None]
    assert rb.column("by_seqno").to_pylist() == [None, -(2**63) + 1]
    assert rb.column("cas").to_numpy().view(np.uint64)[1] == 2**64 - 2
    assert rb.column("key_str").to_pylist() == [None, None]       # b"k\xff" is not UTF-8
    assert rb.column("source").to_pylist() == ["x", "x"]
    data = T.snapshot_marker(5, 9, vbucket=3) + T.mutation(b"k\xc3\xa9", b"v", by_seqno=6)
    rb = to_record_batch(dcpfast.scan(data, final=True, collections=False), None,
                                dspark.spark_arrow_schema())
    assert rb.column("key_str").to_pylist() == [None, "k\u00e9"]
    assert rb.column("key").to_pylist() == [None, b"k\xc3\xa9"]
    assert rb.column("source").to_pylist() == [None, None]


# -- Spark -----------------------------------------------------------------------------------------


#: The name of each opcode, from the protocol's enum (what ``opcode_name`` must hold):
#: lower case, ``0x..`` for an opcode without one.
OPCODE_NAMES = {int(op): op.name.lower() for op in dcpfast.Opcode}


def _expected(paths, *, errors="strict", values=False):
    """Rows by (source, offset), computed without dcpfast.spark: scan + Arrow + casts."""
    rows = {}
    for path in paths:
        data = open(path, "rb").read()
        batch = dcpfast.scan(data, final=True, errors=errors)
        table = batch.to_arrow()
        body = batch.values().to_pylist() if values else []
        by_index = {r["index"]: r for r in body}
        for i, row in enumerate(table.to_pylist()):
            row["key_str"] = _decode(row["key"])
            row["opcode_name"] = OPCODE_NAMES.get(row["opcode"], f"0x{row['opcode']:02x}")
            row["source"] = "file:" + path
            if values:
                v = by_index.get(i)
                row["content"] = v and v["body"]
                row["xattrs"] = v and v["xattrs"]
            rows[(row["source"], row["offset"])] = row
    return rows


def _decode(key):
    try:
        return None if key is None else key.decode()
    except UnicodeDecodeError:
        return None


def _as_unsigned(table):
    """Spark's signed columns back to the schema's unsigned values, as Python rows."""
    out = {}
    for row in table.to_pylist():
        for name, value in row.items():
            if name in S.DTYPES and value is not None and value < 0:
                row[name] = value + 2**64
        if "xattrs" in row and row["xattrs"] is not None:
            row["xattrs"] = sorted(row["xattrs"])
        out[(row["source"], row["offset"])] = row
    return out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("dumps")
    paths = []
    for i, items in enumerate((300, 40, 900)):
        path = root / f"d{i}.dcp"
        path.write_bytes(T.synthetic_stream(items, seed=10 + i, sync_writes=i == 2))
        paths.append(str(path))
    return root, paths


@pytest.mark.spark
@pytest.mark.parametrize("method", ["datasource", "arrow", "pandas"])
def test_every_path_returns_the_rows_of_scan(spark, dumps, method):
    root, paths = dumps
    df = dspark.read_dcp(spark, str(root), method, columns="all", values=True,
                         partition_bytes=40_000, leadInBytes=100) \
        if method == "datasource" else \
        dspark.read_dcp(spark, str(root), method, columns="all", values=True)
    table = df.toArrow()
    assert table.schema == dspark.spark_arrow_schema("all", values=True)
    got = _as_unsigned(table)
    want = _expected(paths, values=True)
    for row in want.values():
        if row["xattrs"] is not None:
            row["xattrs"] = sorted(row["xattrs"])
    assert table.num_rows == len(want)
    assert got == want


@pytest.mark.spark
def test_projection_reaches_every_path(spark, dumps):
    root, paths = dumps
    want = sorted((r["source"], r["by_seqno"] or 0, repr(r["key_str"]))
                  for r in _expected(paths).values())
    for method in ("datasource", "arrow"):
        df = dspark.read_dcp(spark, str(root), method,
                             columns=["key_str", "by_seqno", "source"])
        assert df.columns == ["by_seqno", "key_str", "source"]
        got = sorted((r.source, (r.by_seqno or 0) % 2**64, repr(r.key_str))
                     for r in df.collect())
        assert got == want, method


@pytest.mark.spark
def test_errors_modes_on_a_damaged_file(spark, tmp_path, stream):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    want = _whole(data, errors="skip")["offset"].tolist()
    split = dict(partition_bytes=997, leadInBytes=50)
    for method, options in (("datasource", split), ("arrow", {})):
        rows = dspark.read_dcp(spark, path, method, columns=["offset"], errors="skip",
                               **options).collect()
        assert sorted(r.offset for r in rows) == want, method
    with pytest.raises(Exception) as failure:       # whichever damaged range fails first
        dspark.read_dcp(spark, path, columns=["offset"], **split).collect()
    regions = _whole(data, errors="skip").errors
    assert any(f"DcpFormatError: at byte {e.offset}:" in str(failure.value) for e in regions)


@pytest.mark.spark
def test_the_default_columns_are_those_of_document_changes(spark, dumps):
    root, paths = dumps
    df = dspark.read_dcp(spark, str(root))
    assert tuple(df.columns) == dspark.DEFAULT
    schema = dspark.spark_arrow_schema()
    nullable = {f.name for f in schema if f.nullable}
    assert {"offset", "opcode", "datatype", "cas"}.isdisjoint(nullable)
    assert {"vbucket", "by_seqno", "key", "source"} <= nullable
    assert [f.nullable for f in df.schema] == [f.nullable for f in schema]
    want = {k: {c: row[c] for c in dspark.DEFAULT} for k, row in _expected(paths).items()}
    assert _as_unsigned(df.toArrow()) == want
    assert output_columns("all") == output_columns(
        S.NAMES + EXTRA + ("opcode_name",))
    assert output_columns("all")[S.NAMES.index("opcode") + 1] == "opcode_name"
    assert output_columns(None, values=True)[-2:] == VALUE_COLUMNS


@pytest.mark.spark
def test_unsigned_reads_uint64_columns_back(spark):
    from pyspark.sql import functions as F

    values = [-1, 0, 2**63 - 1, -(2**63), -2, None]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    got = [r.u for r in df.select(dspark.unsigned("v").alias("u")).collect()]
    assert got == [None if v is None else v % 2**64 for v in values]
    assert df.select(dspark.unsigned(F.col("v"))).schema[0].dataType.simpleString() == \
        "decimal(20,0)"


@pytest.mark.spark
@pytest.mark.parametrize("method", ["arrow", "pandas"])
def test_binary_file_paths_leave_the_session_settings_alone(spark, dumps, method):
    root, paths = dumps
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert dspark.read_dcp(spark, str(root), method).count() == len(_expected(paths))
    assert spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") == before
    key = "spark.sql.execution.arrow.pyspark.enabled"
    arrow = spark.conf.get(key)
    spark.conf.set(key, "true")          # an unrelated Arrow transfer, in batches as before
    try:
        assert len(spark.range(2_000_000).toPandas()) == 2_000_000
    finally:
        spark.conf.set(key, arrow)


def _filters():
    """pyspark filters with what Spark makes of them on a batch's rows (None: not taken)."""
    from pyspark.sql import datasource as D

    op = dcpfast.Opcode
    vb = ("vbucket",)
    return [
        (D.EqualTo(("opcode",), int(op.MUTATION)), "opcode = 87"),
        (D.In(vb, (98, 308, 70000)), "vbucket in (98, 308, 70000)"),
        (D.Not(D.In(vb, (98, 308))), "not vbucket in (98, 308)"),
        (D.Not(D.EqualTo(vb, 98)), "vbucket <> 98"),
        (D.EqualNullSafe(vb, None), "vbucket is null"),
        (D.Not(D.EqualNullSafe(vb, 98)), "vbucket is distinct from 98"),
        (D.IsNull(vb), "vbucket is null"),
        (D.Not(D.IsNotNull(("collection_id",))), "collection_id is null"),
        (D.GreaterThan(("by_seqno",), 20), "by_seqno > 20"),
        (D.LessThanOrEqual(("snap_end",), -1), "snap_end <= -1"),
        (D.GreaterThanOrEqual(vb, 400), "vbucket >= 400"),
        (D.LessThan(("opcode",), 0x5a), "opcode < 90"),
        (D.EqualTo(("key_str",), "k"), None),
        (D.StringStartsWith(("key_str",), "k"), None),
        (D.EqualTo(("vbucket", "x"), 1), None),
        (D.In(vb, (1, None)), None),
        (D.EqualTo(vb, 1.5), None),
    ]


def test_filters_taken_keep_the_rows_spark_would(stream):
    """Each filter the data source takes, applied to a scanned batch, keeps exactly the
    rows that pass the same condition evaluated by DuckDB on the Arrow rows (SQL's
    three-valued logic: a frame that lacks the column passes neither a comparison nor
    its negation)."""
    pytest.importorskip("pyspark")
    import duckdb

    from dcpfast.spark import filters

    data = stream + T.snapshot_marker(5, 2**64 - 1, vbucket=40) + T.stream_end(vbucket=12)
    batch = dcpfast.scan(data, final=True)
    rows = to_record_batch(batch, None, dspark.spark_arrow_schema("all"))
    assert rows.column("snap_end").to_pylist()[-2] == -1
    sql_rows = duckdb.connect()
    sql_rows.register("frames", pa.Table.from_batches([rows]).append_column(
        "i", pa.array(np.arange(len(batch)))))
    for spark_filter, sql in _filters():
        taken = filters.condition(spark_filter)
        if sql is None:
            assert taken is None, spark_filter
            continue
        want = [i for (i,) in sql_rows.sql(f"select i from frames where {sql} order by i")
                .fetchall()]
        got = np.flatnonzero(filters.keep(batch, [taken])).tolist()
        assert got == want, sql
        assert want and len(want) < len(batch), sql         # the filter does filter


@pytest.mark.spark
def test_filters_reach_the_data_source_when_spark_lets_them(spark, dumps, capfd):
    root, _ = dumps
    query = "opcode = 87 and vbucket in (30, 925, 716) and key_str like 'doc%'"
    plain = sorted(map(tuple, dspark.read_dcp(spark, str(root)).where(query).collect()))
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "true")
    try:
        df = dspark.read_dcp(spark, str(root)).where(query)
        df.explain()
        pushed = sorted(map(tuple, df.collect()))
    finally:
        spark.conf.unset(key)
    plan = capfd.readouterr().out
    spark_filter = next(line for line in plan.splitlines() if "Filter" in line)
    assert "opcode" not in spark_filter and "vbucket" not in spark_filter
    assert "StartsWith(key_str" in spark_filter
    assert pushed == plain and plain


def _readme_examples() -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    section = text[text.index("## Spark examples"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```\n", start)]


@pytest.mark.spark
def test_readme_examples_on_the_sample(spark):
    sample = dcpfast.testing.SAMPLE
    code = _readme_examples()
    assert '"dumps/"' in code
    scope: dict = {}
    exec(code.replace('"dumps/"', repr(str(sample))), scope)

    batch = dcpfast.read(sample)
    op = dcpfast.Opcode
    rows = batch.to_arrow().to_pylist()
    last: dict = {}
    counts: dict = {}
    marker: dict = {}
    prepares = {}
    aborts = []
    for row in rows:
        code, vb = row["opcode"], row["vbucket"]
        if code in (op.MUTATION, op.DELETION, op.EXPIRATION, op.COMMIT):
            doc = (vb, row["collection_id"], row["key"])
            if doc not in last or last[doc][0] < row["by_seqno"]:
                last[doc] = (row["by_seqno"], code)
        if code == op.SNAPSHOT_MARKER:
            marker[vb] = (row["snap_start"], row["snap_end"])
        elif code == op.MUTATION:
            counts[(vb, *marker[vb])] = counts.get((vb, *marker[vb]), 0) + 1
        elif code == op.PREPARE:
            prepares[(vb, row["by_seqno"])] = row["key"].decode()
        elif code == op.ABORT:
            aborts.append((vb, row["prepared_seqno"], row["by_seqno"]))

    latest = {(r.vbucket, r.collection_id, bytes(r.key)): (r.by_seqno, r.opcode, r.deleted)
              for r in scope["latest"].collect()}
    assert latest == {k: (s, c, c in (op.DELETION, op.EXPIRATION)) for k, (s, c) in
                      last.items()}
    assert any(deleted for _, _, deleted in latest.values())
    per_snapshot = [(r.vbucket, r.snap_start, r.snap_end, r["count"])
                    for r in scope["per_snapshot"].collect()]
    assert per_snapshot == sorted((*k, n) for k, n in counts.items())
    aborted = sorted((r.vbucket, r.prepared_seqno, r.abort_seqno, r.key_str)
                     for r in scope["aborted"].collect())
    assert aborted == sorted((vb, p, a, prepares[(vb, p)]) for vb, p, a in aborts)
    assert aborted
