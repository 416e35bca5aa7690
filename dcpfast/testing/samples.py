"""The samples bundled with dcpfast (``SAMPLE``, ``SAMPLE_CLIENT`` and ``SAMPLE_PCAP``):
both directions of one synthetic conversation, so that every example of the documentation
shows something on them, made here so that a test can regenerate them and compare."""

from __future__ import annotations

from pathlib import Path

from .capture import pcap_file, tcp_conversation, tcp_packets
from .conversation import synthetic_conversation

__all__ = ["SAMPLE", "SAMPLE_CLIENT", "SAMPLE_NAMES", "SAMPLE_PCAP", "sample_files"]

_DATA = Path(__file__).parent / "data"
#: A small dump bundled with dcpfast, the server's side of a DCP conversation: four vbucket
#: streams with collections and durable writes.
SAMPLE = _DATA / "sample.dcp"
#: The client's side of the same conversation: HELLO, DCP Open, Controls, Stream Requests,
#: Noop responses and Buffer Acknowledgements.
SAMPLE_CLIENT = _DATA / "sample-client.dcp"
#: A pcap capture of the same conversation, both directions (``dcpfast.pcap.read_pcap``).
SAMPLE_PCAP = _DATA / "sample.pcap"
#: The bundled files: the server's side, the client's side, and a capture of both.
SAMPLE_NAMES = ("sample.dcp", "sample-client.dcp", "sample.pcap")
#: Four vbucket streams of 1,000 document changes in all, with collections and durable
#: writes (prepares, commits and aborts).
_ITEMS, _SEED = 1000, 17


def sample_files() -> dict[str, bytes]:
    """The contents of the bundled samples, by file name (``SAMPLE_NAMES``)."""
    client, server = synthetic_conversation(_ITEMS, seed=_SEED, sync_writes=True)
    client_bytes = b"".join(f.data for f in client)
    server_bytes = b"".join(f.data for f in server)
    segments = tcp_conversation(client_bytes, server_bytes, seed=_SEED)
    return {"sample.dcp": server_bytes, "sample-client.dcp": client_bytes,
            "sample.pcap": pcap_file(tcp_packets(segments))}
