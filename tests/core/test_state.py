"""The state core (``cstate``) and its pure-Python twin (``pystate``) give the same answers
on random input: the stream checks, the state walk, the key index, ``newest`` and
``pair_durable``; the key index's C header on its own."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast._core import contract as C
from tests.c_probes import CORE, PROBES, compiler
from tests.cores import COMPILED, TWINS

needs_compiled = pytest.mark.skipif(COMPILED is None, reason="no compiled cores were built")
CORES = [TWINS["state"]] + ([COMPILED["state"]] if COMPILED else [])
U64 = st.integers(0, 2**64 - 1)
SMALL = st.integers(0, 40)


def both(fn):
    """``fn(core)`` for the twin and the compiled core, checked to be equal."""
    answers = [fn(core) for core in CORES]
    for answer in answers[1:]:
        assert_same(answers[0], answer)
    return answers[0]


def assert_same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


EVENTS = [C.EV_ITEM, C.EV_ADVANCE, C.EV_MARKER, C.EV_OSO_START, C.EV_OSO_END, C.EV_END,
          C.EV_REQUEST, C.EV_RESPONSE, C.EV_NONE]


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 2), st.integers(0, 7),
                          st.integers(0, 3), SMALL, SMALL, st.integers(0, 8),
                          st.sampled_from([1, 2, 0x12, 0x10, 6]), st.integers(0, 8)),
                min_size=1, max_size=60), st.integers(1, 4))
def test_stream_checks_agree(rows, pieces):
    """The same findings, run starts and carried state, in one call or in several."""
    n = len(rows)
    cols = list(zip(*rows)) or [()] * 9
    event = np.array(cols[0], np.uint8)
    slot, info, opaque = (np.array(cols[k], dtype) for k, dtype in
                          ((1, np.int64), (2, np.uint8), (3, np.uint32)))
    seqno = np.array(cols[4], np.uint64)
    snap_start = np.array(cols[5], np.uint64)
    snap_end = snap_start + np.array(cols[6], np.uint64)
    flags = np.array(cols[7], np.uint32)
    status = np.array(cols[8], np.uint32)

    def run(core, cuts):
        state = np.zeros((3, C.C_FIELDS), np.uint64)
        found, starts = [], []
        for lo, hi in zip(cuts, cuts[1:]):
            part = slice(lo, hi)
            got = core.check_streams(C.CheckRequest(
                event=event[part], slot=slot[part], info=info[part], opaque=opaque[part],
                seqno=seqno[part], snap_start=snap_start[part], snap_end=snap_end[part],
                snap_flags=flags[part], end_status=status[part], state=state))
            assert isinstance(got, C.CheckResult) and got.starts.dtype == bool
            f = got.findings
            found.append((f.at + lo, f.rule, f.found, f.given, f.low, f.high))
            starts.append(got.starts)
        return tuple(np.concatenate(c) for c in zip(*found)), np.concatenate(starts), state
    cuts = sorted({0, n, *np.linspace(0, n, pieces + 1).astype(int).tolist()})
    whole = both(lambda core: run(core, [0, n]))
    # the findings do not depend on where the rows are cut
    assert_same(both(lambda core: run(core, cuts)), whole)


WHATS = [C.W_MUTATION, C.W_PREPARE, C.W_COMMIT, C.W_EVENT, C.W_ADVANCE, C.W_MARKER,
         C.W_OSO, C.W_RESTART, C.W_END, C.W_LOSS, C.W_SKIP]


@needs_compiled
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(WHATS), st.integers(0, 2), SMALL, SMALL,
                          st.integers(0, 5), st.integers(0, 3), st.booleans(),
                          st.integers(0, 40), st.booleans()), max_size=60),
       st.sampled_from([None, 15, 30]))
def test_state_walk_agrees(rows, at_time):
    """Both cores walk alike; rows of no stream (``W_SKIP``, slot -1) change nothing:
    the walk without them is the same."""
    answer = _walk(rows, at_time)
    kept = [i for i, row in enumerate(rows) if row[0] != C.W_SKIP]
    without = _walk([rows[i] for i in kept], at_time)
    for got, want in zip(answer[:5], without[:5]):
        assert (got[kept] == want).all()
    assert all((a == b).all() for a, b in zip(answer[5:], without[5:]))


def _walk(rows, at_time):
    n = len(rows)
    cols = list(zip(*rows)) or [()] * 9
    what = np.array(cols[0], np.uint8)
    slot = np.array(cols[1], np.int64)
    slot[what == C.W_SKIP] = -1
    seqno = np.array(cols[2], np.uint64)
    cas = np.array(cols[3], np.uint64) << np.uint64(16)
    snap_start = seqno
    snap_end = seqno + np.array(cols[4], np.uint64)
    oso = np.array(cols[5], np.uint32)
    rolled = np.array(cols[6], np.uint8)
    limit = np.array(cols[7], np.uint64)
    lost = np.array(cols[8], np.uint8)

    def run(core):
        carry = np.zeros((3, C.K_FIELDS), np.uint64)
        carry[:, C.K_CUT] = carry[:, C.K_FLOOR] = np.uint64(2**64 - 1)
        carry[:, C.K_BITS] = C.K_FRESH
        got = core.walk_state(C.WalkRequest(
            what=what, slot=slot, seqno=seqno, cas=cas, snap_start=snap_start,
            snap_end=snap_end, oso=oso, rolled=rolled, limit=limit, lost=lost,
            at_time=2**64 - 1 if at_time is None else at_time << 16, carry=carry))
        assert isinstance(got, C.WalkResult) and len(got.bad) == n
        return (got.bad, got.previous, got.applies, got.point, got.known, got.carried_slots,
                got.carried_points, carry)
    return both(run)


KEYS = st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\xff", b"\x00"))


@needs_compiled
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"", b"a", b"ab\x00", b"x" * 17, b"x" * 17 + b"y"])
                          | KEYS, st.sampled_from([0, 5 << 16, 5 << 16 | 1, 7 << 16]),
                          st.sampled_from([0, 8, 9])), max_size=80), st.integers(1, 3))
def test_key_index_agrees(keys, pieces):
    data = b"".join(k for k, _, _ in keys)
    lengths = np.array([len(k) for k, _, _ in keys], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) \
        if len(keys) else np.zeros(0, np.int64)
    unit = np.array([u for _, u, _ in keys], np.uint32)
    cid = np.array([c for _, _, c in keys], np.uint32)
    cuts = sorted({0, len(keys), *np.linspace(0, len(keys), pieces + 1).astype(int).tolist()})

    def run(core):
        index = core.KeyIndex()
        ids = [index.ids(data, starts[lo:hi], lengths[lo:hi], unit[lo:hi], cid[lo:hi])
               for lo, hi in zip(cuts, cuts[1:])]
        ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        every = np.arange(len(index), dtype=np.int64)[::-1].copy()
        mixed = np.concatenate([ids, ids[:3]])
        return (ids, np.array([len(index)]), index.keys(every), index.streams(every),
                index.order(mixed), index.firsts(unit, cid))
    ids, size, keys_out, streams, (order, ties), firsts = both(run)
    # the ids name the documents: the same (stream, collection, key), the same id
    seen: dict = {}
    for i, (key, u, c) in enumerate(keys):
        assert seen.setdefault((u, c, key), ids[i]) == ids[i]
    assert size[0] == len(seen)
    # the order is the documents' (vbucket, collection, key bytes), ties in place
    mixed = np.concatenate([ids, ids[:3]])
    names = {i: (u >> 16, c, k) for (u, c, k), i in seen.items()}
    ranked = [names[int(mixed[p])] for p in order]
    assert ranked == sorted(ranked)
    assert ties.tolist() == [p > 0 and ranked[p] == ranked[p - 1] for p in range(len(ranked))]


@pytest.mark.parametrize("collections", [True, False])
def test_key_index_of_frames(collections):
    """``frame_ids`` reads the key place, stream and collection of the frames it is given
    from a batch's columns: the ids ``ids`` gives those gathered by hand, in both cores,
    for a batch that starts past the stream's first byte; a frame outside the columns or a
    key before the batch is refused."""
    stream = t.synthetic_stream(300, seed=5, vbuckets=3, collections=collections)
    cut = int(dcpfast.scan(stream, collections=collections)["offset"][7])
    batch = dcpfast.scan(stream[cut:], collections=collections, base_offset=cut)
    rows = np.flatnonzero(batch["key_len"] > 0)[::2].copy()
    cid = batch["collection_id"] if collections else None
    columns = (batch["key_offset"], batch["key_len"], batch["vbucket"], batch["stream_id"],
               cid)
    starts = (batch["key_offset"][rows] - np.uint64(cut)).astype(np.int64)
    unit = (batch["vbucket"][rows].astype(np.uint32) << 16) | batch["stream_id"][rows]
    gathered = (starts, batch["key_len"][rows].astype(np.int64), unit,
                cid[rows] if collections else np.zeros(len(rows), np.uint32))
    data = stream[cut:]

    def run(core):
        index, by_hand = core.KeyIndex(), core.KeyIndex()
        ids = index.frame_ids(data, cut, rows, *columns)
        assert_same(ids, by_hand.ids(data, *gathered))
        for bad in ([len(batch)], [-1]):
            with pytest.raises(ValueError):
                index.frame_ids(data, cut, np.array(bad, np.int64), *columns)
        with pytest.raises(ValueError):
            index.frame_ids(data, cut + (1 << 20), rows[:1], *columns)
        for short in (data[:int(starts[-1])], b""):      # the last key past the end
            with pytest.raises(ValueError):
                index.frame_ids(short, cut, rows[-1:], *columns)
        return ids, index.keys(ids)
    ids, _ = both(run)
    assert 0 < len(set(ids.tolist())) < len(rows)


@pytest.mark.parametrize("seed", [1, 2])
def test_key_index_across_its_chunks(seed):
    """Thousands of keys scattered through the input out of order, seen again and again:
    first only short ones (the compiled index copies them out a full chunk at a time),
    then some so long that a few fill the room it copies to (a new chunk then), and some
    longer than it copies at all (found where they are). Each (stream, collection, key)
    gets one id, the same in both cores, and its bytes back."""
    rng = np.random.default_rng(seed)
    sizes = np.concatenate([rng.integers(0, 41, 400), rng.integers(15_000, 30_000, 12),
                            rng.integers(33_000, 40_000, 6)])
    drawn = [bytes(rng.integers(0, 256, size, np.uint8)) for size in sizes]
    drawn += [p[:-1] + bytes([p[-1] ^ 1]) for p in drawn[:20] if p]   # differ in the last byte
    picks = np.concatenate([rng.integers(0, 400, 7000), rng.integers(0, len(drawn), 5000)])
    unit = (rng.choice([1, 2], len(picks)).astype(np.uint32) << 16)
    cid = rng.choice([0, 8], len(picks)).astype(np.uint32)
    places = rng.permutation(len(picks))           # where in the input each key lies
    parts, starts = [], np.zeros(len(picks), np.int64)
    at = 0
    for i in places.tolist():
        gap = bytes(rng.integers(0, 256, rng.integers(0, 200), np.uint8))
        parts += [gap, drawn[picks[i]]]
        starts[i] = at + len(gap)
        at += len(gap) + len(drawn[picks[i]])
    data = b"".join(parts)
    lengths = np.array([len(drawn[k]) for k in picks], np.int64)

    def run(core):
        index = core.KeyIndex()
        first = index.ids(data, starts[:7000], lengths[:7000], unit[:7000], cid[:7000])
        ids = np.concatenate([first, index.ids(data, starts[7000:], lengths[7000:],
                                               unit[7000:], cid[7000:])])
        return ids, index.keys(np.arange(len(index), dtype=np.int64))
    ids, (offsets, kept) = both(run)
    names: dict = {}
    for i, k in enumerate(picks.tolist()):
        assert names.setdefault((int(unit[i]), int(cid[i]), drawn[k]), ids[i]) == ids[i]
    assert len(names) == len(set(ids.tolist())) == len(offsets) - 1
    for (_, _, key), d in names.items():
        assert kept[offsets[d]:offsets[d + 1]].tobytes() == key


@pytest.mark.parametrize("seed", [1, 2])
def test_key_order_of_large_groups(seed):
    """Groups (vbucket, collection) of thousands of documents, sorted by the digits of
    their first 16 key bytes and then by merges where those tie: keys shorter and longer
    than 16 bytes, keys that share their first 16 bytes or are prefixes of others, and
    zero bytes; several streams of a vbucket. The order is the keys' (vbucket,
    collection, key bytes), in both cores."""
    rng = np.random.default_rng(seed)
    heads = [bytes(rng.integers(0, 256, 16, np.uint8)) for _ in range(40)]
    keys = []
    for _ in range(9000):
        head = heads[rng.integers(len(heads))][:rng.integers(0, 17)]
        keys.append(head + bytes(rng.integers(0, 3, rng.integers(0, 12), np.uint8)))
    unit = (rng.choice([3, 700], len(keys)).astype(np.uint32) << 16) \
        | rng.integers(0, 2, len(keys)).astype(np.uint32)
    cid = np.where(rng.random(len(keys)) < 0.8, 8, 9).astype(np.uint32)
    data = b"".join(keys)
    lengths = np.array([len(k) for k in keys], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)

    def run(core):
        index = core.KeyIndex()
        ids = index.ids(data, starts, lengths, unit, cid)
        return ids, index.order(ids)
    ids, (order, ties) = both(run)
    ranked = [(int(unit[p]) >> 16, int(cid[p]), keys[p]) for p in order]
    assert ranked == sorted(ranked)
    assert len(set(ranked)) < len(ranked) < 3 * len(set(ranked))   # ties and groups made
    assert ties.tolist() == [p > 0 and ranked[p] == ranked[p - 1] for p in range(len(ranked))]
    for p in range(1, len(order)):              # a key's positions in stream order
        if ranked[p] == ranked[p - 1]:
            assert order[p] > order[p - 1]


@pytest.mark.parametrize("seed", [1, 2])
def test_versions_ordered_within_their_document(seed):
    """``order_versions(ids, seqno, gpos)``: by key, then seqno, then gpos, then
    position, and the seqnos in that order, in both cores: a document of one version, of
    a few out of order (sorted in place), of thousands out of order (sorted apart), of
    hundreds in order; seqnos and gposes that tie."""
    rng = np.random.default_rng(seed)
    counts = {b"one": 1, b"few": 12, b"many": 5000, b"sorted": 400}
    keys = [k for k, c in counts.items() for _ in range(c)]
    place = rng.permutation(len(keys))
    keys = [keys[i] for i in place]
    data = b"".join(keys)
    lengths = np.array([len(k) for k in keys], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    unit = np.full(len(keys), 3 << 16, np.uint32)
    cid = np.zeros(len(keys), np.uint32)
    seqno = rng.integers(0, 900, len(keys)).astype(np.uint64)
    gpos = rng.integers(0, 3, len(keys)).astype(np.int64)
    ranked = np.array([k == b"sorted" for k in keys])
    seqno[ranked] = np.arange(ranked.sum(), dtype=np.uint64)   # already in order

    def run(core):
        index = core.KeyIndex()
        ids = index.ids(data, starts, lengths, unit, cid)
        with pytest.raises(ValueError):
            index.order_versions(ids, seqno[:-1], gpos[:-1])
        return index.order_versions(ids, seqno, gpos)
    order, ties, in_order = both(run)
    expected = sorted(range(len(keys)), key=lambda p: (keys[p], int(seqno[p]), int(gpos[p]), p))
    assert order.tolist() == expected
    assert in_order.tolist() == seqno[expected].tolist()
    assert ties.tolist() == [p > 0 and keys[expected[p]] == keys[expected[p - 1]]
                             for p in range(len(keys))]


@needs_compiled
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 5)), max_size=50))
def test_newest_agrees(pairs):
    ids = np.array([i for i, _ in pairs], np.int64)
    order = np.array([k for _, k in pairs], np.int64)
    best = both(lambda core: core.newest(ids, order, 10))
    for g in range(10):
        mine = [j for j, i in enumerate(ids.tolist()) if i == g]
        want = max(mine, key=lambda j: (order[j], j)) if mine else -1
        assert best[g] == want


DURABLE = [C.W_MUTATION, C.W_DELETION, C.W_PREPARE, C.W_COMMIT, C.W_ABORT]


@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(DURABLE), st.integers(0, 4),
                          st.integers(0, 4)), max_size=60))
def test_durable_pairs_agree(changes):
    """Each commit with the change of its document just before it, judged its prepare
    where that is a prepare of the commit's prepared seqno, and the prepares still
    waiting: a model that sorts by document and position."""
    group = np.array([c[0] for c in changes], np.int64)
    what = np.array([c[1] for c in changes], np.uint8)
    seqno = np.array([c[2] for c in changes], np.uint64)
    prepared = np.array([c[3] for c in changes], np.uint64)
    commits, before, ok, waiting = both(lambda core: core.pair_durable(C.DurableRequest(
        group=group, what=what, seqno=seqno, prepared=prepared, size=6)))
    by_doc = sorted(range(len(changes)), key=lambda j: (changes[j][0], j))
    want_before, want_ok, want_waiting = {}, {}, []
    for k, j in enumerate(by_doc):
        earlier = by_doc[k - 1] if k and changes[by_doc[k - 1]][0] == changes[j][0] else -1
        if changes[j][1] == C.W_COMMIT:
            want_before[j] = earlier
            want_ok[j] = earlier >= 0 and changes[earlier][1] == C.W_PREPARE \
                and changes[earlier][2] == changes[j][3]
        last = k + 1 == len(by_doc) or changes[by_doc[k + 1]][0] != changes[j][0]
        if last and changes[j][1] == C.W_PREPARE:
            want_waiting.append(j)
    assert commits.tolist() == sorted(want_before)
    assert before.tolist() == [want_before[j] for j in sorted(want_before)]
    assert ok.tolist() == [want_ok[j] for j in sorted(want_before)]
    assert waiting.tolist() == sorted(want_waiting)


def test_key_index_of_many_documents():
    """An index of 300,000 documents, whose table, records and key bytes (spans of the
    scan core's cache) outgrow the size from which fresh ones are asked for huge pages,
    moving to larger spans as they grow: every document
    keeps its id and its key bytes, in both cores, through stretches that add new ones
    and look old ones up again out of order."""
    n = 300_000
    rng = np.random.default_rng(5)
    width = 11
    data = np.frombuffer(b"".join(b"doc-%07d" % i for i in range(n)), np.uint8).copy()
    data[rng.integers(0, len(data), 5000)] ^= 0x55          # some bytes not ASCII
    unit = (rng.integers(0, 4, n).astype(np.uint32) << 16)
    cid = rng.choice([0, 9], n).astype(np.uint32)
    order = [np.arange(0, n // 2), np.concatenate([rng.permutation(n // 2),
                                                   np.arange(n // 2, n)]),
             rng.permutation(n)]

    def run(core):
        index = core.KeyIndex()
        got = [index.ids(data, k * width, np.full(len(k), width, np.int64), unit[k], cid[k])
               for k in order]
        return np.concatenate(got), index.keys(np.arange(len(index), dtype=np.int64))
    ids, (offsets, kept) = both(run)
    first, second, third = np.split(ids, np.cumsum([len(k) for k in order])[:-1])
    assert first.tolist() == list(range(n // 2))       # new documents: ids in order
    assert second.tolist() == order[1].tolist()        # old ones looked up, then new ones
    assert third.tolist() == order[2].tolist()
    assert len(offsets) == n + 1 and np.array_equal(np.diff(offsets), np.full(n, width))
    assert kept.tobytes() == data.tobytes()


@pytest.mark.parametrize("sanitize", [False, True], ids=["plain", "sanitized"])
@pytest.mark.parametrize("probe", ["keys"])
def test_key_index_c_on_its_own(probe, sanitize, tmp_path):
    """The key index's C header on its own. keys.h, its hash and comparison: every byte
    of a key counts in both, at every alignment, and none outside it is read. The index
    only compares two keys whose hashes share a table slot and 24 bits, which the suite's
    keys never do, so only this reaches a wrong comparison. (Its tables live in spans,
    grown as tests/c/platform_probe.c checks.) Under AddressSanitizer too, where the
    compiler links it."""
    cc = compiler()
    if not (CORE / f"{probe}.h").is_file() or cc is None:
        pytest.skip("needs the source tree's dcpfast/_core and a C compiler")
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"] if sanitize \
        else []
    exe = tmp_path / f"{probe}_probe"
    built = subprocess.run([*cc, "-Wall", "-Werror", "-O2", *flags, f"-I{CORE}",
                            str(PROBES / f"{probe}_probe.c"), "-o", str(exe)],
                           capture_output=True, text=True)
    if sanitize and built.returncode:
        pytest.skip(f"the compiler does not link the sanitizers: {built.stderr[-200:]}")
    assert built.returncode == 0, built.stderr
    found = subprocess.run([str(exe)], capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.startswith("ok"), found.stdout + found.stderr


def test_cores_check_their_input():
    for core in CORES:
        with pytest.raises(ValueError):
            core.KeyIndex().ids(b"abc", np.array([2], np.int64), np.array([5], np.int64),
                                np.zeros(1, np.uint32), np.zeros(1, np.uint32))
        with pytest.raises(ValueError):
            core.newest(np.array([3], np.int64), np.array([0], np.int64), 2)
        one = np.zeros(1, np.uint64)
        for group, what in (([2], [C.W_COMMIT]), ([-1], [C.W_PREPARE]), ([0, 1], [0])):
            with pytest.raises(ValueError):
                core.pair_durable(C.DurableRequest(
                    group=np.array(group, np.int64), what=np.array(what, np.uint8), seqno=one,
                    prepared=one, size=2))


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2**20),
                          st.sampled_from([0, 2**64 - 1, 7, 12]), st.booleans(),
                          st.booleans()), max_size=40))
def test_validity_agrees(rows):
    """When the versions of a history last, in both cores, against the rule: a version
    ended by a collection clear lasts to the clear's seqno, unless the next version of
    its document has a lower seqno; else, where the next version is of its document, to
    that one's seqno and clock; else it is open-ended. Only the versions kept are
    answered for."""
    n = len(rows)
    seqno, cas, gone = (np.array([r[k] for r in rows], np.uint64).reshape(n) for k in range(3))
    same = np.array([r[3] for r in rows], bool).reshape(n)
    if n:
        same[-1] = False
    kept = np.array([i for i, r in enumerate(rows) if r[4]], np.int64)
    alive, discarded = 2**64 - 1, 0

    def run(core, chosen):
        m = n if chosen is None else len(chosen)
        out = C.ValidityResult(
            from_seqno=np.zeros(m, np.uint64), from_time=np.zeros(m, np.int64),
            to_seqno=np.zeros(m, np.uint64), to_time=np.zeros(m, np.int64),
            seqno_valid=np.zeros(m, np.uint8), time_valid=np.zeros(m, np.uint8))
        assert core.validity(C.ValidityRequest(
            seqno=seqno, cas=cas, gone=gone, same=same.view(np.uint8), kept=chosen, alive=alive,
            discarded=discarded, out=out)) is out
        return out
    for chosen in (None, kept):
        answers = both(lambda core: run(core, chosen))
        rows_at = range(n) if chosen is None else chosen.tolist()
        clock = [int(c) & ~0xFFFF for c in cas]
        for j, i in enumerate(rows_at):
            ended = int(gone[i]) not in (alive, discarded) and not (
                bool(same[i]) and int(seqno[i + 1]) < int(gone[i]))
            follows = bool(same[i]) and not ended
            assert answers[0][j] == seqno[i] and answers[1][j] == clock[i]
            assert answers[4][j] == (ended or follows)
            assert answers[5][j] == follows
            if ended:
                assert answers[2][j] == gone[i]
            elif follows:
                assert (answers[2][j], answers[3][j]) == (seqno[i + 1], clock[i + 1])
    with pytest.raises(ValueError):
        run(CORES[-1], np.array([n], np.int64))
