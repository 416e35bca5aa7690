"""The samples bundled with dcpfast: ``dcpfast.testing.sample_files()`` makes them again,
byte for byte, and each shows what the documentation's examples read from it (the
server's side, the client's requests, a capture of both directions).

``python tests/test_samples.py`` rewrites them after a change of the generators.
"""

from __future__ import annotations

import sys

import pytest

import dcpfast
from dcpfast import io as dio
from dcpfast import streams
from dcpfast.testing import SAMPLE_NAMES, sample_files

PATHS = {"sample.dcp": dio.SAMPLE, "sample-client.dcp": dio.SAMPLE_CLIENT,
         "sample.pcap": dio.SAMPLE_PCAP}


def test_the_paths_name_every_sample():
    assert sorted(PATHS) == sorted(SAMPLE_NAMES)
    assert {p.parent for p in PATHS.values()} == {dio.SAMPLE.parent}


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_the_samples_regenerate_byte_for_byte(name):
    made = sample_files()[name]
    assert PATHS[name].read_bytes() == made, \
        f"{name} differs from dcpfast.testing.sample_files(): python tests/test_samples.py"


def test_the_server_side_is_a_clean_stream():
    batch = dcpfast.read(dio.SAMPLE)
    assert batch.collections and not batch.errors
    assert len(streams.failover_logs(batch)) and len(streams.stream_ends(batch))
    assert not streams.summarize([batch]).anomalies


def test_the_client_side_holds_the_setup():
    batch = dcpfast.read(dio.SAMPLE_CLIENT)
    assert not batch.errors
    assert len(streams.opens(batch)) == 1
    assert len(streams.controls(batch)) >= 3
    requested = streams.stream_requests(batch).column("vbucket").to_pylist()
    server = dcpfast.read(dio.SAMPLE)
    assert sorted(requested) == sorted(set(server.only("mutation")["vbucket"].tolist()))


def test_the_capture_holds_both_sides():
    sides = {b.connection.direction: b for b in dcpfast.read_pcap(dio.SAMPLE_PCAP)}
    assert set(sides) == {"client->server", "server->client"}
    client, server = sides["client->server"], sides["server->client"]
    assert client.to_arrow().select(dcpfast.read(dio.SAMPLE_CLIENT).columns).equals(
        dcpfast.read(dio.SAMPLE_CLIENT).to_arrow().select(client.columns))
    assert len(server) == len(dcpfast.read(dio.SAMPLE))
    assert not client.errors and not server.errors


if __name__ == "__main__":
    for name, data in sample_files().items():
        PATHS[name].write_bytes(data)
        print(f"{PATHS[name]}: {len(data):,} bytes")
    sys.exit(0)
