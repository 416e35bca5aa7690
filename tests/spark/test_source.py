"""Reading dumps on Spark (``dcpfast.spark.source``): a piece read in skip mode logs what it
dropped, once, naming the file and its bytes."""

from __future__ import annotations

from dcpfast import spark as dspark
from dcpfast.io.ranges import Piece
from dcpfast.spark.source import read_piece
from tests.io.test_ranges import _damaged, _whole, _write


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
