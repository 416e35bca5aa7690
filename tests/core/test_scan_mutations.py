"""Mutated valid streams: strict mode blames the damage, skip mode keeps every frame outside it.

Each test damages a valid stream in one place (a bit flip, a cut, a corrupted length field,
two streams spliced together) and names the damaged bytes ``[lo, hi)`` of the result: the
frames the mutation touched. ``check`` holds both modes to that damage, grown by ``reach``
where a damaged header's length cannot be told from a true one.

The streams hold only frames with known opcodes: skip mode resynchronises on nothing else,
so a frame with an unknown opcode right after damage is lost by design.
"""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import protocol as P
from dcpfast import testing as t
from tests.strategies import resync_streams

HEADER = P.HEADER_SIZE
OFFSET_COLUMNS = ("offset", "key_offset", "value_offset")


def streams(min_frames=1):
    """(collections, data) of a valid stream whose every frame skip mode may resynchronise on."""
    return st.booleans().flatmap(
        lambda c: resync_streams(c, min_frames, 6).map(lambda s: (c, s[0])))


def scan(data, collections, **kw):
    return dcpfast.scan(data, collections=collections, final=True, **kw)


def extents(batch):
    """(start, end) of every frame in a batch."""
    return [(int(o), int(o) + HEADER + int(b)) for o, b in zip(batch["offset"], batch["body_len"])]


def holds_together(data, at):
    """Whether a whole frame header starts at ``at``: a legal magic and framing extras,
    extras and key that fit the body (the body itself may run past the data)."""
    if len(data) - at < HEADER:
        return False
    magic, _, keylen, extlen, _, _, body = struct.unpack_from(">BBHBBHI", data, at)
    fel, keylen = (keylen >> 8, keylen & 0xFF) if magic in P.ALT_MAGICS else (0, keylen)
    return (magic in P.DCP_MAGICS and fel + extlen + keylen <= body
            and HEADER + body <= P.DEFAULT_MAX_FRAME_SIZE)


def claimed_end(data, at):
    """End of the frame the header at ``at`` describes, if it holds together and fits."""
    if not holds_together(data, at):
        return None
    end = at + HEADER + struct.unpack_from(">I", data, at + 8)[0]
    return end if end <= len(data) else None


def well_formed(data, at, end, collections):
    """Whether ``data[at:end]`` is one frame that decodes without a problem."""
    try:
        return len(scan(data[at:end], collections)) == 1
    except dcpfast.DcpFormatError:
        return False


def reach(data, lo, hi, bounds, collections, *, strict):
    """Where the scanner leaves damage ``[lo, hi)``, and where damage then ends.

    Inside the damage the scanner follows lengths it cannot tell are wrong: those of a
    well-formed frame (both modes), and in skip mode those of a frame whose lengths hold
    but whose content is wrong, when the end of the data or a header that holds together
    follows it (the documented skip rule). A length that ends inside an intact frame cuts
    that frame, so the damage grows to its end.
    """
    at = lo
    while at < hi:
        end = claimed_end(data, at)
        if end is None:
            break
        if not well_formed(data, at, end, collections):
            if strict or not (end == len(data) or holds_together(data, end)):
                break
        at = end
        if at > hi:
            hi = next((e for s, e in bounds if s < at <= e), at)
    return at, hi


def assert_kept(batch, clean, kept):
    """Every clean frame ``j`` of ``kept`` (j, shift) is in ``batch`` at its offset + shift,
    with the same value in every column and the same key and value bytes."""
    rows = {int(o): i for i, o in enumerate(batch["offset"])}
    where = [int(clean["offset"][j]) + shift for j, shift in kept]
    missing = [at for at in where if at not in rows]
    assert not missing, f"intact frames lost at {missing}"
    got = np.array([rows[at] for at in where], dtype=np.intp)
    want = np.array([j for j, _ in kept], dtype=np.intp)
    shifts = np.array([shift for _, shift in kept], dtype=np.int64)
    np.testing.assert_array_equal(batch._kinds[got], clean._kinds[want])
    for name in clean.columns:
        expected = clean[name][want].astype(object)
        if name in OFFSET_COLUMNS:
            carried = clean.validity(name)
            carried = np.ones(len(clean), bool) if carried is None else carried
            expected = expected + np.where(carried[want], shifts, 0)
        assert batch[name][got].astype(object).tolist() == expected.tolist(), name
    for i, j in zip(got.tolist(), want.tolist()):
        assert (batch.key(i), batch.value(i)) == (clean.key(j), clean.value(j))


def assert_only(batch, clean, intact, lo, hi):
    """``batch`` holds the intact frames outside ``[lo, hi)`` unchanged, and no other frame
    outside it."""
    outside = [(j, shift) for j, shift in intact
               if not lo <= int(clean["offset"][j]) + shift < hi]
    assert_kept(batch, clean, outside)
    kept = {int(clean["offset"][j]) + shift for j, shift in outside}
    strays = [int(o) for o in batch["offset"] if int(o) not in kept and not lo <= o < hi]
    assert not strays, f"frames outside the damage that were not in the stream: {strays}"


def check(clean, data, lo, hi, intact, collections):
    """Hold strict and skip mode to damage ``[lo, hi)`` of ``data``.

    ``intact`` lists the clean frames still whole in ``data`` as (index, offset shift).
    Strict mode raises where ``reach`` leaves the damage, or not at all when that is an
    intact frame start or the end (a damaged frame that is still well formed). Either mode
    returns every intact frame outside the damage (as ``reach`` grows it for that mode)
    unchanged, and nothing else outside it; skip mode's first region is where strict
    mode raised.
    """
    bounds = sorted((int(clean["offset"][j]) + shift,
                     int(clean["offset"][j]) + shift + HEADER + int(clean["body_len"][j]))
                    for j, shift in intact)
    blame, strict_hi = reach(data, lo, hi, bounds, collections, strict=True)
    try:
        strict = scan(data, collections)
    except dcpfast.DcpFormatError as e:
        assert e.offset == blame < strict_hi, (e.offset, blame, lo, strict_hi)
    else:
        assert blame >= strict_hi and blame in {s for s, _ in bounds} | {len(data)}
        assert_only(strict, clean, intact, lo, strict_hi)
        blame = None

    _, skip_hi = reach(data, lo, hi, bounds, collections, strict=False)
    batch = scan(data, collections, errors="skip")
    assert batch.consumed == len(data)
    assert_only(batch, clean, intact, lo, skip_hi)
    assert (batch.errors[0].offset if batch.errors else None) == blame


def one_frame(clean, data):
    """A frame of ``clean`` drawn by Hypothesis: its extent, and the rows of the others (all
    intact when only this frame is damaged)."""
    i = data.draw(st.integers(0, len(clean) - 1), label="frame")
    return extents(clean)[i], [(j, 0) for j in range(len(clean)) if j != i]


@settings(max_examples=300, deadline=None)
@given(streams(min_frames=2), st.data())
def test_bit_flip(stream, data):
    """A flipped bit damages the frame that holds it."""
    collections, raw = stream
    clean = scan(raw, collections)
    (start, end), others = one_frame(clean, data)
    at = start + data.draw(st.one_of(st.integers(0, HEADER - 1),
                                     st.integers(0, end - start - 1)), label="byte")
    damaged = bytearray(raw)
    damaged[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    check(clean, bytes(damaged), start, end, others, collections)


@settings(max_examples=25, deadline=None)
@given(streams())
def test_truncation_at_every_offset(stream):
    """A stream cut at byte ``t`` damages the cut frame's bytes before ``t``; a scan that
    is not told the data ends there leaves that frame for later instead."""
    collections, raw = stream
    clean = scan(raw, collections)
    bounds = extents(clean)
    for cut in range(len(raw) + 1):
        whole = [j for j, (_, e) in enumerate(bounds) if e <= cut]
        lo = bounds[len(whole)][0] if cut not in {e for _, e in bounds} | {0} else cut
        check(clean, raw[:cut], lo, cut, [(j, 0) for j in whole], collections)
        pending = dcpfast.scan(raw[:cut], collections=collections)
        assert (len(pending), pending.consumed) == (len(whole), lo)


#: (name, byte offset, width) of the length fields of a classic and an alt header.
LENGTH_FIELDS = {
    False: [("body", 8, 4), ("extras", 4, 1), ("key", 2, 2)],
    True: [("body", 8, 4), ("extras", 4, 1), ("key", 3, 1), ("framing", 2, 1)],
}


@settings(max_examples=300, deadline=None)
@given(streams(min_frames=2), st.data())
def test_corrupted_length_field(stream, data):
    """A wrong body, extras, key or framing-extras length damages its frame."""
    collections, raw = stream
    clean = scan(raw, collections)
    (start, end), others = one_frame(clean, data)
    alt = raw[start] in P.ALT_MAGICS
    name, at, width = data.draw(st.sampled_from(LENGTH_FIELDS[alt]), label="field")
    at += start
    old, top = int.from_bytes(raw[at:at + width], "big"), 256 ** width - 1
    lengths = [st.integers(0, top), st.integers(max(0, old - 64), min(top, old + 64))]
    rest = len(raw) - start - HEADER
    if name == "body" and rest > old:   # a frame that now ends later in the data
        lengths.append(st.integers(old + 1, rest))
    new = data.draw(st.one_of(lengths), label="new length")
    assume(new != old)
    damaged = raw[:at] + new.to_bytes(width, "big") + raw[at + width:]
    check(clean, damaged, start, end, others, collections)


@settings(max_examples=200, deadline=None)
@given(st.booleans().flatmap(lambda c: st.tuples(st.just(c), resync_streams(c, max_frames=5),
                                                 resync_streams(c, max_frames=5))),
       st.data())
def test_spliced_streams(pair, data):
    """``a[:x] + b[y:]`` damages the frame of ``a`` cut at x and the frame of ``b`` cut at y."""
    collections, (a, _), (b, _) = pair
    clean_a, clean_b = scan(a, collections), scan(b, collections)
    x = data.draw(st.integers(0, len(a)), label="cut a")
    y = data.draw(st.integers(0, len(b)), label="cut b")
    head = [j for j, (_, e) in enumerate(extents(clean_a)) if e <= x]
    tail = [j for j, (s, _) in enumerate(extents(clean_b)) if s >= y]
    lo = extents(clean_a)[head[-1]][1] if head else 0
    rejoin = extents(clean_b)[tail[0]][0] if tail else len(b)
    hi = x + rejoin - y
    spliced = a[:x] + b[y:]
    # one clean scan of both: b's frames follow a's, shifted to where they land in spliced
    clean = scan(a + b, collections)
    intact = [(j, 0) for j in head] + [(len(clean_a) + j, x - y - len(a)) for j in tail]
    check(clean, spliced, lo, hi, intact, collections)


def test_a_length_ending_on_a_cut_off_header_is_not_trusted():
    """A wrong length that ends on a legal magic byte fewer than 24 bytes before the end
    of the data: that fragment is no header, so the length is not trusted and the intact
    frame it points into is kept."""
    bad = bytearray(t.seqno_acknowledged(7))
    struct.pack_into(">I", bad, 8, 23)           # ends 15 bytes into the next frame, on 0x80
    intact = t.add_stream(opaque=0x80)
    assert intact[15] == 0x80
    batch = scan(bytes(bad) + intact, False, errors="skip")
    assert batch["offset"].tolist() == [len(bad)]
    assert [(e.offset, e.length) for e in batch.errors] == [(0, len(bad))]
