"""``dcpfast.spark.report``: the same figures as ``dcpfast.report`` of the same files, the
units read in Spark's tasks and merged on the driver."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast.testing import SAMPLE, SAMPLE_CLIENT, SAMPLE_PCAP
from tests.report_scenarios import known

pytestmark = pytest.mark.spark


def test_spark_reports_what_one_process_reports(spark, tmp_path):
    from dcpfast.spark import report

    script = known()
    server, client = script.dumps()
    (tmp_path / "server.dcp").write_bytes(server)
    (tmp_path / "client.dcp").write_bytes(client)
    (tmp_path / "known.pcap").write_bytes(script.capture())
    dumps = [SAMPLE, SAMPLE_CLIENT, tmp_path / "server.dcp", tmp_path / "client.dcp"]
    captures = [SAMPLE_PCAP, tmp_path / "known.pcap"]
    for inputs in (dumps, captures):
        here = dcpfast.report(inputs).figures
        there = report(spark, [str(p) for p in inputs]).figures
        assert there == here
        assert len(there["connections"]) == 2
    with pytest.raises(ValueError, match="report them apart"):
        report(spark, [str(SAMPLE), str(SAMPLE_PCAP)])
