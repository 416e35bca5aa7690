"""DCP wire constants, defined once for the Cython core, the pure-Python twin and the facade.

Layouts follow the project's byte-level reference (kv_engine code wins over its docs).
``KINDS`` is the table both scanners interpret: every frame is classified into one
kind, and a kind says which extras length it takes, what key and value it may carry,
and where its fields sit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, IntFlag

import numpy as np

HEADER_SIZE = 24
#: Default cap on ``24 + body length``; the server's own limit is 30 MiB (``max_packet_size``).
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
#: HELLO feature code for collections.
FEATURE_COLLECTIONS = 0x12
#: DCP Open flag that meant "collections" in the 5.5/6.0 developer preview.
OPEN_FLAG_COLLECTIONS = 0x10
#: Request frame-info id that carries a stream id.
FRAME_INFO_STREAM_ID = 2
#: Response frame-info id (magic 0x18) that carries the server's receive-to-send time, a
#: u16 decoded by ``server_duration_us``.
FRAME_INFO_SERVER_DURATION = 0
#: kv_engine's exponent of that encoding: ``microseconds = encoded ** 1.74 / 2``.
SERVER_DURATION_POWER = 1.74
UNBOUNDED = 0xFFFFFFFF


class Magic(IntEnum):
    CLIENT_REQUEST = 0x80
    CLIENT_RESPONSE = 0x81
    ALT_CLIENT_REQUEST = 0x08
    ALT_CLIENT_RESPONSE = 0x18
    SERVER_REQUEST = 0x82
    SERVER_RESPONSE = 0x83


#: The magics of a request and of a response on a DCP connection (a producer's stream
#: messages are requests), each with and without flexible framing extras: the one
#: definition of which frames are requests and which responses.
REQUEST_MAGICS = frozenset({Magic.CLIENT_REQUEST, Magic.ALT_CLIENT_REQUEST})
RESPONSE_MAGICS = frozenset({Magic.CLIENT_RESPONSE, Magic.ALT_CLIENT_RESPONSE})
#: Magic values accepted on a DCP connection; 0x82/0x83 never appear there.
DCP_MAGICS = REQUEST_MAGICS | RESPONSE_MAGICS
ALT_MAGICS = frozenset({Magic.ALT_CLIENT_REQUEST, Magic.ALT_CLIENT_RESPONSE})


class Opcode(IntEnum):
    HELLO = 0x1F
    SASL_LIST_MECHS = 0x20
    SASL_AUTH = 0x21
    SASL_STEP = 0x22
    GET_ALL_VB_SEQNOS = 0x48
    OPEN = 0x50
    ADD_STREAM = 0x51
    CLOSE_STREAM = 0x52
    STREAM_REQUEST = 0x53
    GET_FAILOVER_LOG = 0x54
    STREAM_END = 0x55
    SNAPSHOT_MARKER = 0x56
    MUTATION = 0x57
    DELETION = 0x58
    EXPIRATION = 0x59
    FLUSH = 0x5A
    SET_VBUCKET_STATE = 0x5B
    NOOP = 0x5C
    BUFFER_ACK = 0x5D
    CONTROL = 0x5E
    SYSTEM_EVENT = 0x5F
    PREPARE = 0x60
    SEQNO_ACKNOWLEDGED = 0x61
    COMMIT = 0x62
    ABORT = 0x63
    SEQNO_ADVANCED = 0x64
    OSO_SNAPSHOT = 0x65
    CACHE_TRANSFER = 0x66
    CACHE_TRANSFER_END = 0x67
    SELECT_BUCKET = 0x89
    GET_FAILOVER_LOG_NON_DCP = 0x96


class Datatype(IntFlag):
    RAW = 0x00
    JSON = 0x01
    SNAPPY = 0x02
    XATTR = 0x04


MAX_DATATYPE = 0x07

# -- document values -----------------------------------------------------------------------

#: The big-endian u32 that opens an xattr section (its length, without itself) and each
#: pair in it (the pair's length: key, NUL, value, NUL).
XATTR_LENGTH_SIZE = 4
#: Shortest pair after its length word: a one-byte key and two NULs.
XATTR_MIN_PAIR = 3
#: Raw Snappy: the block opens with its uncompressed length as a little-endian base-128
#: varint of at most 5 bytes (32 bits); no element inflates more than 64 bytes out of 3.
SNAPPY_MAX_PREAMBLE = 5
SNAPPY_MAX_EXPANSION = (64, 3)


class ValueProblem(IntEnum):
    """Why a document value failed to decode (``errors.describe`` words them)."""

    SNAPPY_PREAMBLE = 1          # detail: -
    SNAPPY_LENGTH = 2            # detail: declared length, block length
    SNAPPY = 3                   # the library's message
    XATTR_SHORT = 4              # detail: value length
    XATTR_SECTION = 5            # detail: section length, value length
    XATTR_PAIR_HEADER = 6        # detail: pair position, section end
    XATTR_PAIR_LENGTH = 7        # detail: pair position, pair length
    XATTR_KEY = 8                # detail: pair position
    XATTR_VALUE = 9              # detail: pair position
    XATTR_UTF8 = 10              # detail: pair position
    XATTR_DUPLICATE = 11         # detail: pair position


class Status(IntEnum):
    SUCCESS = 0x00
    KEY_ENOENT = 0x01
    KEY_EEXISTS = 0x02
    E2BIG = 0x03
    EINVAL = 0x04
    NOT_STORED = 0x05
    NOT_MY_VBUCKET = 0x07
    NO_BUCKET = 0x08
    LOCKED = 0x09
    DCP_STREAM_NOT_FOUND = 0x0A
    OPAQUE_NO_MATCH = 0x0B
    E_WOULD_THROTTLE = 0x0C
    E_CONFIG_ONLY = 0x0D
    NOT_LOCKED = 0x0E
    CAS_VALUE_INVALID = 0x0F
    AUTH_STALE = 0x1F
    AUTH_ERROR = 0x20
    AUTH_CONTINUE = 0x21
    ERANGE = 0x22
    ROLLBACK = 0x23
    EACCESS = 0x24
    NOT_INITIALIZED = 0x25
    BUCKET_PAUSED = 0x50
    CANCELLED = 0x51
    UNKNOWN_FRAME_INFO = 0x80
    UNKNOWN_COMMAND = 0x81
    ENOMEM = 0x82
    NOT_SUPPORTED = 0x83
    EINTERNAL = 0x84
    EBUSY = 0x85
    ETMPFAIL = 0x86
    XATTR_EINVAL = 0x87
    UNKNOWN_COLLECTION = 0x88
    CANNOT_APPLY_COLLECTIONS_MANIFEST = 0x8A
    UNKNOWN_SCOPE = 0x8C
    DCP_STREAM_ID_INVALID = 0x8D
    DURABILITY_INVALID_LEVEL = 0xA0
    DURABILITY_IMPOSSIBLE = 0xA1
    SYNC_WRITE_IN_PROGRESS = 0xA2
    SYNC_WRITE_AMBIGUOUS = 0xA3
    SYNC_WRITE_RE_COMMIT_IN_PROGRESS = 0xA4


class SnapshotFlag(IntFlag):
    MEMORY = 0x01
    DISK = 0x02
    CHECKPOINT = 0x04
    ACK = 0x08
    HISTORY = 0x10
    MAY_CONTAIN_DUPLICATE_KEYS = 0x20


class StreamEndStatus(IntEnum):
    OK = 0
    CLOSED = 1
    STATE_CHANGED = 2
    DISCONNECTED = 3
    SLOW = 4
    BACKFILL_FAIL = 5
    ROLLBACK = 6
    FILTER_EMPTY = 7
    LOST_PRIVILEGES = 8


class VBucketState(IntEnum):
    ACTIVE = 1
    REPLICA = 2
    PENDING = 3
    DEAD = 4


class DurabilityLevel(IntEnum):
    MAJORITY = 1
    MAJORITY_AND_PERSIST_ON_MASTER = 2
    PERSIST_TO_MAJORITY = 3


class SystemEventId(IntEnum):
    BEGIN_COLLECTION = 0
    END_COLLECTION = 1
    FLUSH_COLLECTION = 2
    CREATE_SCOPE = 3
    DROP_SCOPE = 4
    MODIFY_COLLECTION = 5


#: Event names in ``FrameBatch.system_events()``. Since 8.0 a flush re-emits the
#: collection's create event at a newer seqno; id 2 was defined but never sent.
SYSTEM_EVENT_NAMES = {
    SystemEventId.BEGIN_COLLECTION: "create_collection",
    SystemEventId.END_COLLECTION: "drop_collection",
    SystemEventId.FLUSH_COLLECTION: "flush_collection",
    SystemEventId.CREATE_SCOPE: "create_scope",
    SystemEventId.DROP_SCOPE: "drop_scope",
    SystemEventId.MODIFY_COLLECTION: "modify_collection",
}
#: Version 0/1 system-event values: big-endian, exact sizes; manifest uid, scope id, then
#: (collection events) collection id and (version 1 create) max_ttl.
SYSTEM_EVENT_FIXED = {
    (SystemEventId.BEGIN_COLLECTION, 0): ">QII",
    (SystemEventId.BEGIN_COLLECTION, 1): ">QIII",
    (SystemEventId.END_COLLECTION, 0): ">QII",
    (SystemEventId.FLUSH_COLLECTION, 0): ">QII",
    (SystemEventId.CREATE_SCOPE, 0): ">QI",
    (SystemEventId.DROP_SCOPE, 0): ">QI",
}
#: Version whose value is a FlatBuffers table (little-endian; kv ``collections/events.fbs``).
SYSTEM_EVENT_FLATBUFFERS = 2
#: FlatBuffers tables of version-2 events: (field, type) in field-id order; types are
#: ``u64``, ``u32``, ``bool`` and ``string``; absent scalars take 0/false, strings null.
FB_COLLECTION = (("uid", "u64"), ("scopeId", "u32"), ("collectionId", "u32"),
                 ("ttlValid", "bool"), ("maxTtl", "u32"), ("name", "string"),
                 ("history", "bool"), ("defaultCollectionMVS", "u64"), ("metered", "bool"),
                 ("flushUid", "u64"))
FB_DROPPED_COLLECTION = (("uid", "u64"), ("scopeId", "u32"), ("collectionId", "u32"),
                         ("systemCollection", "bool"))
FB_SCOPE = (("uid", "u64"), ("scopeId", "u32"), ("name", "string"))
FB_DROPPED_SCOPE = (("uid", "u64"), ("scopeId", "u32"), ("systemScope", "bool"))
#: The root table of each event's version-2 value.
SYSTEM_EVENT_TABLES = {
    SystemEventId.BEGIN_COLLECTION: FB_COLLECTION,
    SystemEventId.END_COLLECTION: FB_DROPPED_COLLECTION,
    SystemEventId.CREATE_SCOPE: FB_SCOPE,
    SystemEventId.DROP_SCOPE: FB_DROPPED_SCOPE,
    SystemEventId.MODIFY_COLLECTION: FB_COLLECTION,
}
#: The default collection and scope: id 0, both named ``_default``.
DEFAULT_COLLECTION_ID = 0
DEFAULT_SCOPE_ID = 0
DEFAULT_NAME = "_default"


class OsoFlag(IntFlag):
    START = 0x01
    END = 0x02


class OpenFlag(IntFlag):
    """DCP Open flags (request extras bytes 4-7)."""

    PRODUCER = 0x01
    NOTIFIER = 0x02                          # rejected by current servers
    INCLUDE_XATTRS = 0x04
    NO_VALUE = 0x08
    COLLECTIONS = 0x10                       # 5.5/6.0 developer preview only
    INCLUDE_DELETE_TIMES = 0x20
    NO_VALUE_WITH_UNDERLYING_DATATYPE = 0x40
    PITR = 0x80                              # removed
    INCLUDE_DELETED_USER_XATTRS = 0x100
    SKIP_DELETES_IN_INITIAL_BACKFILL = 0x200


class StreamRequestFlag(IntFlag):
    """Stream Request (and Add Stream) flags."""

    TAKEOVER = 0x01
    DISK_ONLY = 0x02
    TO_LATEST = 0x04
    NO_VALUE = 0x08                          # obsolete: rejected
    ACTIVE_VB_ONLY = 0x10
    STRICT_VB_UUID = 0x20
    FROM_LATEST = 0x40
    IGNORE_PURGED_TOMBSTONES = 0x80
    CACHE_TRANSFER = 0x100


#: struct layouts of DCP Open extras (reserved, flags) and Stream Request extras (flags,
#: reserved, start, end, vbucket uuid, snapshot start, snapshot end).
OPEN_EXTRAS = ">II"
STREAM_REQUEST_EXTRAS = ">IIQQQQQ"
#: A failover-log entry (vbucket uuid, seqno) and a rollback response value (seqno).
FAILOVER_ENTRY = ">QQ"
ROLLBACK_VALUE = ">Q"
#: One vbucket of a GetAllVbSeqnos (0x48) success response's value: vbucket u16, seqno u64.
HIGH_SEQNO_ENTRY = ">HQ"
#: The head of a Cache Transfer (0x66) record: cas, by_seqno, rev_seqno u64; value_len,
#: flags, expiration u32; key_len u16; datatype, cache hint u8 (then key, then value); and
#: the lengths its key may have (a collection id and at least one byte of a 250-byte key).
CACHE_RECORD = ">QQQIIIHBB"
CACHE_RECORD_KEY = (2, 251)
#: Key of the stream id in a Stream Request's JSON value.
STREAM_REQUEST_SID = "sid"


#: Opcodes that change a document: mutation, deletion, expiration, prepare, and the commit
#: or abort that resolves a prepare. Their key is the document's.
DOCUMENT_CHANGES = frozenset({Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION,
                              Opcode.PREPARE, Opcode.COMMIT, Opcode.ABORT})
#: Opcodes whose value is a document (possibly empty): the changes that carry one, all but
#: commit and abort.
DOCUMENT_VALUES = frozenset({Opcode.MUTATION, Opcode.DELETION, Opcode.EXPIRATION,
                             Opcode.PREPARE})
#: Opcodes whose key starts with a LEB128 collection id on collection-enabled streams:
#: the document changes.
COLLECTION_PREFIXED = DOCUMENT_CHANGES
#: Stream messages with a seqno of their own (by_seqno): the stream's position moves with
#: each. The document changes, system events and seqno advances.
SEQNO_ITEMS = DOCUMENT_CHANGES | {Opcode.SYSTEM_EVENT, Opcode.SEQNO_ADVANCED}
#: Requests of the connection, not of a vbucket (their vbucket field is 0 and means
#: nothing): they carry no vbucket column, so that vbucket 0 counts only its own frames.
CONNECTION_REQUESTS = frozenset({Opcode.HELLO, Opcode.SASL_LIST_MECHS, Opcode.SASL_AUTH,
                                 Opcode.SASL_STEP, Opcode.OPEN, Opcode.NOOP,
                                 Opcode.BUFFER_ACK, Opcode.CONTROL, Opcode.SELECT_BUCKET})
#: Opcodes that occur only on collection-enabled streams (evidence for auto-detection).
COLLECTIONS_ONLY = frozenset({Opcode.SYSTEM_EVENT, Opcode.SEQNO_ADVANCED})
#: Opcodes a resynchronising scanner accepts as a frame start: DCP plus its handshake.
KNOWN_OPCODES = frozenset(Opcode)
#: Opcodes in the DCP range; their responses carry no extras (AddStream: 4).
DCP_OPCODES = frozenset(op for op in Opcode if 0x50 <= op <= 0x67)
RESPONSE_EXTRAS = {op: (0, 4) if op == Opcode.ADD_STREAM else (0,) for op in DCP_OPCODES}

# -- frame kinds ---------------------------------------------------------------------------

EXTRAS, VALUE = 0, 1   # where a field's offset counts from


@dataclass(frozen=True)
class Field:
    column: str
    base: int      # EXTRAS or VALUE
    offset: int
    width: int     # bytes, big-endian; equals the column's itemsize


@dataclass(frozen=True)
class Kind:
    name: str
    opcode: int | None            # None: any opcode (generic request/response)
    response: bool
    extras_len: int | None        # None: any
    key: tuple[int, int]          # allowed key length range (inclusive)
    value: tuple[int, int]        # allowed value length range (inclusive)
    fields: tuple[Field, ...] = ()
    marker_version: int | None = None
    marker_disk: bool = False     # a V2.x marker kind for markers with the Disk flag

    @property
    def prefixed(self) -> bool:
        return self.opcode in COLLECTION_PREFIXED

    @property
    def columns(self) -> frozenset[str]:
        return frozenset(f.column for f in self.fields)


_ANY = (0, UNBOUNDED)
_NONE = (0, 0)
_SOME = (1, UNBOUNDED)


def _x(column, offset, width):
    return Field(column, EXTRAS, offset, width)


def _v(column, offset, width):
    return Field(column, VALUE, offset, width)


_SEQNOS = (_x("by_seqno", 0, 8), _x("rev_seqno", 8, 8))
_DOC_META = _SEQNOS + (_x("flags", 16, 4), _x("expiration", 20, 4), _x("lock_time", 24, 4))
#: The nru ("not recently used") byte: after nmeta in a mutation, after lock_time in a
#: prepare.
_MUTATION_META = _DOC_META + (_x("nru", 30, 1),)
_PREPARE_META = _DOC_META + (_x("nru", 28, 1),)
_MARKER_V2 = (_x("marker_version", 0, 1), _v("snap_start", 0, 8), _v("snap_end", 8, 8),
              _v("snap_flags", 16, 4), _v("max_visible_seqno", 20, 8))
#: Offset in a V2.x marker's value of the byte that holds the Disk flag (the last byte of
#: the big-endian snap_flags).
MARKER_V2_FLAGS_BYTE = 19


def _marker_kinds(name: str, length: int, fields: tuple, version: int,
                  disk_fields: tuple = ()) -> tuple[Kind, Kind]:
    """The two kinds of a V2.x snapshot marker: ``name`` with the Disk flag set, and
    ``name_memory`` without it, whose high completed and high prepared seqnos mean nothing
    (kv_engine reads them only from Disk markers, MB-65564) and so are not its fields."""
    disk = (_v("high_completed_seqno", 28, 8), *fields, *disk_fields)
    return (Kind(name, Opcode.SNAPSHOT_MARKER, False, 1, _NONE, (length, length),
                 _MARKER_V2 + disk, marker_version=version, marker_disk=True),
            Kind(f"{name}_memory", Opcode.SNAPSHOT_MARKER, False, 1, _NONE, (length, length),
                 _MARKER_V2 + fields, marker_version=version))

_RESOLUTION = (_x("prepared_seqno", 0, 8), _x("by_seqno", 8, 8))

KINDS: tuple[Kind, ...] = (
    Kind("request", None, False, None, _ANY, _ANY),
    Kind("response", None, True, None, _ANY, _ANY),
    Kind("open", Opcode.OPEN, False, 8, _SOME, _ANY),
    Kind("add_stream", Opcode.ADD_STREAM, False, 4, _NONE, _NONE),
    Kind("close_stream", Opcode.CLOSE_STREAM, False, 0, _NONE, _NONE),
    Kind("stream_request", Opcode.STREAM_REQUEST, False, 48, _NONE, _ANY),
    Kind("get_failover_log", Opcode.GET_FAILOVER_LOG, False, 0, _NONE, _NONE),
    Kind("stream_end", Opcode.STREAM_END, False, 4, _NONE, _NONE, (_x("end_status", 0, 4),)),
    Kind("snapshot_marker_v1", Opcode.SNAPSHOT_MARKER, False, 20, _NONE, _NONE,
         (_x("snap_start", 0, 8), _x("snap_end", 8, 8), _x("snap_flags", 16, 4))),
    *_marker_kinds("snapshot_marker_v2_0", 36, (), 0),
    *_marker_kinds("snapshot_marker_v2_1", 44, (), 1),
    *_marker_kinds("snapshot_marker_v2_2", 52, (_v("purge_seqno", 36, 8),), 2,
                   (_v("high_prepared_seqno", 44, 8),)),
    *_marker_kinds("snapshot_marker_v2_2_purge", 44, (_v("purge_seqno", 36, 8),), 2),
    Kind("mutation", Opcode.MUTATION, False, 31, _SOME, _ANY, _MUTATION_META),
    Kind("deletion_v1", Opcode.DELETION, False, 18, _SOME, _ANY, _SEQNOS),
    Kind("deletion_v2", Opcode.DELETION, False, 21, _SOME, _ANY,
         _SEQNOS + (_x("delete_time", 16, 4),)),
    Kind("expiration", Opcode.EXPIRATION, False, 20, _SOME, _ANY,
         _SEQNOS + (_x("delete_time", 16, 4),)),
    Kind("flush", Opcode.FLUSH, False, 0, _NONE, _NONE),
    Kind("set_vbucket_state", Opcode.SET_VBUCKET_STATE, False, 1, _NONE, _NONE,
         (_x("vb_state", 0, 1),)),
    Kind("noop", Opcode.NOOP, False, 0, _NONE, _NONE),
    # the connection's other requests (no extras), of kinds of their own so that they
    # carry no vbucket (CONNECTION_REQUESTS)
    Kind("hello", Opcode.HELLO, False, 0, _ANY, _ANY),
    Kind("sasl_list_mechs", Opcode.SASL_LIST_MECHS, False, 0, _ANY, _ANY),
    Kind("sasl_auth", Opcode.SASL_AUTH, False, 0, _ANY, _ANY),
    Kind("sasl_step", Opcode.SASL_STEP, False, 0, _ANY, _ANY),
    Kind("select_bucket", Opcode.SELECT_BUCKET, False, 0, _ANY, _ANY),
    Kind("buffer_ack", Opcode.BUFFER_ACK, False, 4, _NONE, _NONE, (_x("ack_bytes", 0, 4),)),
    Kind("control", Opcode.CONTROL, False, 0, _SOME, _SOME),
    Kind("system_event", Opcode.SYSTEM_EVENT, False, 13, _ANY, _ANY,
         (_x("by_seqno", 0, 8), _x("event_id", 8, 4), _x("event_version", 12, 1))),
    Kind("prepare", Opcode.PREPARE, False, 31, _SOME, _ANY,
         _PREPARE_META + (_x("deleted", 29, 1), _x("durability_level", 30, 1))),
    Kind("seqno_acknowledged", Opcode.SEQNO_ACKNOWLEDGED, False, 8, _NONE, _NONE,
         (_x("by_seqno", 0, 8),)),
    Kind("commit", Opcode.COMMIT, False, 16, _SOME, _NONE, _RESOLUTION),
    Kind("abort", Opcode.ABORT, False, 16, _SOME, _NONE, _RESOLUTION),
    Kind("seqno_advanced", Opcode.SEQNO_ADVANCED, False, 8, _NONE, _NONE,
         (_x("by_seqno", 0, 8),)),
    Kind("oso_snapshot", Opcode.OSO_SNAPSHOT, False, 4, _NONE, _NONE, (_x("oso_flags", 0, 4),)),
    Kind("cache_transfer", Opcode.CACHE_TRANSFER, False, 0, _NONE, (42, UNBOUNDED)),
    Kind("cache_transfer_end", Opcode.CACHE_TRANSFER_END, False, 0, _NONE, _NONE),
)

KIND_INDEX = {k.name: i for i, k in enumerate(KINDS)}
REQUEST_KIND = KIND_INDEX["request"]
RESPONSE_KIND = KIND_INDEX["response"]
#: Snapshot marker V2.x kinds by (version byte, value length, Disk flag set).
MARKER_V2_KINDS = {(k.marker_version, k.value[0], k.marker_disk): i
                   for i, k in enumerate(KINDS) if k.marker_version is not None}
#: Extras length of a V2.x snapshot marker (its one extras byte is the version).
MARKER_V2_EXTRAS_LEN = 1


def kinds_where(predicate: Callable[[Kind], bool]) -> np.ndarray:
    """Read-only bool lookup table indexed by kind number (``FrameBatch.kinds``): which
    kinds ``predicate`` holds for."""
    table = np.array([bool(predicate(k)) for k in KINDS], dtype=bool)
    table.flags.writeable = False
    return table


#: Per kind: frames that change a document (requests with an opcode in DOCUMENT_CHANGES).
DOCUMENT_CHANGE_KINDS = kinds_where(lambda k: k.opcode in DOCUMENT_CHANGES and not k.response)
#: Per kind: frames whose value is a document (requests with an opcode in DOCUMENT_VALUES).
DOCUMENT_VALUE_KINDS = kinds_where(lambda k: k.opcode in DOCUMENT_VALUES and not k.response)


def request_kinds(opcode: int) -> dict[int, int]:
    """Extras length -> kind index for a request opcode (empty for non-DCP opcodes)."""
    out: dict[int, int] = {}
    for i, k in enumerate(KINDS):
        if k.opcode == opcode and not k.response and k.marker_version is None \
                and k.extras_len is not None:
            out[k.extras_len] = i
    if opcode == Opcode.SNAPSHOT_MARKER:
        out[MARKER_V2_EXTRAS_LEN] = -1   # resolved by version byte and value length
    return out


# -- scan outcomes -------------------------------------------------------------------------
# Both scanners report problems as (code, a, b); errors.describe() words them.

OK = 0
INCOMPLETE = -1


class Problem(IntEnum):
    BAD_MAGIC = 1
    FRAME_TOO_LARGE = 2
    LENGTHS = 3
    EXTRAS_LENGTH = 4
    FRAMING_EXTRAS = 5
    STREAM_ID_LENGTH = 6
    DATATYPE = 7
    KEY_LENGTH = 8
    VALUE_LENGTH = 9
    MARKER_VERSION = 10
    LEB128_NO_STOP = 11
    LEB128_NON_CANONICAL = 12
    LEB128_OVERFLOW = 13
    RESERVED_COLLECTION = 14
    EMPTY_LOGICAL_KEY = 15
    TRUNCATED = 16
    RESYNC = 17
