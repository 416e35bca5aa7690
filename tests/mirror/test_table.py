"""``mirror.table``: the table's schema (the state's, signed), bits kept; a table no
mirror wrote is refused; Spark's own Delta reader (delta-spark, its jars resolved by
``spark.jars.packages``, in a Spark session of its own) reads what ``deltalake`` reads, and
the earlier version by ``versionAsOf``. delta-spark pairs with one Spark version: CI
installs that pyspark for it (.ci/delta-spark); elsewhere that test skips."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import dcpfast
from dcpfast.mirror import NotAMirror
from dcpfast.mirror.table import as_table, last_run, opened, table_schema
from dcpfast.testing import SAMPLE
from tests.mirror.test_api import two_runs

deltalake = pytest.importorskip("deltalake")


def test_the_state_signed_bits_kept():
    rows = dcpfast.state(SAMPLE).replace_schema_metadata(None)
    table = as_table(rows)
    assert table.schema == table_schema(rows.schema)
    assert table.column_names == rows.column_names
    assert not any(pa.types.is_unsigned_integer(f.type) for f in table.schema)
    for name in ("cas", "by_seqno", "vbucket", "flags"):
        back = table[name].cast(rows[name].type, safe=False)
        assert back.to_pylist() == rows[name].to_pylist()
    top = pa.table({"cas": pa.array([2**64 - 1, 2**63], pa.uint64())})
    assert as_table(top)["cas"].to_pylist() == [-1, -(2**63)]


def test_no_table_and_a_table_no_mirror_wrote(tmp_path):
    assert opened(str(tmp_path / "none")) is None
    deltalake.write_deltalake(tmp_path / "plain", pa.table({"x": [1]}))
    with pytest.raises(NotAMirror, match="no dcpfast mirror wrote"):
        last_run(opened(str(tmp_path / "plain")))


#: delta-spark's release for each Spark minor version (docs.delta.io/releases; the Maven
#: artifact's spark-core dependency).
DELTA_FOR_SPARK = {"4.0": "4.0.1", "4.2": "4.4.0"}

READ = """
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("dcpfast-mirror-read")
         .config("spark.jars.packages", "io.delta:delta-spark_2.13:" + sys.argv[1])
         .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog",
                 "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.ui.enabled", "false").getOrCreate())
now = spark.read.format("delta").load(sys.argv[2])
first = spark.read.format("delta").option("versionAsOf", 0).load(sys.argv[2])
rows = lambda df: sorted([r.vbucket, r.collection_id, r.key.hex(), r.by_seqno, r.cas]
                         for r in df.select("vbucket", "collection_id", "key", "by_seqno",
                                            "cas").collect())
print(json.dumps({"now": rows(now), "first": rows(first)}))
spark.stop()
"""


def _rows(table) -> list:
    return sorted([r["vbucket"], r["collection_id"], r["key"].hex(), r["by_seqno"], r["cas"]]
                  for r in table.to_pylist())


@pytest.mark.spark
@pytest.mark.delta_spark
def test_spark_reads_the_mirror_with_its_delta_reader(tmp_path):
    pyspark = pytest.importorskip("pyspark")
    minor = ".".join(pyspark.__version__.split(".")[:2])
    if minor not in DELTA_FOR_SPARK:
        pytest.skip(f"no delta-spark release pairs with Spark {pyspark.__version__} "
                    f"(.ci/delta-spark installs one that does)")
    _, uri = two_runs(tmp_path, 950)
    done = subprocess.run([sys.executable, "-c", READ, DELTA_FOR_SPARK[minor], uri],
                          capture_output=True, timeout=600, cwd=tmp_path,
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    read = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert read["now"] == _rows(deltalake.DeltaTable(uri).to_pyarrow_table())
    assert read["first"] == _rows(deltalake.DeltaTable(uri, version=0).to_pyarrow_table())
    assert read["now"] != read["first"]
