"""Hypothesis strategies: random frames of every kind, with the fields a decoder must report."""

from __future__ import annotations

from hypothesis import strategies as st

from dcpfast import protocol as P
from dcpfast import schema
from dcpfast import testing as t

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
seqno = st.integers(1, 0xFFFFFFFFFFFFFFFF)
datatypes = st.integers(0, 7)
names = st.binary(min_size=1, max_size=40)
values = st.binary(max_size=64)
collection_ids = st.one_of(st.just(0), st.integers(8, 0xFFFFFFFF))
stream_ids = st.one_of(st.none(), st.integers(1, 0xFFFF))

#: What ``FrameBatch.frame`` reports beyond the header bytes; must match exactly.
CHECKED = (frozenset(schema.NAMES) - {"offset", "magic", "opcode", "datatype", "opaque", "cas",
                                      "body_len", "framing_len", "extras_len", "key_offset",
                                      "key_len", "value_offset", "value_len"}) | {"key", "value"}


@st.composite
def frames(draw, collections: bool):
    """One encoded frame and the fields it must decode to."""
    kind = draw(st.sampled_from(sorted(BUILDERS)))
    hdr = dict(vbucket=draw(u16), opaque=draw(u32), cas=draw(u64))
    data, expect = BUILDERS[kind](draw, hdr, collections)
    if kind in CONNECTION_KINDS:             # their vbucket field is not a vbucket
        expect.pop("vbucket", None)
    expect.setdefault("opaque", hdr["opaque"])
    expect.setdefault("kind", kind)
    return data, expect


def _sid(draw, hdr, expect):
    sid = draw(stream_ids)
    if sid is not None:
        hdr["stream_id"] = sid
        expect["stream_id"] = sid


def _document(draw, hdr, collections, *, sid=True):
    """Key, collection and header fields shared by the document-change builders."""
    key = draw(names)
    expect = dict(vbucket=hdr["vbucket"], cas=hdr["cas"], key=key)
    if collections:
        hdr["collection_id"] = expect["collection_id"] = draw(collection_ids)
    if sid:
        _sid(draw, hdr, expect)
    return key, expect


def _mutation(draw, hdr, collections):
    key, expect = _document(draw, hdr, collections)
    fields = dict(by_seqno=draw(seqno), rev_seqno=draw(u64), flags=draw(u32),
                  expiration=draw(u32), lock_time=draw(u32), nru=draw(u8))
    value, datatype = draw(values), draw(datatypes)
    expect.update(fields, value=value, datatype=datatype)
    return t.mutation(key, value, datatype=datatype, **fields, **hdr), expect


def _deletion(version):
    def build(draw, hdr, collections):
        key, expect = _document(draw, hdr, collections)
        fields = dict(by_seqno=draw(u64), rev_seqno=draw(u64))
        value = draw(values)
        expect.update(fields, value=value)
        delete_time = None
        if version == 2:
            delete_time = expect["delete_time"] = draw(u32)
        return t.deletion(key, value, delete_time=delete_time, **fields, **hdr), expect
    return build


def _expiration(draw, hdr, collections):
    key, expect = _document(draw, hdr, collections)
    fields = dict(by_seqno=draw(u64), rev_seqno=draw(u64), delete_time=draw(u32))
    value = draw(values)
    expect.update(fields, value=value)
    return t.expiration(key, value, **fields, **hdr), expect


def _prepare(draw, hdr, collections):
    key, expect = _document(draw, hdr, collections, sid=False)
    fields = dict(by_seqno=draw(seqno), rev_seqno=draw(u64), flags=draw(u32),
                  expiration=draw(u32), lock_time=draw(u32), nru=draw(u8),
                  durability_level=draw(st.integers(1, 3)))
    value = draw(values)
    deleted = draw(st.booleans())
    expect.update(fields, value=value, deleted=int(deleted))
    data = t.prepare(key, value, deleted=deleted, **fields, **hdr)
    return data, expect


def _resolution(builder, seqno_name):
    def build(draw, hdr, collections):
        key, expect = _document(draw, hdr, collections, sid=False)
        prepared, resolved = draw(u64), draw(u64)
        expect.update(prepared_seqno=prepared, by_seqno=resolved)
        return builder(key, prepared_seqno=prepared, **{seqno_name: resolved}, **hdr), expect
    return build


def _marker(version, short=False):
    def build(draw, hdr, collections):
        expect = dict(vbucket=hdr["vbucket"])
        _sid(draw, hdr, expect)
        start, end, flags = draw(u64), draw(u64), draw(u32)
        expect.update(snap_start=start, snap_end=end, snap_flags=flags)
        kwargs = {}
        # the high completed and prepared seqnos are columns only with the Disk flag
        disk = bool(flags & P.SnapshotFlag.DISK)
        if version is not None:
            kwargs = dict(max_visible_seqno=draw(u64), high_completed_seqno=draw(u64))
            expect.update(kwargs if disk else {"max_visible_seqno": kwargs["max_visible_seqno"]},
                          marker_version=version)
        if version == 1:
            kwargs["timestamp"] = draw(u64)
        if version == 2:
            kwargs["purge_seqno"] = expect["purge_seqno"] = draw(u64)
            kwargs["high_prepared_seqno"] = None if short else draw(u64)
            if not short and disk:
                expect["high_prepared_seqno"] = kwargs["high_prepared_seqno"]
        data = t.snapshot_marker(start, end, flags, version=version, **kwargs, **hdr)
        if version is not None and not disk:
            expect["kind"] = {0: "snapshot_marker_v2_0", 1: "snapshot_marker_v2_1",
                              2: "snapshot_marker_v2_2"}[version] + \
                ("_purge" if short else "") + "_memory"
        if version is not None:
            expect["value"] = data[-{0: 36, 1: 44, 2: 44 if short else 52}[version]:]
        return data, expect
    return build


def _system_event(draw, hdr, collections):
    expect = dict(vbucket=hdr["vbucket"])
    _sid(draw, hdr, expect)
    key, value = draw(st.binary(max_size=40)), draw(values)
    fields = dict(by_seqno=draw(u64), event_id=draw(u32), event_version=draw(u8))
    expect.update(fields, key=key, value=value)
    data = t.system_event(fields["event_id"], by_seqno=fields["by_seqno"],
                          version=fields["event_version"], key=key, value=value, **hdr)
    return data, expect


def _simple(builder, column=None, strategy=u32, sid=False):
    """A header-and-extras frame with at most one field."""
    def build(draw, hdr, collections):
        expect = dict(vbucket=hdr["vbucket"])
        if sid:
            _sid(draw, hdr, expect)
        if column is None:
            return builder(**hdr), expect
        expect[column] = draw(strategy)
        return builder(expect[column], **hdr), expect
    return build


def _control(draw, hdr, collections):
    key, value = draw(names), draw(st.binary(min_size=1, max_size=40))
    return t.control(key, value, **hdr), dict(vbucket=hdr["vbucket"], key=key, value=value)


def _open(draw, hdr, collections):
    name, value = draw(names), draw(values)
    data = t.open(name, draw(u32), value, **hdr)
    return data, dict(vbucket=hdr["vbucket"], key=name, value=value)


def _stream_request(draw, hdr, collections):
    value = draw(values)
    data = t.stream_request(flags=draw(u32), start=draw(u64), end=draw(u64),
                            vbucket_uuid=draw(u64), value=value, **hdr)
    return data, dict(vbucket=hdr["vbucket"], value=value)


def _cache_transfer(draw, hdr, collections):
    record = dict(cas=draw(u64), by_seqno=draw(u64), key=b"\x00" + draw(names),
                  value=draw(values), datatype=draw(datatypes))
    data = t.cache_transfer([record], **hdr)
    return data, dict(vbucket=hdr["vbucket"], value=data[24:])


def _hello(draw, hdr, collections):
    agent, features = draw(names), draw(st.lists(u16, max_size=8))
    data = t.hello(features, agent, **hdr)
    return data, dict(key=agent, value=data[24 + len(agent):])


def _connection(opcode):
    """A request of the connection laid out as any request (SASL, Select Bucket)."""
    def build(draw, hdr, collections):
        key, value = draw(names), draw(values)
        return t.frame(opcode, key=key, value=value, **hdr), dict(key=key, value=value)
    return build


def _response(draw, hdr, collections):
    opcode = draw(st.sampled_from([0x1F, 0x50, 0x53, 0x54, 0x56, 0x5C, 0x5E, 0x89, 0x00, 0xB5]))
    status, value, datatype = draw(u16), draw(values), draw(datatypes)
    expect = dict(status=status, key=b"", value=value, cas=hdr["cas"], datatype=datatype)
    framing = b""
    if draw(st.booleans()):       # magic 0x18: read units, and the server's duration or not
        framing = t.frame_info(1, draw(u16).to_bytes(2, "big"))
        if draw(st.booleans()):
            code = draw(u16)
            framing += t.frame_info(0, code.to_bytes(2, "big"))
            if us := int(code ** 1.74 / 2):
                expect["server_duration_us"] = us
    data = t.response(opcode, status=status, value=value, datatype=datatype,
                      opaque=hdr["opaque"], cas=hdr["cas"], framing=framing)
    return data, expect


BUILDERS = {
    "mutation": _mutation,
    "deletion_v1": _deletion(1),
    "deletion_v2": _deletion(2),
    "expiration": _expiration,
    "prepare": _prepare,
    "commit": _resolution(t.commit, "commit_seqno"),
    "abort": _resolution(t.abort, "abort_seqno"),
    "snapshot_marker_v1": _marker(None),
    "snapshot_marker_v2_0": _marker(0),
    "snapshot_marker_v2_1": _marker(1),
    "snapshot_marker_v2_2": _marker(2),
    "snapshot_marker_v2_2_purge": _marker(2, short=True),
    "system_event": _system_event,
    "seqno_advanced": _simple(t.seqno_advanced, "by_seqno", u64, sid=True),
    "seqno_acknowledged": _simple(t.seqno_acknowledged, "by_seqno", u64),
    "oso_snapshot": _simple(t.oso_snapshot, "oso_flags", sid=True),
    "stream_end": _simple(t.stream_end, "end_status", sid=True),
    "set_vbucket_state": _simple(t.set_vbucket_state, "vb_state", u8),
    "buffer_ack": _simple(t.buffer_ack, "ack_bytes"),
    "noop": _simple(t.noop),
    "add_stream": _simple(t.add_stream, None),
    "close_stream": _simple(t.close_stream, sid=True),
    "get_failover_log": _simple(t.get_failover_log),
    "cache_transfer_end": _simple(t.cache_transfer_end, sid=True),
    "control": _control,
    "open": _open,
    "stream_request": _stream_request,
    "cache_transfer": _cache_transfer,
    "hello": _hello,
    "sasl_list_mechs": _connection(P.Opcode.SASL_LIST_MECHS),
    "sasl_auth": _connection(P.Opcode.SASL_AUTH),
    "sasl_step": _connection(P.Opcode.SASL_STEP),
    "select_bucket": _connection(P.Opcode.SELECT_BUCKET),
    "response": _response,
}
#: The kinds of the connection's requests, which carry no vbucket.
CONNECTION_KINDS = frozenset({"noop", "buffer_ack", "control", "open", "hello",
                              "sasl_list_mechs", "sasl_auth", "sasl_step", "select_bucket"})


@st.composite
def streams(draw, min_frames=1, max_frames=12):
    """(collections, data, [expected fields per frame]) for a random frame sequence."""
    collections = draw(st.booleans())
    items = draw(st.lists(frames(collections), min_size=min_frames, max_size=max_frames))
    return collections, b"".join(d for d, _ in items), [e for _, e in items]


@st.composite
def resync_streams(draw, collections: bool, min_frames=1, max_frames=8):
    """(data, [expected fields]) of frames that all carry a known opcode.

    Skip mode resynchronises only on a known opcode, so any frame of such a stream
    can be the first one trusted after damage.
    """
    known = frames(collections).filter(lambda item: item[0][1] in P.KNOWN_OPCODES)
    items = draw(st.lists(known, min_size=min_frames, max_size=max_frames))
    return b"".join(d for d, _ in items), [e for _, e in items]
