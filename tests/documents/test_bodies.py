"""The values of a state's versions held by reference (``dcpfast.documents.bodies``):
gathered, copied down and compacted, from Arrow chunks and from extents of a batch's bytes,
whatever the chunks' ids."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast import values as V
from tests.test_arrow import maps_in_chunks

_bodies = st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(_bodies, maps_in_chunks), max_size=4), data=st.data())
def test_state_values_by_reference(chunks, data):
    """The state's values held by reference (``documents.bodies``): gathered at any refs
    (-1 among them) from chunks that come together from several sets, they are the
    values referred to; copied down (``owned``: into a chunk that holds only them;
    ``compacted``: those of chunks holding more than twice what is used), they still
    are, and a compacted set has nothing more to copy down."""
    from dcpfast.documents import bodies

    sets, expected_body, expected_maps = [], {}, {}
    for body, maps in chunks:
        n = min(len(body), len(maps))
        chunk, held = bodies.register(bodies.arrow_chunk(
            pa.array(body[:n], pa.large_binary()), pa.array(maps[:n], bodies.xattr_type())))
        sets.append(held)
        for i in range(n):
            ref = int(bodies.refs(chunk, np.array([i]))[0])
            expected_body[ref], expected_maps[ref] = body[i], maps[i]
    every = bodies.union(sets)
    refs = [-1, *expected_body]
    vref = np.array(data.draw(st.lists(st.sampled_from(refs), max_size=12)), np.int64)

    def check(held, vref_now):
        body, maps = bodies.gather(held, vref_now)
        assert body.to_pylist() == [expected_body.get(int(r)) for r in vref]
        got = [None if m is None else dict(m) for m in maps.to_pylist()]
        assert got == [None if expected_maps.get(int(r)) is None
                       else dict(expected_maps[int(r)]) for r in vref]

    check(every, vref)
    into, done = bodies.SpillFile(), {}
    spilled = bodies.spilled(every, into, done)
    assert (spilled is None) == (every is None)
    assert all(isinstance(c, bodies.Spilled) and not c.buffers
               for c in (spilled or {}).values())
    check(spilled, vref)                          # read back from the spill file
    check(*bodies.owned(spilled, vref))
    written = into.size
    assert bodies.spilled(every, into, done) == spilled and into.size == written
    held, moved = bodies.owned(every, vref)
    check(held, moved)
    assert held is None or [len(c) for c in held.values()] == [len(vref)]
    held, moved = bodies.compacted(every, vref, slack=0)
    check(held, moved)
    assert (held is None) == (every is None)      # values stay values, even none used
    again = bodies.compacted(held, moved, slack=0)
    assert again[0] is held and (again[1] == moved).all()
    if bodies.nbytes(every) and not (vref >= 0).any():     # chunks held for nothing
        assert bodies.compacted(every, vref, slack=0)[0] is not every
    assert bodies.compacted(every, vref, slack=bodies.nbytes(every))[0] is every
    if every and any(r >= 0 for r in vref):
        with pytest.raises(ValueError):
            bodies.gather({}, vref)


@pytest.mark.parametrize("threads", [1, 3])
def test_state_values_as_extents(threads, monkeypatch):
    """The state's chunk of a batch's values (extents of the batch's bytes and of the
    buffers its Snappy values were inflated into: no body copied) gathers, in any order,
    to the bodies and xattrs ``values`` gives, in one piece or several."""
    from dcpfast.documents import bodies

    monkeypatch.setattr("dcpfast.threads.idle_threads", lambda: 3)
    monkeypatch.setattr("dcpfast.threads.default_threads", lambda: 3)
    data = t.synthetic_stream(6000, seed=9, value_size=600, snappy_ratio=0.5,
                              xattr_ratio=0.5)
    batch = dcpfast.scan(data)
    expected = batch.values(threads=1)
    extents, damaged = V.value_extents(batch, threads=threads)
    assert damaged == []
    rows, chunk = bodies.extents_chunk(extents)
    assert rows.tolist() == expected.column("index").to_pylist()
    assert (len(chunk.buffers) > 2) == (threads > 1)     # a buffer inflated per piece
    assert (chunk.source > 0).any() and (chunk.source == 0).any()
    ident, held = bodies.register(chunk)
    order = np.random.default_rng(1).permutation(len(rows))
    body, maps = bodies.gather(held, bodies.refs(ident, order))
    assert body.to_pylist() == expected.column("body").take(order).to_pylist()
    assert [None if m is None else dict(m) for m in maps.to_pylist()] == \
        [None if m is None else dict(m)
         for m in expected.column("xattrs").take(order).to_pylist()]


@pytest.mark.parametrize("gap", [0, 700, 1 << 20])
def test_spilled_values_read_back_in_runs(gap, monkeypatch):
    """A batch's chunk spilled to a file (``bodies.SpillFile``) no longer holds the batch's
    bytes, and gathers, in any order and from any few of its entries, what the chunk did,
    whether the bodies are read back one by one, a few together or all at once; so do
    several chunks spilled into one file, among chunks still in memory."""
    import weakref

    from dcpfast.documents import bodies

    monkeypatch.setattr(bodies, "READ_GAP", gap)
    data = np.frombuffer(t.synthetic_stream(3000, seed=4, value_size=900, snappy_ratio=0.5,
                                            xattr_ratio=0.5), np.uint8).copy()
    batch = dcpfast.scan(data)
    extents, _ = V.value_extents(batch, threads=1)
    _, chunk = bodies.extents_chunk(extents)
    mine = bodies.arrow_chunk(pa.array([b"m", None, b""], pa.large_binary()),
                              pa.array([None, [("k", "v")], None], bodies.xattr_type()))
    (a, held), (b, other), (c, kept) = map(bodies.register, (chunk, chunk, mine))
    every = {**held, **other, **kept}
    rng = np.random.default_rng(gap)
    vref = np.concatenate([bodies.refs(a, rng.permutation(len(chunk))[:200]),
                           bodies.refs(b, np.sort(rng.permutation(len(chunk))[:50])),
                           bodies.refs(c, np.array([2, 0, 1, -1]))])
    rng.shuffle(vref)
    into = bodies.SpillFile()
    spilled = {**bodies.spilled({**held, **other}, into, {}), **kept}
    assert into.size == 2 * int(chunk.length.sum())
    expected = bodies.gather(every, vref)
    alive = weakref.ref(data)
    del data, batch, extents, chunk, held, other, every
    assert alive() is None                  # the spilled chunks hold none of its bytes
    got = bodies.gather(spilled, vref)
    assert got[0].equals(expected[0]) and got[1].equals(expected[1])
    assert bodies.gather(spilled, vref[:0])[0].to_pylist() == []


def test_state_values_gathered_whatever_their_chunk_ids():
    """Values are gathered from chunks whose ids follow each other, leave gaps, or lie far
    apart (ids that wrapped past 2**31), and a ref to a chunk not held (below, between or
    above those held) is refused."""
    from dcpfast.documents import bodies

    def chunk(i):
        return bodies.arrow_chunk(pa.array([b"a%d" % i, None, b"b%d" % i], pa.large_binary()),
                                  pa.array([None, None, [("k", "v")]], bodies.xattr_type()))
    for ids, missing in (((7, 8, 9), (6, 10)), ((2, 4), (1, 3, 5)),
                         ((3, 2**30, 2**31 - 5), (4, 2**31 - 4)), ((1, 5000), (2, 4999))):
        held = {i: chunk(i) for i in ids}
        vref = np.array([*(int(bodies.refs(i, np.array([e]))[0]) for i in ids
                           for e in (2, 0, 1)), -1], np.int64)
        body, maps = bodies.gather(held, vref)
        assert body.to_pylist() == [*(v for i in ids for v in (b"b%d" % i, b"a%d" % i, None)),
                                    None]
        assert maps.to_pylist() == [*([[("k", "v")], None, None] * len(ids)), None]
        for i in missing:
            with pytest.raises(ValueError):
                bodies.gather(held, bodies.refs(i, np.array([0])))
