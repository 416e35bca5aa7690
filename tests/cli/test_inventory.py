"""``Inventory`` (``dcpfast.cli.inventory``), what ``dcpfast info`` counts: over many batches of a
damaged stream, the counts taken frame by frame in plain Python."""

from __future__ import annotations

from collections import Counter

import dcpfast
from dcpfast import testing as t
from dcpfast.cli.inventory import Inventory
from dcpfast.protocol import Opcode


def inventory_of(batches) -> Inventory:
    found = Inventory()
    for batch in batches:
        found.update(batch)
    return found


def test_inventory_counts_from_first_principles():
    """The counts of ``Inventory`` over many batches of a damaged stream equal the same
    counts taken frame by frame in plain Python from the decoded columns."""
    data = t.synthetic_stream(3000, seed=5, vbuckets=7, collections=True, sync_writes=True)
    cut = len(data) // 3
    damaged = data[:cut] + b"\x00" * 50 + data[cut:]
    chunks = [damaged[i:i + 50_000] for i in range(0, len(damaged), 50_000)]
    batches = list(dcpfast.iter_batches(chunks, 64 << 10, collections=True, errors="skip",
                                        columns=[*Inventory.COLUMNS, "magic"]))
    assert len(batches) > 5 and sum(len(b.errors) for b in batches) >= 1
    found = inventory_of(batches)

    documents = {Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION, Opcode.PREPARE,
                 Opcode.COMMIT, Opcode.ABORT}
    frames = size = 0
    opcodes, collections, vbuckets = Counter(), Counter(), {}
    for b in batches:
        for op, vb, seqno, cid, body, magic in zip(
                b["opcode"].tolist(), b["vbucket"].tolist(), b["by_seqno"].tolist(),
                b["collection_id"].tolist(), b["body_len"].tolist(), b["magic"].tolist()):
            frames += 1
            size += 24 + body
            opcodes[op] += 1
            # a vbucket's frames: its requests, not the connection's (NOOP, Open, Control)
            if magic not in (0x80, 0x08) or op in (0x1F, 0x50, 0x5C, 0x5D, 0x5E):
                continue
            entry = vbuckets.setdefault(vb, [0, 0, []])
            entry[0] += 1
            if op in documents:
                entry[1] += 1
                entry[2].append(seqno)
                collections[cid] += 1
    assert found.frames == frames and found.bytes == size and found.collections_on
    assert {op: n for op, n in enumerate(found.opcodes.tolist()) if n} == dict(opcodes)
    assert found.collections == collections and len(collections) > 1
    assert {vb: (v.frames, v.documents, v.first_seqno, v.last_seqno)
            for vb, v in found.vbuckets.items()} == \
        {vb: (n, docs, min(s) if s else None, max(s) if s else None)
         for vb, (n, docs, s) in vbuckets.items()}
    assert len(vbuckets) == 7 and 0 not in found.vbuckets
    assert found.skipped == [r for b in batches for r in b.errors]
    assert not found.connections

    plain = inventory_of(dcpfast.iter_batches([damaged], errors="skip", collections=False))
    assert plain.frames == frames and not plain.collections and not plain.collections_on
    empty = Inventory()
    assert empty.frames == 0 and empty.collections_on is None and not empty.vbuckets
