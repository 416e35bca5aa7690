"""The document-state semantics of docs/state.md as a plain Python model: one frame at a
time, a dict per stream. The tests hold ``dcpfast.state`` against it.

It reads frames decoded by ``dcpfast.scan`` (``batch.frame(i)``) and the bodies of
``batch.values()``; everything about which version stands is worked out here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dcpfast.protocol import Magic, Opcode, OsoFlag, Status

MAX = 2**64 - 1
REQUESTS = (Magic.CLIENT_REQUEST, Magic.ALT_CLIENT_REQUEST)
RESPONSES = (Magic.CLIENT_RESPONSE, Magic.ALT_CLIENT_RESPONSE)
ITEMS = {Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION, Opcode.PREPARE, Opcode.COMMIT,
         Opcode.ABORT, Opcode.SYSTEM_EVENT, Opcode.SEQNO_ADVANCED}
MARKS = {Opcode.SNAPSHOT_MARKER, Opcode.OSO_SNAPSHOT}
MESSAGES = ITEMS | MARKS | {Opcode.STREAM_END}
TIMED = {Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION, Opcode.PREPARE}
CLEARING = {0, 1, 2}          # begin (create or flush), end (drop), flush collection


@dataclass
class Stream:
    history: dict = field(default_factory=dict)    # (cid, key) -> [versions]
    pending: dict = field(default_factory=dict)    # (cid, key) -> prepare
    chain: int = 0
    oso: bool = False
    cut: int = MAX
    marker: tuple | None = None
    consistent: int = 0


def unit_of(f) -> int:
    return f["vbucket"] << 16 | f.get("stream_id", 0)


def placements(frames) -> dict[int, tuple[int, int]]:
    """Frame index of each Stream Request response -> (unit, index it restarts before)."""
    out = {}
    for i, f in enumerate(frames):
        if f["opcode"] != Opcode.STREAM_REQUEST or f["magic"] not in RESPONSES \
                or f["status"] not in (Status.SUCCESS, Status.ROLLBACK):
            continue
        asked = [g for g in frames[:i] if g["opcode"] == Opcode.STREAM_REQUEST
                 and g["magic"] in REQUESTS and g["opaque"] == f["opaque"]]
        if asked:
            out[i] = (unit_of(asked[-1]), i)
            continue
        before = {unit_of(g) for g in frames[:i] if g["magic"] in REQUESTS
                  and g["opcode"] in MESSAGES and g["opaque"] == f["opaque"]}
        if len(before) == 1:
            out[i] = (before.pop(), i)
            continue
        for j in range(i + 1, len(frames)):
            g = frames[j]
            if g["magic"] in REQUESTS and g["opcode"] in MESSAGES \
                    and g["opaque"] == f["opaque"]:
                out[i] = (unit_of(g), j)
                break
    return out


def model(frames, bodies, *, at_seqno=None, at_time=None, history=False):
    """(documents, consistency, problems): documents as a dict (vbucket, cid, key) ->
    version (history: a list of versions with valid_to), consistency vbucket -> seqno,
    problems the offsets of the frames found wrong.

    ``frames``: ``batch.frame(i)`` dicts with ``offset``; ``bodies``: frame index ->
    (body, xattrs).
    """
    streams: dict[int, Stream] = {}
    problems: list[int] = []
    restarts: dict[int, list] = {}
    for i, (unit, before) in placements(frames).items():
        restarts.setdefault(before, []).append((unit, frames[i]))

    def limit(unit):
        if at_seqno is None:
            return MAX
        if isinstance(at_seqno, int):
            return at_seqno
        return at_seqno.get(unit >> 16, 0)

    for i, f in enumerate(frames):
        for unit, response in restarts.get(i, []):
            _restart(streams.setdefault(unit, Stream()), _point(frames, i, unit, response),
                     history)
        op = f["opcode"]
        if f["magic"] not in REQUESTS or op not in ITEMS | MARKS:
            continue
        s = streams.setdefault(unit_of(f), Stream())
        if op == Opcode.SNAPSHOT_MARKER:
            if s.marker is not None:
                _complete(s, s.marker, limit(unit_of(f)))
            s.marker = (f["snap_start"], f["snap_end"])
        elif op == Opcode.OSO_SNAPSHOT:
            s.oso = bool(f["oso_flags"] & OsoFlag.START) and not f["oso_flags"] & OsoFlag.END
            if f["oso_flags"] & OsoFlag.END and s.marker is not None \
                    and s.chain >= s.marker[1]:       # complete once the OSO snapshot ends
                _complete(s, s.marker, limit(unit_of(f)))
        elif op in ITEMS:
            _item(s, i, f, bodies, limit(unit_of(f)), at_time, history, problems)
    docs, consistency = {}, {}
    for unit, s in streams.items():
        vbucket = unit >> 16
        consistency[vbucket] = min(s.consistent, consistency.get(vbucket, MAX))
        for (cid, key), versions in s.history.items():
            value = _valid(versions, s.cut)
            if history and value:
                docs[vbucket, cid, key] = value
            elif value and value[-1]["gone"] is None:     # the current version
                docs[vbucket, cid, key] = value[-1]
    return docs, consistency, problems


def _point(frames, i, unit, response):
    """A restart's point: a rollback's seqno, else one below the stream's next item."""
    if response["status"] == Status.ROLLBACK:
        return int.from_bytes(response["value"], "big")
    for g in frames[i:]:
        if g["magic"] in REQUESTS and g["opcode"] in ITEMS and unit_of(g) == unit:
            return g["by_seqno"] - 1
    return None


def _restart(s: Stream, point: int | None, history: bool) -> None:
    """A new stream: no OSO snapshot or marker open; what the old one had above the
    point is gone (nothing, when the new stream sends no item to tell the point)."""
    s.oso, s.marker = False, None
    if point is None:
        return
    for k in [k for k, v in s.pending.items() if v["by_seqno"] > point]:
        del s.pending[k]
    for versions in s.history.values():
        versions[:] = [v for v in versions if v["by_seqno"] <= point]
        for v in versions:
            if v["gone"] is not None and v["gone"] > point:
                v["gone"] = None
    s.chain = point
    s.consistent = min(s.consistent, point)
    if point < s.cut:
        s.cut = MAX


def _complete(s: Stream, marker, limit) -> None:
    if marker[1] <= limit and marker[1] < s.cut:
        s.consistent = marker[1]
    s.marker = None


def _item(s: Stream, i, f, bodies, limit, at_time, history, problems) -> None:
    seqno = f["by_seqno"]
    if not s.oso and seqno <= s.chain:
        problems.append(f["offset"])
        return
    s.chain = max(s.chain, seqno)
    if at_time is not None and f["opcode"] in TIMED and f["cas"] & ~0xFFFF > at_time:
        s.cut = min(s.cut, seqno)
    if s.marker is not None and seqno >= s.marker[1] and not s.oso:
        _complete(s, s.marker, limit)
    if seqno > limit or seqno >= s.cut:
        return
    op = f["opcode"]
    key = (f.get("collection_id", 0), f.get("key"))
    if op == Opcode.SYSTEM_EVENT:
        if f["event_id"] in CLEARING and f.get("cleared") is not None:
            _clear(s, f["cleared"], seqno)
    elif op in (Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION):
        _set(s, key, _version(f, bodies[i], deleted=op != Opcode.MUTATION))
    elif op == Opcode.PREPARE:
        s.pending[key] = _version(f, bodies[i], deleted=bool(f["deleted"]))
        s.pending[key]["prepare"] = True
    elif op == Opcode.COMMIT:
        prepare = s.pending.pop(key, None)
        if prepare is None or prepare["by_seqno"] != f["prepared_seqno"]:
            problems.append(f["offset"])
            return
        _set(s, key, {**prepare, "by_seqno": seqno, "delete_time": None, "prepare": False})
    elif op == Opcode.ABORT:
        s.pending.pop(key, None)


def _version(f, body, *, deleted):
    carries_flags = f["opcode"] in (Opcode.MUTATION, Opcode.PREPARE)
    return {"by_seqno": f["by_seqno"], "rev_seqno": f["rev_seqno"], "cas": f["cas"],
            "flags": f["flags"] if carries_flags else None,
            "expiration": f["expiration"] if carries_flags else None,
            "datatype": int(f["datatype"]), "deleted": deleted,
            "delete_time": f.get("delete_time"), "body": body[0], "xattrs": body[1],
            "gone": None}


def _set(s: Stream, key, version) -> None:
    s.history.setdefault(key, []).append(dict(version))


def _clear(s: Stream, cid: int, seqno: int) -> None:
    for key in [k for k in s.pending if k[0] == cid]:
        del s.pending[key]
    for key, versions in s.history.items():
        if key[0] == cid:
            for v in versions:
                if v["gone"] is None:
                    v["gone"] = seqno


def _valid(versions, cut):
    """Versions before the stream's time cut in seqno order (a seqno sent again counts
    once, as last sent), each with its valid_to seqno."""
    once = {v["by_seqno"]: v for v in versions if v["by_seqno"] < cut}
    versions = [once[seqno] for seqno in sorted(once)]
    out = []
    for v, after in zip(versions, versions[1:] + [None]):
        # the next version, or the clear that ended this one where it came first
        to = v["gone"] if v["gone"] is not None and (
            after is None or after["by_seqno"] > v["gone"]) else (after and after["by_seqno"])
        out.append({**v, "valid_to_seqno": to})
    return out


def decoded(data: bytes, **scan):
    """(frames, bodies) of ``data`` as ``model`` reads them: ``batch.frame(i)`` dicts with
    plain ints, the collection a clearing system event names as ``cleared``, and each
    document change's (body, xattrs)."""
    import dcpfast

    batch = dcpfast.scan(data, final=True, **scan)
    events = {e["index"]: e for e in batch.system_events().to_pylist()}
    frames = []
    for i in range(len(batch)):
        f = {k: int(v) if isinstance(v, int) else v for k, v in batch.frame(i).items()}
        event = events.get(i)
        if event and event["collection_id"] is not None and event["event"] in (
                "create_collection", "flush_collection", "drop_collection"):
            f["cleared"] = event["collection_id"]
        frames.append(f)
    bodies = {r["index"]: (r["body"], None if r["xattrs"] is None else dict(r["xattrs"]))
              for r in batch.values().to_pylist()}
    return frames, bodies


def rows_of(table, *, history: bool = False) -> dict:
    """A ``state`` table in ``model``'s form."""
    out: dict = {}
    for r in table.to_pylist():
        key = (r["vbucket"], r["collection_id"], r["key"])
        version = {name: r[name] for name in FIELDS}
        version["xattrs"] = None if r["xattrs"] is None else dict(r["xattrs"])
        if history:
            version["valid_to_seqno"] = r["valid_to_seqno"]
            out.setdefault(key, []).append(version)
        else:
            out[key] = version
    return out


FIELDS = ("by_seqno", "rev_seqno", "cas", "flags", "expiration", "datatype", "deleted",
          "delete_time", "body", "xattrs")


def expected(docs: dict, *, history: bool = False, include_deleted: bool = True) -> dict:
    """``model``'s documents in ``rows_of``'s form."""
    def one(v):
        out = {name: v[name] for name in FIELDS}
        if history:
            out["valid_to_seqno"] = v["valid_to_seqno"]
        return out

    out = {}
    for key, value in docs.items():
        if history:
            versions = [one(v) for v in value if include_deleted or not v["deleted"]]
            if versions:
                out[key] = versions
        elif include_deleted or not value["deleted"]:
            out[key] = one(value)
    return out
