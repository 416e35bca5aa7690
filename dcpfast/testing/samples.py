"""The samples bundled with dcpfast (``SAMPLE``, ``SAMPLE_CLIENT`` and ``SAMPLE_PCAP``):
both directions of one synthetic conversation, so that every example of the documentation
shows something on them, made here so that a test can regenerate them and compare."""

from __future__ import annotations

import bisect
from pathlib import Path

from ..protocol import Magic, Opcode
from .capture import pcap_file, timed_packets
from .conversation import SyntheticFrame, synthetic_conversation

__all__ = ["SAMPLE", "SAMPLE_CLIENT", "SAMPLE_NAMES", "SAMPLE_PCAP", "sample_files"]

_DATA = Path(__file__).parent / "data"
#: A small dump bundled with dcpfast, the server's side of a DCP conversation: four vbucket
#: streams with collections and durable writes.
SAMPLE = _DATA / "sample.dcp"
#: The client's side of the same conversation: HELLO, DCP Open, Controls, Stream Requests,
#: Noop responses and Buffer Acknowledgements.
SAMPLE_CLIENT = _DATA / "sample-client.dcp"
#: A pcap capture of the same conversation, both directions (``dcpfast.pcap.read_pcap``),
#: timed as a server might send it: a chunk of a vbucket's stream every quarter second,
#: the client answering within a millisecond, and one stall: the last stream open, alone,
#: silent for ``_STALL_NS`` before its last chunk.
SAMPLE_PCAP = _DATA / "sample.pcap"
#: The bundled files: the server's side, the client's side, and a capture of both.
SAMPLE_NAMES = ("sample.dcp", "sample-client.dcp", "sample.pcap")
#: Four vbucket streams of 1,000 document changes in all, with collections and durable
#: writes (prepares, commits and aborts).
_ITEMS, _SEED = 1000, 17
_MS = 10**6
#: The capture's pace: between chunks of the server's stream (each sent at once), from a
#: server's chunk to the client's answer, from request to response in the setup.
_CHUNK_NS, _ANSWER_NS, _SETUP_NS = 250 * _MS, 800_000, 400_000
#: The stall before the last chunk.
_STALL_NS = 12_000 * _MS


def sample_files() -> dict[str, bytes]:
    """The contents of the bundled samples, by file name (``SAMPLE_NAMES``)."""
    client, server = synthetic_conversation(_ITEMS, seed=_SEED, sync_writes=True)
    client_bytes = b"".join(f.data for f in client)
    server_bytes = b"".join(f.data for f in server)
    return {"sample.dcp": server_bytes, "sample-client.dcp": client_bytes,
            "sample.pcap": pcap_file(timed_packets(_timeline(client, server)))}


def _timeline(client: list[SyntheticFrame], server: list[SyntheticFrame]) -> list:
    """``(time, from_client, data)`` of every frame of the conversation: the setup as
    request and response pairs, then the server's stream in chunks (a run of one
    vbucket's frames), each client frame just after the server frame it answers (a NOOP
    response after its NOOP, a Buffer Acknowledgement after the last byte it counts)."""
    replies = [f for f in server if f.fields["magic"] == Magic.CLIENT_RESPONSE]
    stream = [f for f in server if f.fields["magic"] != Magic.CLIENT_RESPONSE]
    late = client[len(replies):]
    start = max(f.fields.get("cas", 0) for f in stream) // 10**9 * 10**9 + 2 * 10**9
    out = []
    for k, (asked, answer) in enumerate(zip(client, replies)):
        out += [(start + k * 2 * _MS, True, asked.data),
                (start + k * 2 * _MS + _SETUP_NS, False, answer.data)]
    t = start + len(replies) * 2 * _MS
    times, vbucket, chunk = [], None, bytearray()
    for k, f in enumerate(stream):
        vb = f.fields.get("vbucket")
        if vb is not None and vb != vbucket:
            if chunk:
                out.append((t, False, bytes(chunk)))
                chunk.clear()
            last = all(g.fields.get("vbucket") in (vb, None) for g in stream[k:])
            t += _CHUNK_NS + (_STALL_NS if last and vbucket is not None else 0)
            vbucket = vb
        chunk += f.data
        times.append(t)
    out.append((t, False, bytes(chunk)))
    counted, owed = 0, []
    for f in stream:
        counted += len(f.data)
        owed.append(counted)
    noops = {f.fields["opaque"]: times[k] for k, f in enumerate(stream)
             if f.fields["opcode"] == Opcode.NOOP}
    acked = 0
    for f in late:
        if f.fields["opcode"] == Opcode.NOOP:
            at = noops[f.fields["opaque"]]
        else:                                 # a Buffer Acknowledgement of what arrived
            acked += int.from_bytes(f.data[24:28], "big")
            at = times[min(bisect.bisect_left(owed, acked), len(times) - 1)]
        out.append((at + _ANSWER_NS, True, f.data))
    return out
