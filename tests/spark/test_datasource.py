"""The ``dcp`` data source and ``read_dcp`` (``dcpfast.spark.datasource``): the three Spark read
paths against ``dcpfast.scan`` on one local[2] session, projections, errors modes, the
default columns, ``unsigned``, the session's settings left alone, filters pushed down, and
the examples of docs/spark.md on the sample."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import schema as S
from dcpfast import spark as dspark
from dcpfast import testing as T
from dcpfast.spark.schema import EXTRA, VALUE_COLUMNS, output_columns
from tests.io.test_ranges import _damaged, _whole, _write

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
