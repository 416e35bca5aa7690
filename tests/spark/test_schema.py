"""The rows Spark gets (``dcpfast.spark.schema``): the Spark schema is the Arrow schema, with
the unsigned columns widened."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dcpfast import spark as dspark
from dcpfast.spark.schema import output_columns


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
