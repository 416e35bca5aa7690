# The tables of the scan, loaded from protocol and schema at import: the frame kinds, their
# field layouts, the problem codes and the column order. The loops index these instead of
# asking Python.

# problem codes (protocol.Problem), copied in at import
cdef int BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS, EXTRAS_LENGTH, FRAMING_EXTRAS, STREAM_ID_LENGTH
cdef int DATATYPE, KEY_LENGTH, VALUE_LENGTH, MARKER_VERSION, LEB128_NO_STOP
cdef int LEB128_NON_CANONICAL, LEB128_OVERFLOW, RESERVED_COLLECTION, EMPTY_LOGICAL_KEY, TRUNCATED
cdef int RESYNC

# magic: -1 illegal, 0 request, 1 response; alt magics carry framing extras
cdef int8_t magic_class[256]
cdef uint8_t magic_alt[256]
cdef uint8_t opcode_known[256]
# kind by [response][opcode][extras length]: a kind, MARKER_PENDING (the value decides) or
# BAD_EXTRAS (no kind of this opcode has this extras length)
cdef int8_t kind_of[2][256][256]
cdef enum:
    MARKER_PENDING = -1
    BAD_EXTRAS = -2
cdef int n_marker
cdef uint8_t marker_version[16]
cdef uint32_t marker_len[16]
cdef uint8_t marker_disk[16]
cdef int marker_kind[16]
cdef uint32_t MARKER_FLAGS_BYTE
cdef uint8_t SNAP_DISK
# per kind
cdef uint32_t kind_key_min[MAX_KINDS]
cdef uint32_t kind_key_max[MAX_KINDS]
cdef uint32_t kind_val_min[MAX_KINDS]
cdef uint32_t kind_val_max[MAX_KINDS]
cdef uint32_t kind_key_range[MAX_KINDS]      # max - min
cdef uint32_t kind_val_range[MAX_KINDS]
cdef uint8_t kind_prefixed[MAX_KINDS]
# all ones where the kind is a response / carries a key / a value: header columns are
# masked instead of branched on
cdef uint64_t response_mask[MAX_KINDS]
cdef uint64_t vbucket_mask[MAX_KINDS]      # a request of a vbucket, not of the connection
cdef uint64_t key_mask[MAX_KINDS]
cdef uint64_t value_mask[MAX_KINDS]
cdef int kind_first[MAX_KINDS + 1]
cdef int field_col[MAX_FIELDS]
cdef uint8_t field_base[MAX_FIELDS]
cdef uint32_t field_off[MAX_FIELDS]
cdef uint8_t field_width[MAX_FIELDS]
cdef bint is_field_column[MAX_COLUMNS]
cdef uint8_t column_width[MAX_COLUMNS]
# column ids (schema order)
cdef int C_OFFSET, C_MAGIC, C_OPCODE, C_DATATYPE, C_VBUCKET, C_STATUS, C_OPAQUE, C_CAS
cdef int C_BODY_LEN, C_FRAMING_LEN, C_EXTRAS_LEN, C_KEY_OFFSET, C_KEY_LEN, C_VALUE_OFFSET
cdef int C_VALUE_LEN, C_COLLECTION_ID, C_STREAM_ID, C_SERVER_DURATION
cdef int n_columns, n_kinds
cdef int OP_HELLO, OP_OPEN, OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED
cdef uint32_t FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS
cdef double SERVER_DURATION_POWER


cdef void load_problems() except *:
    """The problem codes (``protocol.Problem``)."""
    global BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS, EXTRAS_LENGTH, FRAMING_EXTRAS, STREAM_ID_LENGTH
    global DATATYPE, KEY_LENGTH, VALUE_LENGTH, MARKER_VERSION, LEB128_NO_STOP
    global LEB128_NON_CANONICAL, LEB128_OVERFLOW, RESERVED_COLLECTION, EMPTY_LOGICAL_KEY, TRUNCATED
    global RESYNC
    pr = P.Problem
    BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS = pr.BAD_MAGIC, pr.FRAME_TOO_LARGE, pr.LENGTHS
    EXTRAS_LENGTH, FRAMING_EXTRAS = pr.EXTRAS_LENGTH, pr.FRAMING_EXTRAS
    STREAM_ID_LENGTH, DATATYPE, KEY_LENGTH = pr.STREAM_ID_LENGTH, pr.DATATYPE, pr.KEY_LENGTH
    VALUE_LENGTH, MARKER_VERSION = pr.VALUE_LENGTH, pr.MARKER_VERSION
    LEB128_NO_STOP, LEB128_NON_CANONICAL = pr.LEB128_NO_STOP, pr.LEB128_NON_CANONICAL
    LEB128_OVERFLOW, RESERVED_COLLECTION = pr.LEB128_OVERFLOW, pr.RESERVED_COLLECTION
    EMPTY_LOGICAL_KEY, TRUNCATED, RESYNC = pr.EMPTY_LOGICAL_KEY, pr.TRUNCATED, pr.RESYNC


cdef void load_frame_rules() except *:
    """What a frame header may say: the magics, the known opcodes, the kind of each
    (response, opcode, extras length), the snapshot marker versions, and the opcodes and
    flags that show collections."""
    global n_marker, MARKER_FLAGS_BYTE, SNAP_DISK
    global OP_HELLO, OP_OPEN, OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED
    global FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS, SERVER_DURATION_POWER
    cdef int i, op, j
    for i in range(256):
        magic_class[i] = -1
        magic_alt[i] = i in P.ALT_MAGICS
        opcode_known[i] = i in P.KNOWN_OPCODES
    for m in P.DCP_MAGICS:
        magic_class[m] = m in P.RESPONSE_MAGICS
    assert len(P.KINDS) < 128
    for op in range(256):
        rules = P.request_kinds(op)
        exts = P.RESPONSE_EXTRAS.get(op)
        for j in range(256):
            kind_of[0][op][j] = rules.get(j, BAD_EXTRAS) if rules else P.REQUEST_KIND
            kind_of[1][op][j] = P.RESPONSE_KIND if exts is None or j in exts else BAD_EXTRAS
    OP_HELLO, OP_OPEN = P.Opcode.HELLO, P.Opcode.OPEN
    OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED = P.Opcode.SYSTEM_EVENT, P.Opcode.SEQNO_ADVANCED
    FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS = P.FEATURE_COLLECTIONS, P.OPEN_FLAG_COLLECTIONS
    SERVER_DURATION_POWER = P.SERVER_DURATION_POWER
    assert P.FRAME_INFO_STREAM_ID == 2 and P.FRAME_INFO_SERVER_DURATION == 0  # framing()
    n_marker = len(P.MARKER_V2_KINDS)
    if n_marker > 16:
        raise ValueError("more than 16 snapshot marker V2.x kinds")
    for j, ((version, length, disk), kind) in enumerate(sorted(P.MARKER_V2_KINDS.items())):
        marker_version[j], marker_len[j], marker_disk[j], marker_kind[j] = \
            version, length, disk, kind
    MARKER_FLAGS_BYTE, SNAP_DISK = P.MARKER_V2_FLAGS_BYTE, P.SnapshotFlag.DISK


cdef void load_kinds() except *:
    """Per frame kind: its key and value length limits, its masks, and where its fields
    are and which columns they fill."""
    global n_kinds
    cdef int j = 0, k
    assert len(P.KINDS) <= MAX_KINDS
    for k, kind in enumerate(P.KINDS):
        kind_key_min[k], kind_key_max[k] = kind.key
        kind_val_min[k], kind_val_max[k] = kind.value
        kind_key_range[k] = kind_key_max[k] - kind_key_min[k]
        kind_val_range[k] = kind_val_max[k] - kind_val_min[k]
        kind_prefixed[k] = kind.prefixed
        response_mask[k] = 0 - <uint64_t>kind.response
        vbucket_mask[k] = 0 - <uint64_t>S.carried(kind, "vbucket", False)
        key_mask[k] = 0 - <uint64_t>(kind_key_max[k] != 0)
        value_mask[k] = 0 - <uint64_t>(kind_val_max[k] != 0)
        kind_first[k] = j
        for f in kind.fields:
            field_col[j] = S.INDEX[f.column]
            field_base[j] = f.base
            field_off[j] = f.offset
            field_width[j] = f.width
            assert f.width in (8, 4, 2, 1)
            j += 1
    kind_first[len(P.KINDS)] = j
    n_kinds = len(P.KINDS)
    assert j <= MAX_FIELDS


cdef void load_columns() except *:
    """The columns in schema order: their ids, widths, and which of them fields fill."""
    global n_columns, C_OFFSET, C_MAGIC, C_OPCODE, C_DATATYPE, C_VBUCKET, C_STATUS, C_OPAQUE
    global C_CAS, C_BODY_LEN, C_FRAMING_LEN, C_EXTRAS_LEN, C_KEY_OFFSET, C_KEY_LEN
    global C_VALUE_OFFSET, C_VALUE_LEN, C_COLLECTION_ID, C_STREAM_ID, C_SERVER_DURATION
    assert len(S.NAMES) <= MAX_COLUMNS
    assert BLOCK < 1 << 16                   # row numbers and counts of a block are uint16
    for c, name in enumerate(S.NAMES):
        is_field_column[c] = any(f.column == name for kind in P.KINDS for f in kind.fields)
        column_width[c] = S.DTYPES[name].itemsize
    ix = S.INDEX
    n_columns = len(S.NAMES)
    C_OFFSET, C_MAGIC, C_OPCODE = ix["offset"], ix["magic"], ix["opcode"]
    C_DATATYPE, C_VBUCKET, C_STATUS = ix["datatype"], ix["vbucket"], ix["status"]
    C_OPAQUE, C_CAS, C_BODY_LEN = ix["opaque"], ix["cas"], ix["body_len"]
    C_FRAMING_LEN, C_EXTRAS_LEN = ix["framing_len"], ix["extras_len"]
    C_KEY_OFFSET, C_KEY_LEN = ix["key_offset"], ix["key_len"]
    C_VALUE_OFFSET, C_VALUE_LEN = ix["value_offset"], ix["value_len"]
    C_COLLECTION_ID, C_STREAM_ID = ix["collection_id"], ix["stream_id"]
    C_SERVER_DURATION = ix["server_duration_us"]


load_problems()
load_frame_rules()
load_kinds()
load_columns()
