"""Pure-Python twin of ``cvalues``, the per-value loops behind ``values.values``: the same
names and signatures, written for clarity.

Every function walks a list of values given as ``starts``/``lengths`` (numpy int arrays)
and reports damage as ``(row, code, a, b)`` tuples, ``code`` a ``protocol.ValueProblem``.
Values that are xattr-parsed live in one of two buffers, chosen per row by
``source`` (0: ``a``, the stream; 1: ``b``, the inflated Snappy values).
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P

_VP = P.ValueProblem
_LEN = P.XATTR_LENGTH_SIZE
_GROW, _SHRINK = P.SNAPPY_MAX_EXPANSION


def _flat(buf) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def snappy_lengths(buf, starts, lengths, out) -> list[tuple]:
    """``out[i]`` = the uncompressed length a raw Snappy block declares, or -1 when its
    varint preamble is broken or declares more than the block can inflate to."""
    buf = _flat(buf)
    problems = []
    for i, (start, size) in enumerate(zip(starts.tolist(), lengths.tolist())):
        declared, shift, used = 0, 0, 0
        while True:
            if used == size or used == P.SNAPPY_MAX_PREAMBLE:
                declared = -1
                break
            byte = buf[start + used]
            used += 1
            if used == P.SNAPPY_MAX_PREAMBLE and byte > 0x0F:
                declared = -1
                break
            declared |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if declared < 0:
            out[i] = -1
            problems.append((i, _VP.SNAPPY_PREAMBLE, 0, 0))
        elif declared * _SHRINK > (size - used) * _GROW:
            out[i] = -1
            problems.append((i, _VP.SNAPPY_LENGTH, declared, size))
        else:
            out[i] = declared
    return problems


def inflate(buf, starts, lengths, out, bounds, decompress_into) -> list[tuple]:
    """Inflate block ``i`` into ``out[bounds[i]:bounds[i + 1]]`` with
    ``decompress_into(source, destination)``; a block the library rejects, or that fills
    its slot short, is a problem, and its slot zeros (what the library wrote of it before
    it gave up is not kept)."""
    buf, out = _flat(buf), _flat(out)
    problems = []
    for i, (start, size) in enumerate(zip(starts.tolist(), lengths.tolist())):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        try:
            written = decompress_into(buf[start:start + size], out[lo:hi])
        except Exception as exc:        # the library's own error types vary by version
            problems.append((i, _VP.SNAPPY, str(exc), 0))
        else:
            if written == hi - lo:
                continue
            problems.append((i, _VP.SNAPPY, f"inflated to {written} of {hi - lo} bytes", 0))
        out[lo:hi] = b"\0" * (hi - lo)
    return problems


def _pairs(value: memoryview):
    """Yield (position, key, value) of each pair of a value's xattr section, then the
    section's length as the last item; raise ``_Damage`` at the first fault."""
    size = len(value)
    if size < _LEN:
        raise _Damage(_VP.XATTR_SHORT, size, 0)
    end = _LEN + int.from_bytes(value[:_LEN], "big")
    if end > size:
        raise _Damage(_VP.XATTR_SECTION, end - _LEN, size)
    pos = _LEN
    seen = set()
    while pos < end:
        if end - pos < _LEN:
            raise _Damage(_VP.XATTR_PAIR_HEADER, pos, end)
        length = int.from_bytes(value[pos:pos + _LEN], "big")
        if length < P.XATTR_MIN_PAIR or length > end - pos - _LEN:
            raise _Damage(_VP.XATTR_PAIR_LENGTH, pos, length)
        pair = bytes(value[pos + _LEN:pos + _LEN + length])
        nul = pair.find(0)
        if nul < 1 or nul > length - 2:
            raise _Damage(_VP.XATTR_KEY, pos, 0)
        key, text = pair[:nul], pair[nul + 1:length - 1]
        if pair[-1] != 0 or 0 in text:
            raise _Damage(_VP.XATTR_VALUE, pos, 0)
        try:
            key.decode("utf-8")
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise _Damage(_VP.XATTR_UTF8, pos, 0) from None
        if key in seen:
            raise _Damage(_VP.XATTR_DUPLICATE, pos, 0)
        seen.add(key)
        yield pos, key, text
        pos += _LEN + length
    yield end


class _Damage(Exception):
    def __init__(self, code, a, b):
        super().__init__(code, a, b)
        self.problem = (code, a, b)


def parse_xattrs(a, b, source, starts, lengths, skip, pairs) -> tuple[int, int, list[tuple]]:
    """Check the xattr section of each value: ``skip[i]`` = the section's size with its
    length word (where the body starts), ``pairs[i]`` = its pair count, both 0 for a
    damaged section. Returns the key and value bytes of the sound sections, and the
    problems."""
    bufs = (_flat(a), _flat(b))
    key_bytes = value_bytes = 0
    problems = []
    for i, (src, start, size) in enumerate(zip(source.tolist(), starts.tolist(),
                                               lengths.tolist())):
        skip[i] = pairs[i] = 0
        count = keys = texts = 0
        try:
            for item in _pairs(bufs[src][start:start + size]):
                if isinstance(item, int):
                    skip[i], pairs[i] = item, count
                    break
                count += 1
                keys += len(item[1])
                texts += len(item[2])
        except _Damage as damage:
            problems.append((i, *damage.problem))
            continue
        key_bytes += keys
        value_bytes += texts
    return key_bytes, value_bytes, problems


def xattr_strings(a, b, source, starts, lengths, pairs, key_offsets, key_data, value_offsets,
                  value_data) -> None:
    """Copy the keys and values of the sections ``parse_xattrs`` found sound (rows with
    ``pairs[i] > 0``) into Arrow string buffers: offsets (int64, one past the pairs) and
    data."""
    bufs = (_flat(a), _flat(b))
    key_data, value_data = _flat(key_data), _flat(value_data)
    n = kpos = vpos = 0
    key_offsets[0] = value_offsets[0] = 0
    for src, start, size, count in zip(source.tolist(), starts.tolist(), lengths.tolist(),
                                       pairs.tolist()):
        if not count:
            continue
        for item in _pairs(bufs[src][start:start + size]):
            if isinstance(item, int):
                break
            _, key, text = item
            key_data[kpos:kpos + len(key)] = key
            value_data[vpos:vpos + len(text)] = text
            kpos += len(key)
            vpos += len(text)
            n += 1
            key_offsets[n] = kpos
            value_offsets[n] = vpos


def extents_at(offsets, valids, chunk, entry, starts, bounds, valid) -> None:
    """Where value ``entry[i]`` of chunk ``chunk[i]`` lies (``offsets[k]``: a chunk's
    int32 or int64 offsets, one more than its values; ``valids[k]``: which of its values
    are not null, a ``bool`` array, or None where none is): its first byte in
    ``starts[i]``, the running total of the lengths in ``bounds`` (``bounds[0]`` as
    given), and whether it is not null in ``valid[i]``; a null, or a negative
    ``chunk[i]``, gives an empty extent. ``gather_chunks`` then copies them."""
    n = len(chunk)
    if len(entry) != n or len(starts) != n or len(bounds) != n + 1 or len(valid) != n:
        raise ValueError("extents_at: one entry, start, bound and answer per value")
    if len(valids) != len(offsets):
        raise ValueError("extents_at: one validity per chunk")
    if any(len(o) < 1 for o in offsets):
        raise ValueError("extents_at: a chunk's offsets hold one more than its values")
    if any(v is not None and len(v) != len(o) - 1 for o, v in zip(offsets, valids)):
        raise ValueError("extents_at: a chunk's validity needs one flag per value")
    for i, (c, e) in enumerate(zip(chunk.tolist(), entry.tolist())):
        if c >= len(offsets) or (c >= 0 and not 0 <= e < len(offsets[c]) - 1):
            raise ValueError(f"extents_at: value {i} outside its chunk")
    for i, (c, e) in enumerate(zip(chunk.tolist(), entry.tolist())):
        if c < 0 or (valids[c] is not None and not valids[c][e]):
            starts[i], bounds[i + 1], valid[i] = 0, bounds[i], 0
        else:
            lo, hi = int(offsets[c][e]), int(offsets[c][e + 1])
            starts[i], bounds[i + 1], valid[i] = lo, bounds[i] + hi - lo, 1


def spread_extents(chunk, starts, bounds, item_chunk, item_entry) -> None:
    """Extent ``i`` (``bounds[i + 1] - bounds[i]`` items from item ``starts[i]`` of chunk
    ``chunk[i]``; ``extents_at`` gives them) item by item: item ``j`` of all, counted from
    ``bounds[0]``, in ``item_chunk[j]`` (its chunk) and ``item_entry[j]`` (its place
    there): the items of the maps ``extents_at`` found."""
    n = len(chunk)
    if len(starts) != n or len(bounds) != n + 1:
        raise ValueError("spread_extents: one start and bound per extent")
    counts = np.diff(bounds)
    if (counts < 0).any():
        raise ValueError("spread_extents: bounds go down")
    total = int(bounds[-1] - bounds[0])
    if len(item_chunk) != total or len(item_entry) != total:
        raise ValueError("spread_extents: one answer per item")
    item_chunk[:] = np.repeat(chunk, counts)
    item_entry[:] = np.repeat(starts - (bounds[:-1] - bounds[0]), counts) \
        + np.arange(total, dtype=np.int64)


def chunk_extents(sources, starts, lengths, valids, base, chunk, entry, source, start, bounds,
                  valid) -> None:
    """Where value ``entry[i]`` of chunk ``chunk[i]`` lies, the chunks' values given as
    extents (chunk ``k``'s value ``e``: ``lengths[k][e]`` bytes at ``starts[k][e]`` of its
    buffer ``sources[k][e]``, which is buffer ``base[k] + sources[k][e]`` of all;
    ``valids[k]`` as for ``extents_at``): that buffer in ``source[i]``, its first byte in
    ``start[i]``, the running total of the lengths in ``bounds`` (``bounds[0]`` as
    given), whether it is not null in ``valid[i]``; a null, or a negative ``chunk[i]``,
    gives an empty extent. ``gather_chunks`` then copies them."""
    n = len(chunk)
    if len(entry) != n or len(source) != n or len(start) != n or len(bounds) != n + 1 \
            or len(valid) != n:
        raise ValueError("chunk_extents: one entry, source, start, bound and answer per value")
    if len(sources) != len(starts) or len(lengths) != len(starts) \
            or len(valids) != len(starts) or len(base) != len(starts):
        raise ValueError("chunk_extents: one source, start, length, validity column and base "
                         "per chunk")
    if any(len(a) != len(b) or len(a) != len(c) for a, b, c in zip(sources, starts, lengths)):
        raise ValueError("chunk_extents: a chunk's columns differ in length")
    if any(v is not None and len(v) != len(s) for v, s in zip(valids, starts)):
        raise ValueError("chunk_extents: a chunk's validity needs one flag per value")
    for i, (c, e) in enumerate(zip(chunk.tolist(), entry.tolist())):
        if c >= len(starts) or (c >= 0 and not 0 <= e < len(starts[c])):
            raise ValueError(f"chunk_extents: value {i} outside its chunk")
    for i, (c, e) in enumerate(zip(chunk.tolist(), entry.tolist())):
        if c < 0 or (valids[c] is not None and not valids[c][e]):
            source[i], start[i], bounds[i + 1], valid[i] = 0, 0, bounds[i], 0
        else:
            source[i] = int(base[c]) + int(sources[c][e])
            start[i] = int(starts[c][e])
            bounds[i + 1] = bounds[i] + int(lengths[c][e])
            valid[i] = 1


def gather_chunks(chunks, chunk, starts, bounds, out) -> None:
    """Copy value ``i`` (``bounds[i + 1] - bounds[i]`` bytes at ``starts[i]`` of buffer
    ``chunks[chunk[i]]``) to ``out[bounds[i]:]``: one gather from many buffers (the
    chunks of a column), with no copy of the chunks joined first."""
    bufs = [_flat(c) for c in chunks]
    out = _flat(out)
    if len(bounds) != len(starts) + 1 or len(chunk) != len(starts) or bounds[0] < 0 \
            or len(out) < bounds[-1]:
        raise ValueError("gather_chunks: bounds do not match")
    for i, (j, start) in enumerate(zip(chunk.tolist(), starts.tolist())):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if hi < lo or not 0 <= j < len(bufs) or start < 0 or start + hi - lo > len(bufs[j]):
            raise ValueError(f"gather_chunks: range {i} outside its chunk")
        out[lo:hi] = bufs[j][start:start + hi - lo]
