"""Pure-Python twin of the compiled state core ``cstate`` (``DCPFAST_PUREPYTHON=1`` selects
it): the same names and signatures, one row at a time, written for clarity. Each call but
``newest`` takes a request of ``contract`` and returns its result, whose fields say what
the call is given and answers.

- ``check_streams``: the stream checks (what ``streams.summarize`` reports and what tells
  ``dcpfast.state`` that frames were lost), one event per row of each vbucket stream in
  arrival order, each stream's check state carried in a row of ``state``;
- ``walk_state``: the state engine's walk of its rows (seqno order, restart points, the
  time cut, complete snapshots and the consistent seqno), each stream's walk state
  carried in a row of ``carry``;
- ``KeyIndex``: a dense id per document (stream, collection, key), its key bytes, and the
  documents in key order;
- ``newest``: per id, the element with the highest order key;
- ``validity``: when the versions of a history last;
- ``pair_durable``: durable writes paired.

The codes the callers and both cores agree on are in ``contract``; the rules are written
down in docs/streams.md and docs/state.md.
"""

from __future__ import annotations

import numpy as np

from . import contract as C
from .contract import (
    CS_ADVANCED,
    CS_CHAIN,
    CS_ENDED,
    CS_LAST_START,
    CS_NO_SNAP,
    CS_OPAQUE,
    CS_OPEN,
    CS_REACH,
    CS_SNAP_MARKER,
    CS_SNAP_MASK,
    CS_SNAP_OSO,
    CS_SNAP_OSO_CLOSED,
    CS_SNAP_SHIFT,
    CS_STARTED,
    CS_UNFILTERED,
    K_FRESH,
    K_ITEMS,
    K_LOST,
    P_END_OK,
    P_OSO_END,
    P_OSO_START,
    P_SNAP_DISK,
    P_SNAP_HISTORY,
    WS_COMPLETED,
    WS_HAS_MARKER,
    WS_IN_OSO,
    WS_LAZY,
    CheckRequest,
    CheckResult,
    DurableRequest,
    DurableResult,
    Findings,
    ValidityRequest,
    ValidityResult,
    WalkRequest,
    WalkResult,
)

_BOTH = C.GIVEN_FOUND | C.GIVEN_RANGE
_MAX = 2**64 - 1
_CLOCK = ~0xFFFF & _MAX
_TIMED = (C.W_MUTATION, C.W_DELETION, C.W_EXPIRATION, C.W_PREPARE)
_ITEM_ROWS = (C.W_MUTATION, C.W_DELETION, C.W_EXPIRATION, C.W_PREPARE, C.W_COMMIT,
              C.W_ABORT, C.W_EVENT, C.W_ADVANCE)


# long: one loop over the rows, each event's rule in its branch, read as one
def check_streams(request: CheckRequest) -> CheckResult:
    """The stream checks over rows in arrival order, each stream's check state carried in
    its row of ``request.state``: the anomalies of each stream (docs/streams.md says what
    each rule is and why) and where its runs start."""
    event, slot, info, opaque, seqno = (request.event, request.slot, request.info,
                                        request.opaque, request.seqno)
    snap_start, snap_end, snap_flags = request.snap_start, request.snap_end, request.snap_flags
    end_status, state = request.end_status, request.state
    _lengths(len(event), slot, info, opaque, seqno, snap_start, snap_end, snap_flags,
             end_status)
    if state.shape[1] != C.C_FIELDS:
        raise ValueError("the check state has C_FIELDS columns")
    for ev, s in zip(event, slot):
        if ev != C.EV_NONE and not 0 <= s < len(state):
            raise ValueError(f"slot {s} outside the check state")
    out: list[tuple[int, int, int, int, int, int]] = []
    starts = np.zeros(len(event), bool)
    for i in range(len(event)):
        ev = int(event[i])
        if ev == C.EV_NONE:
            continue
        st = state[int(slot[i])]
        bits = int(st[C.C_BITS])
        op = int(opaque[i])
        if not bits & CS_OPEN or bits & CS_ENDED:
            bits = CS_OPEN
            starts[i] = 1
        if ev == C.EV_REQUEST or ev == C.EV_RESPONSE:
            if not (bits & CS_LAST_START and bits & CS_OPAQUE and int(st[C.C_OPAQUE]) == op):
                bits = CS_OPEN | CS_STARTED
                starts[i] = 1
            bits |= CS_LAST_START | CS_OPAQUE
            st[C.C_OPAQUE] = op
            if ev == C.EV_REQUEST:
                if info[i] & C.INFO_UNFILTERED:
                    bits |= CS_UNFILTERED
                if info[i] & C.INFO_SEED:
                    bits |= CS_CHAIN
                    st[C.C_CHAIN] = seqno[i]
            st[C.C_BITS] = bits
            continue
        if bits & CS_OPAQUE and int(st[C.C_OPAQUE]) != op:
            bits = CS_OPEN
            starts[i] = 1
        bits = (bits | CS_OPAQUE) & ~CS_LAST_START
        st[C.C_OPAQUE] = op
        snap = (bits & CS_SNAP_MASK) >> CS_SNAP_SHIFT
        collections = bool(info[i] & C.INFO_COLLECTIONS)
        if ev == C.EV_ITEM or ev == C.EV_ADVANCE:
            q = int(seqno[i])
            if snap != CS_SNAP_OSO:
                chain = int(st[C.C_CHAIN])
                if bits & CS_CHAIN and (q < chain or (q == chain and ev != C.EV_ADVANCE)):
                    out.append((i, C.R_BACKWARDS, q, _BOTH, chain, chain))
                st[C.C_CHAIN] = q
                bits |= CS_CHAIN
                if ev == C.EV_ITEM:
                    if snap == CS_SNAP_MARKER:
                        if not int(st[C.C_START]) <= q <= int(st[C.C_END]):
                            out.append((i, C.R_OUTSIDE, q, _BOTH, int(st[C.C_START]),
                                        int(st[C.C_END])))
                    elif snap == CS_SNAP_OSO_CLOSED or bits & CS_STARTED:
                        out.append((i, C.R_OUTSIDE, q, C.GIVEN_FOUND, 0, 0))
            if ev == C.EV_ADVANCE:
                bits |= CS_ADVANCED
            if not bits & CS_REACH or q > int(st[C.C_REACH]):
                st[C.C_REACH] = q
            bits |= CS_REACH
        elif ev == C.EV_MARKER or ev == C.EV_OSO_START:
            _closed(st, bits, snap, i, ev, collections, 0, int(snap_start[i]),
                    int(snap_end[i]), int(snap_flags[i]), out)
            if snap == CS_SNAP_OSO:
                out.append((i, C.R_OSO_NOT_ENDED, 0, 0, 0, 0))
            bits &= ~(CS_SNAP_MASK | CS_REACH)
            if ev == C.EV_MARKER:
                bits |= CS_SNAP_MARKER << CS_SNAP_SHIFT
                st[C.C_START], st[C.C_END] = snap_start[i], snap_end[i]
                st[C.C_FLAGS] = snap_flags[i]
            else:
                bits |= CS_SNAP_OSO << CS_SNAP_SHIFT
        elif ev == C.EV_OSO_END:
            if snap == CS_SNAP_OSO:
                if bits & CS_REACH:
                    st[C.C_CHAIN] = st[C.C_REACH]
                    bits |= CS_CHAIN
                bits = (bits & ~(CS_SNAP_MASK | CS_REACH)) | CS_SNAP_OSO_CLOSED << CS_SNAP_SHIFT
            elif bits & CS_STARTED or snap != CS_NO_SNAP:
                out.append((i, C.R_OSO_NOT_STARTED, 0, 0, 0, 0))
        elif ev == C.EV_END:
            _closed(st, bits, snap, i, ev, collections, int(end_status[i]), 0, 0, 0, out)
            bits |= CS_ENDED
        st[C.C_BITS] = bits
    return _found(out, starts)


def _lengths(n: int, *columns) -> None:
    if any(len(c) != n for c in columns):
        raise ValueError("every column needs one value per row")


def _closed(st, bits, snap, i, ev, collections, status, start, end, flags, out) -> None:
    """The checks on a snapshot that row ``i`` (a marker, an OSO start or a Stream End
    with ``status``; ``start``, ``end``, ``flags``: the new marker's) closes."""
    reached = bool(bits & CS_REACH)
    if snap == CS_SNAP_MARKER:
        top = int(st[C.C_END])
        if reached and int(st[C.C_REACH]) >= top:
            return
        rule = C.R_ENDED_INSIDE if ev == C.EV_END else C.R_EARLY
        if not int(st[C.C_FLAGS]) & P_SNAP_DISK:
            # a memory snapshot is sent whole; a filtered collection stream may leave
            # one short (MB-73354), so only unfiltered streams are judged
            if not collections or bits & CS_UNFILTERED:
                out.append(_short(st, i, rule, reached))
            return
        # a disk snapshot ends with its last item or a seqno advance when the stream
        # sends seqno advances; a change stream's History marker continues it
        if not collections or not bits & CS_ADVANCED:
            return
        if ev == C.EV_MARKER and not (flags & P_SNAP_HISTORY
                                      and not int(st[C.C_FLAGS]) & P_SNAP_HISTORY
                                      and end == top and start <= top):
            out.append(_short(st, i, rule, reached))
        elif ev == C.EV_END and status == P_END_OK:
            out.append(_short(st, i, rule, reached))
    elif snap == CS_SNAP_OSO and ev == C.EV_END and status == P_END_OK and collections \
            and bits & CS_ADVANCED:
        out.append((i, C.R_ENDED_INSIDE, int(st[C.C_REACH]) if reached else 0,
                    C.GIVEN_FOUND if reached else 0, 0, 0))


def _short(st, i, rule, reached) -> tuple[int, int, int, int, int, int]:
    return (i, rule, int(st[C.C_REACH]) if reached else 0,
            C.GIVEN_RANGE | (C.GIVEN_FOUND if reached else 0), int(st[C.C_START]),
            int(st[C.C_END]))


def _found(out, starts) -> CheckResult:
    n = len(out)
    return CheckResult(Findings(at=np.array([o[0] for o in out], np.int64),
                                rule=np.array([o[1] for o in out], np.uint8),
                                found=np.array([o[2] for o in out], np.uint64).reshape(n),
                                given=np.array([o[3] for o in out], np.uint8),
                                low=np.array([o[4] for o in out], np.uint64).reshape(n),
                                high=np.array([o[5] for o in out], np.uint64).reshape(n)),
                       starts=starts)


# long: one loop over the rows, each kind of row in its branch, read as one
def walk_state(request: WalkRequest) -> WalkResult:
    """The state engine's walk of a stretch of rows in stream order (seqno order, restart
    points, the time cut, complete snapshots and the consistent seqno), each stream's walk
    state carried in its row of ``request.carry``. ``K_FLOOR`` keeps the highest seqno at
    or below which the stream sent nothing: the lowest, over its runs, of the start of the
    run's first snapshot less one (0 for an OSO backfill, which only a stream from seqno 0
    gets), or of its first item less one where no snapshot marker came first."""
    what, slot, seqno, cas = request.what, request.slot, request.seqno, request.cas
    snap_start, snap_end, oso = request.snap_start, request.snap_end, request.oso
    rolled, limit, lost = request.rolled, request.limit, request.lost
    at_time, carry = request.at_time, request.carry
    _lengths(len(what), slot, seqno, cas, snap_start, snap_end, oso, rolled, limit, lost)
    if carry.shape[1] != C.K_FIELDS:
        raise ValueError("the walk state has K_FIELDS columns")
    for w, s in zip(what, slot):
        if w != C.W_LOSS and w != C.W_SKIP and not 0 <= s < len(carry):
            raise ValueError(f"slot {s} outside the walk state")
    n = len(what)
    bad, applies, known = (np.zeros(n, bool) for _ in range(3))
    previous, point = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    carried_slots: list[int] = []
    carried_points: list[int] = []
    pending: dict[int, int] = {}              # slot -> row of its restart in this stretch
    every_lost = False
    for i in range(len(what)):
        w = int(what[i])
        if w == C.W_SKIP:
            continue
        if w == C.W_LOSS:                     # bytes lost that may have held any stream's
            if not every_lost:
                every_lost = True
                carry[:, C.K_BITS] |= np.uint64(K_LOST)
            continue
        s = int(slot[i])
        st = carry[s]
        bits = int(st[C.K_BITS])
        if lost[i]:
            bits |= K_LOST
        if bits & K_FRESH and w != C.W_RESTART and w != C.W_END:
            bits = _floor(st, bits, w, int(snap_start[i]), int(oso[i]), int(seqno[i]))
        if w == C.W_RESTART:
            bits = (bits & ~(WS_IN_OSO | WS_HAS_MARKER)) | K_FRESH
            if rolled[i]:
                bits &= ~(WS_LAZY | WS_COMPLETED)
                pending.pop(s, None)
                if bits & K_ITEMS:
                    point[i], known[i] = seqno[i], 1
                _restarted(st, int(seqno[i]), True)
            else:
                bits = (bits | WS_LAZY) & ~WS_COMPLETED
                pending[s] = i
        elif w == C.W_MARKER:
            if bits & WS_HAS_MARKER:
                bits = _complete(st, bits, int(limit[i]))
            bits |= WS_HAS_MARKER
            st[C.K_START], st[C.K_END] = snap_start[i], snap_end[i]
        elif w == C.W_OSO:
            flags = int(oso[i])
            if flags & P_OSO_END and bits & WS_HAS_MARKER \
                    and int(st[C.K_CHAIN]) >= int(st[C.K_END]):
                bits = _complete(st, bits, int(limit[i]))
            bits = bits | WS_IN_OSO if flags & P_OSO_START and not flags & P_OSO_END \
                else bits & ~WS_IN_OSO
        elif w in _ITEM_ROWS:
            q = int(seqno[i])
            if bits & WS_LAZY:
                p = max(q, 1) - 1
                row = pending.pop(s, -1)
                if not bits & K_ITEMS:
                    pass                      # it discards nothing: not reported
                elif row >= 0:
                    point[row], known[row] = p, 1
                else:
                    carried_slots.append(s)
                    carried_points.append(p)
                _restarted(st, p, not bits & WS_COMPLETED)
                bits &= ~WS_LAZY
            bits |= K_ITEMS
            chain = int(st[C.K_CHAIN])
            if not bits & WS_IN_OSO and q <= chain:
                bad[i], previous[i] = 1, chain
                st[C.K_BITS] = bits
                continue
            if q > chain:
                st[C.K_CHAIN] = q
            if at_time != _MAX and w in _TIMED and int(cas[i]) & _CLOCK > at_time \
                    and q < int(st[C.K_CUT]):
                st[C.K_CUT] = q
            if bits & WS_HAS_MARKER and not bits & WS_IN_OSO and q >= int(st[C.K_END]):
                bits = _complete(st, bits, int(limit[i]))
            applies[i] = q <= int(limit[i]) and q < int(st[C.K_CUT])
        st[C.K_BITS] = bits
    return WalkResult(bad=bad, previous=previous, applies=applies, point=point, known=known,
                      carried_slots=np.array(carried_slots, np.int64),
                      carried_points=np.array(carried_points, np.uint64)
                      .reshape(len(carried_points)))


def _floor(st, bits: int, w: int, start: int, oso: int, seqno: int) -> int:
    """The first marker, OSO start or item of a run: from where it sends."""
    if w == C.W_MARKER:
        floor = max(start, 1) - 1
    elif w == C.W_OSO:
        if not oso & P_OSO_START or oso & P_OSO_END:
            return bits
        floor = 0
    elif w in _ITEM_ROWS:
        floor = max(seqno, 1) - 1
    else:
        return bits
    if floor < int(st[C.K_FLOOR]):
        st[C.K_FLOOR] = floor
    return bits & ~K_FRESH


def _restarted(st, p: int, lower: bool) -> None:
    """A restart of the stream at point ``p``: the next item must exceed it, the
    consistent seqno goes no higher (``lower``: unless a snapshot completed since the
    restart), and a time cut above it is lifted."""
    st[C.K_CHAIN] = p
    if lower and p < int(st[C.K_CONSISTENT]):
        st[C.K_CONSISTENT] = p
    if p < int(st[C.K_CUT]):
        st[C.K_CUT] = _MAX


def _complete(st, bits: int, limit: int) -> int:
    """The stream's open snapshot is complete: covered when its end is within the
    at_seqno limit and below the time cut, and frames were not lost."""
    end = int(st[C.K_END])
    if end <= limit and end < int(st[C.K_CUT]) and not bits & K_LOST:
        st[C.K_CONSISTENT] = end
        bits |= WS_COMPLETED
    return bits & ~WS_HAS_MARKER


def newest(ids, order_key, size):
    """Per id in ``0..size-1``, the index of the element with the highest ``order_key``
    (the last such one where several share it); -1 for an id with none."""
    if len(order_key) != len(ids):
        raise ValueError("one order key per id")
    for g in ids:
        if not 0 <= g < size:
            raise ValueError(f"id {g} outside 0..{size - 1}")
    best = np.full(size, -1, np.int64)
    for i in range(len(ids)):
        g = int(ids[i])
        if best[g] < 0 or order_key[i] >= order_key[best[g]]:
            best[g] = i
    return best


def validity(request: ValidityRequest) -> ValidityResult:
    """When the versions at ``request.kept`` (None: all) of a history last, written into
    ``request.out`` and returned: from their seqno and clock until the next version of
    their document (kept or not) or the collection clear that ended them (``gone``
    neither ``alive`` nor ``discarded``), whichever comes first, else open-ended."""
    seqno, cas, gone, same, kept = (request.seqno, request.cas, request.gone, request.same,
                                    request.kept)
    alive, discarded, out = request.alive, request.discarded, request.out
    from_seqno, from_time, to_seqno, to_time = (out.from_seqno, out.from_time, out.to_seqno,
                                                out.to_time)
    seqno_valid, time_valid = out.seqno_valid, out.time_valid
    n = len(seqno)
    if len(cas) != n or len(gone) != n or len(same) != n:
        raise ValueError("one seqno, CAS, end and next flag per version")
    rows = np.arange(n) if kept is None else np.asarray(kept, np.int64)
    if any(len(a) != len(rows) for a in (from_seqno, from_time, to_seqno, to_time,
                                          seqno_valid, time_valid)):
        raise ValueError("one answer per version kept")
    if len(rows) and (rows.min() < 0 or rows.max() >= n):
        raise ValueError("a version outside the history")
    clock = (np.asarray(cas, np.uint64) & ~np.uint64(0xFFFF)).view(np.int64)
    for j, i in enumerate(rows.tolist()):
        # a clear ends a version that no later version of its document ended first
        ended = int(gone[i]) not in (int(alive), int(discarded)) and not (
            bool(same[i]) and i + 1 < n and int(seqno[i + 1]) < int(gone[i]))
        follows = bool(same[i]) and not ended and i + 1 < n
        from_seqno[j], from_time[j] = seqno[i], clock[i]
        to_seqno[j] = gone[i] if ended else (seqno[i + 1] if follows else 0)
        to_time[j] = clock[i + 1] if follows else 0
        seqno_valid[j], time_valid[j] = ended or bool(same[i]), follows
    return out


def pair_durable(request: DurableRequest) -> DurableResult:
    """Durable writes paired: each commit with the change before it in its group, judged
    its prepare or not, and the prepares that are the last change of their group."""
    group, what, seqno, prepared, size = (request.group, request.what, request.seqno,
                                          request.prepared, request.size)
    if not len(what) == len(seqno) == len(prepared) == len(group):
        raise ValueError("every column needs one value per change")
    for g in group:
        if not 0 <= g < size:
            raise ValueError(f"group {g} outside 0..{size - 1}")
    last: dict[int, int] = {}
    commits, before, ok = [], [], []
    for i in range(len(group)):
        g = int(group[i])
        p = last.get(g, -1)
        if what[i] == C.W_COMMIT:
            commits.append(i)
            before.append(p)
            ok.append(p >= 0 and what[p] == C.W_PREPARE and prepared[i] == seqno[p])
        last[g] = i
    waiting = sorted(i for i in last.values() if what[i] == C.W_PREPARE)
    return DurableResult(commits=np.array(commits, np.int64), before=np.array(before, np.int64),
                         ok=np.array(ok, bool), waiting=np.array(waiting, np.int64))


class KeyIndex:
    """A dense id (0, 1, ... in first-seen order) per document: its stream (``unit``,
    vbucket << 16 | stream id), collection and key bytes; the key bytes kept."""

    def __init__(self):
        self._ids: dict[tuple[int, int, bytes], int] = {}
        self._keys: list[bytes] = []
        self._units: list[int] = []
        self._cids: list[int] = []
        self._firsts: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def ids(self, buf, starts, lengths, unit, cid):
        """The id of each document whose key is ``buf[starts[i]:starts[i] + lengths[i]]``,
        of stream ``unit[i]`` and collection ``cid[i]`` (new ones get the next ids)."""
        data = memoryview(buf).cast("B")
        _lengths(len(starts), lengths, unit, cid)
        out = np.empty(len(starts), np.int64)
        for i in range(len(starts)):
            at = int(starts[i])
            if at < 0 or int(lengths[i]) < 0 or at + int(lengths[i]) > len(data):
                raise ValueError("a key outside the buffer")
            key = (int(unit[i]), int(cid[i]), bytes(data[at:at + int(lengths[i])]))
            found = self._ids.get(key)
            if found is None:
                found = self._ids[key] = len(self._keys)
                self._keys.append(key[2])
                self._units.append(key[0])
                self._cids.append(key[1])
                self._firsts.setdefault((key[0], key[1]), found)
            out[i] = found
        return out

    def frame_ids(self, buf, base, rows, key_offset, key_len, vbucket, stream_id, cid):
        """The id of the document of each frame ``rows`` of a batch: its key at
        ``key_offset - base`` of ``key_len`` bytes in ``buf``, its stream (``vbucket``,
        ``stream_id``) and collection (``cid``, None: 0), columns with one value per
        frame."""
        frames = len(key_offset)
        _lengths(frames, key_len, vbucket, stream_id, *(() if cid is None else (cid,)))
        rows = np.asarray(rows, np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= frames
                          or (key_offset[rows] < np.uint64(base)).any()):
            raise ValueError("a key outside the buffer")
        unit = (vbucket[rows].astype(np.uint32) << np.uint32(16)) | stream_id[rows]
        return self.ids(buf, (key_offset[rows] - np.uint64(base)).astype(np.int64),
                        key_len[rows].astype(np.int64), unit,
                        np.zeros(len(rows), np.uint32) if cid is None else cid[rows])

    def firsts(self, unit, cid):
        """The id of the first document of each (stream ``unit[i]``, collection
        ``cid[i]``), -1 for one without documents."""
        return np.array([self._firsts.get((int(u), int(c)), -1) for u, c in zip(unit, cid)],
                        np.int64).reshape(len(unit))

    def _check(self, ids) -> None:
        for d in ids:
            if not 0 <= d < len(self._keys):
                raise ValueError(f"document id {d} outside 0..{len(self._keys) - 1}")

    def keys(self, ids):
        """The key bytes of ``ids`` as Arrow binary buffers: (offsets int64, data uint8)."""
        self._check(ids)
        chosen = [self._keys[int(i)] for i in ids]
        offsets = np.zeros(len(chosen) + 1, np.int64)
        np.cumsum([len(k) for k in chosen], out=offsets[1:])
        return offsets, np.frombuffer(b"".join(chosen), np.uint8).copy()

    def streams(self, ids):
        """The stream (``unit``) and collection id of ``ids``."""
        self._check(ids)
        return (np.array([self._units[int(i)] for i in ids], np.uint32),
                np.array([self._cids[int(i)] for i in ids], np.uint32))

    def order(self, ids):
        """The positions of ``ids`` sorted by vbucket, collection id and key bytes (then
        by position), and per position of that order whether its document has the
        vbucket, collection and key of the one before (``ties``, bool)."""
        return self._order(ids, None, None)

    def order_versions(self, ids, seqno, gpos):
        """``order``, the positions of a document sorted by (``seqno``, ``gpos``: one per
        position) before their position, and the seqnos in that order."""
        if len(seqno) != len(ids) or len(gpos) != len(ids):
            raise ValueError("one seqno and gpos per position")
        order, ties = self._order(ids, seqno, gpos)
        return order, ties, np.asarray(seqno, np.uint64)[order]

    def _order(self, ids, seqno, gpos):
        self._check(ids)

        def key(p):
            d = int(ids[p])
            return self._units[d] >> 16, self._cids[d], self._keys[d]

        def within(p):
            return () if seqno is None else (int(seqno[p]), int(gpos[p]))
        order = sorted(range(len(ids)), key=lambda p: (*key(p), *within(p), p))
        ties = [k > 0 and key(order[k]) == key(order[k - 1]) for k in range(len(order))]
        return np.array(order, np.int64).reshape(len(ids)), np.array(ties, bool)
