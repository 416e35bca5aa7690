"""Errors raised for malformed input, the words of every reason dcpfast gives for one, and
the one way an errors mode reports damage (``Reporter`` as it is found, ``checked`` once
found; ``with_skipped`` lists it in a table's metadata, ``skipped_regions`` reads it)."""

from __future__ import annotations

import bisect
import importlib
import json
from types import ModuleType
from typing import NamedTuple

from .packets import CaptureProblem
from .protocol import Problem, ValueProblem


class DcpFormatError(ValueError):
    """Input that is not a well-formed DCP frame stream.

    ``offset`` is the byte position in the stream where the bad frame starts;
    ``reason`` says what is wrong with it.
    """

    def __init__(self, offset: int, reason: str):
        super().__init__(f"at byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason

    def __reduce__(self):
        return type(self), (self.offset, self.reason)


class CaptureFormatError(DcpFormatError):
    """A capture file that cannot be read on; ``offset`` is a position in the file."""


#: The ways damage is met: "strict" raises at the first damaged frame; "skip" steps over
#: damage, keeps every intact frame and lists what it passed over.
MODES = ("strict", "skip")


def checked_mode(errors: object, *, name: str = "errors") -> str:
    """``errors`` when it is one of ``MODES``; else a ``ValueError`` that says so."""
    if errors not in MODES:
        raise ValueError(f"{name} must be {' or '.join(map(repr, MODES))}, not {errors!r}")
    return errors  # type: ignore[return-value]


class SkippedRegion(NamedTuple):
    """Bytes that ``errors="skip"`` passed over: where, how many, and why."""

    offset: int
    length: int
    reason: str


class Reporter:
    """Damage reported under an errors mode: ``"strict"`` raises ``error(offset, reason)``;
    ``"skip"`` lists a ``SkippedRegion`` in ``regions`` once, keeping the list in stream order.

    A reporter serves one pass over its list: it remembers what the list held when it
    first recorded, so that a region already listed (by this pass or an earlier one, on
    the same batch or a batch sharing its list) is not listed again.
    """

    def __init__(self, mode: str, regions: list[SkippedRegion],
                 error: type[DcpFormatError] = DcpFormatError):
        self.mode, self.regions, self.error = mode, regions, error
        self._listed: set[SkippedRegion] | None = None

    def report(self, offset: int, length: int, reason: str) -> None:
        """Raise for ``offset`` (strict), or list ``(offset, length, reason)`` once (skip)."""
        if self.mode == "strict":
            raise self.error(offset, reason)
        region = SkippedRegion(offset, length, reason)
        if self._listed is None:
            self._listed = set(self.regions)
        if region not in self._listed:
            self._listed.add(region)
            bisect.insort(self.regions, region)


def checked(mode: str, regions: list[SkippedRegion],
            error: type[DcpFormatError] = DcpFormatError) -> list[SkippedRegion]:
    """``regions`` (in stream order) found under an errors ``mode``: ``"strict"`` raises
    ``error`` for the first; ``"skip"`` returns them."""
    if regions and mode == "strict":
        raise error(regions[0].offset, regions[0].reason)
    return regions


#: The key of the schema metadata in which a table made from a batch (``values``,
#: ``system_events``, ``with_names``, the stream tables and ``Summary.to_arrow`` of
#: ``dcpfast.streams``) lists what skip mode passed over making it: JSON,
#: ``[[offset, length, reason], ...]`` in stream order. A table that passed over nothing
#: has no such key.
SKIPPED_KEY = b"dcpfast.skipped"


def with_skipped(table, regions: list[SkippedRegion]):
    """``table`` (a ``pyarrow.Table``) with ``regions`` listed in its metadata
    (``SKIPPED_KEY``; ``table`` itself where there are none)."""
    if not regions:
        return table
    return table.replace_schema_metadata({
        **(table.schema.metadata or {}),
        SKIPPED_KEY: json.dumps([list(r) for r in regions]).encode()})


def skipped_regions(table) -> list[SkippedRegion]:
    """What ``errors="skip"`` passed over making ``table`` (a table of ``values``,
    ``iter_values``, ``system_events`` or ``with_names``, a stream table or a stream
    summary's ``to_arrow()``), in stream order: the frames whose value, event, Stream
    Request or response did not decode (the batch's own ``errors`` lists what the scan
    skipped). A state's table says it with ``dcpfast.documents.state_errors``."""
    raw = (table.schema.metadata or {}).get(SKIPPED_KEY)
    return [] if raw is None else [SkippedRegion(*r) for r in json.loads(raw)]


# -- reasons -------------------------------------------------------------------------------
# Problems found by compiled loops come as (code, a, b): ``describe`` words them. Every
# other reason has a short name and named fields: ``text`` words it.

_SCAN = {
    Problem.BAD_MAGIC: "unknown magic 0x{a:02x}",
    Problem.FRAME_TOO_LARGE: "frame of {a} bytes exceeds max_frame_size {b}",
    Problem.LENGTHS: "body length {a} is shorter than framing extras + extras + key ({b})",
    Problem.EXTRAS_LENGTH: "extras length {b} impossible for opcode 0x{a:02x}",
    Problem.FRAMING_EXTRAS: "framing extras overrun: frame info at byte {a} of {b}",
    Problem.STREAM_ID_LENGTH: "stream-id frame info of length {a} (must be 2)",
    Problem.DATATYPE: "invalid datatype 0x{a:02x}",
    Problem.KEY_LENGTH: "key length {b} not allowed for opcode 0x{a:02x}",
    Problem.VALUE_LENGTH: "value length {b} not allowed for opcode 0x{a:02x}",
    Problem.MARKER_VERSION: "snapshot marker version {a} with a {b}-byte value",
    Problem.LEB128_NO_STOP: "collection id prefix has no stop byte in its first {a} bytes",
    Problem.LEB128_NON_CANONICAL: "collection id prefix is overlong (non-canonical {a}-byte "
                                  "encoding)",
    Problem.LEB128_OVERFLOW: "collection id prefix exceeds 32 bits (5th byte 0x{a:02x})",
    Problem.RESERVED_COLLECTION: "reserved collection id {a}",
    Problem.EMPTY_LOGICAL_KEY: "empty logical key after the collection id prefix",
    Problem.TRUNCATED: "truncated frame: {a} of its {b} bytes before the end of data",
    Problem.RESYNC: "no frame boundary here: the bytes after this frame do not hold together",
}

#: Document values that do not decode (``values``).
_VALUE = {
    ValueProblem.SNAPPY_PREAMBLE: "Snappy value: no valid length preamble",
    ValueProblem.SNAPPY_LENGTH: "Snappy value: a {b}-byte block cannot inflate to the {a} "
                                "bytes it declares",
    ValueProblem.SNAPPY: "Snappy value does not inflate: {a}",
    ValueProblem.XATTR_SHORT: "xattr section: a {a}-byte value has no room for its length",
    ValueProblem.XATTR_SECTION: "xattr section of {a} bytes overruns the {b}-byte value",
    ValueProblem.XATTR_PAIR_HEADER: "xattr pair at byte {a}: its length word crosses the "
                                    "section end at byte {b}",
    ValueProblem.XATTR_PAIR_LENGTH: "xattr pair at byte {a}: length {b} is below 3 or "
                                    "overruns the section",
    ValueProblem.XATTR_KEY: "xattr pair at byte {a}: no key followed by a NUL and a value",
    ValueProblem.XATTR_VALUE: "xattr pair at byte {a}: the value is not one NUL-terminated "
                              "string",
    ValueProblem.XATTR_UTF8: "xattr pair at byte {a}: key or value is not valid UTF-8",
    ValueProblem.XATTR_DUPLICATE: "xattr pair at byte {a}: duplicate key",
}

#: Capture records the packet walkers refuse (``pcap.reader``).
_CAPTURE = {
    CaptureProblem.RECORD_TOO_LARGE: "capture record longer than 16 MiB",
    CaptureProblem.BLOCK_LENGTH: "pcapng block of impossible length",
    CaptureProblem.BLOCK_TRAILER: "pcapng block whose trailing length differs",
    CaptureProblem.UNKNOWN_INTERFACE: "pcapng packet on an undeclared interface",
}

_CODED: dict[type, dict] = {Problem: _SCAN, ValueProblem: _VALUE, CaptureProblem: _CAPTURE}

_SPLIT = "byte-range split of {uri} at {lo}..{hi}: "
_NAMED = {
    # capture files and their reassembly (pcap.reader, pcap.reassembly)
    "not_a_capture": "not a pcap or pcapng capture (unknown file magic)",
    "pcap_header_cut": "pcap file header cut short",
    "pcapng_byte_order": "pcapng section header with an unknown byte-order magic",
    "capture_cut_short": "capture cut short inside its last record ({present} bytes of it "
                         "present)",
    "capture_gap": "capture gap: {length} bytes of the TCP stream are not in the capture",
    "in_tcp_stream": "(a position in the TCP stream {src} -> {dst}, {direction}, not in the "
                     "capture file)",
    "frame_cut_by_gap": "frame cut short by a capture gap",
    "frame_cut_by_end": "frame cut short by the end of the capture",
    # compressed dumps (io.compression)
    "damaged_compressed": "damaged {codec} data: {error}",
    # the public API's hints: the way to what was meant (batch, io.dumps)
    "buffer_is_path": "expected a buffer of DCP frames, got the path {path!r}: "
                      "dcpfast.read(path) reads a dump file, dcpfast.iter_batches(path) "
                      "streams one",
    "read_buffer": "read() reads a dump from a path or a file object, not from {kind}: "
                   "dcpfast.scan(data) decodes a buffer already in memory",
    "capture_not_dump": "a {kind} capture, not a DCP dump: read it with "
                        "dcpfast.pcap.read_pcap(path)",
    "other_format": ": the input starts as {what}, not as DCP frames",
    "no_frames": "no DCP frame in the input: all of its {size:,} bytes were skipped as "
                 "damage{what}",
    "no_column": "column {name!r} was not scanned; scanned: {scanned}",
    "batch_key": "a FrameBatch takes a column name, a frame index or a slice, not {kind}",
    "unknown_opcode": "no opcode named {name!r}{hint}; the names: {names}",
    "did_you_mean": " (did you mean {name!r}?)",
    "needs_extra": "{what} needs {module}: pip install 'dcpfast[{extra}]'",
    # a position kept in a file between runs (io.positions)
    "position_truncated": "{path} shrank to {size} bytes below the {offset} already read: "
                          "a dump read on from where it stopped may only grow",
    "position_replaced": "{path} was replaced ({how}): a dump read on from where it "
                         "stopped may only grow",
    "position_rewritten": "{path} was rewritten ({how}): a dump read on from where it "
                          "stopped may only grow",
    # byte ranges of a file (io.ranges); ``anchor``: where a range's frames start or end
    "range_overlaps": _SPLIT + "the range after byte {hi} starts before this one (at "
                               "{anchor})",
    "range_misaligned": _SPLIT + "the frames before byte {anchor} do not end there (frames "
                                 "embedded in a value near the cut?); use a larger partition "
                                 "size or lead-in",
    # system events (events)
    "event_id": "unknown system event id {id}",
    "event_version": "system event {event} has no version {version}",
    "event_name": "{event} name is not UTF-8",
    "event_size": "{event} version {version} value of {size} bytes (must be {must})",
    "fb_short": "FlatBuffers value of {size} bytes is too short for a table",
    "fb_root": "FlatBuffers root table at {root} outside the {size}-byte value",
    "fb_vtable": "FlatBuffers vtable at {vtable} outside the {size}-byte value",
    "fb_vtable_size": "FlatBuffers vtable of {vtable_size} bytes at {vtable} does not fit "
                      "the {size}-byte value",
    "fb_table_size": "FlatBuffers table of {table_size} bytes at {root} does not fit the "
                     "{size}-byte value",
    "fb_field": "FlatBuffers field {name} at {field} outside its {table_size}-byte table",
    "fb_string_at": "FlatBuffers string {name} at {start} outside the {size}-byte value",
    "fb_string_overrun": "FlatBuffers string {name} of {length} bytes at {start} overruns "
                         "the {size}-byte value",
    # stream setup and responses (streams)
    "stream_request_value": "stream request value is not a JSON object",
    "stream_request_sid": "stream request sid {sid!r} is not in 1..65535",
    "failover_log_size": "failover log of {size} bytes is not a multiple of {entry}",
    "rollback_size": "rollback response value of {size} bytes (must be {must})",
    "cache_record_cut": "cache transfer record {record} at byte {at} of the value runs past "
                        "its {size} bytes",
    "cache_record_key": "cache transfer record {record}: key of {length} bytes (must be "
                        "{low} to {high})",
    "cache_record_collection": "cache transfer record {record}: its key does not start "
                               "with a valid collection id",
    "high_seqnos_size": "GetAllVbSeqnos response value of {size} bytes is not a multiple of "
                        "{entry}",
    # Spark jobs (spark)
    "capture_on_spark": "a packet capture (pcap or pcapng), not a DCP dump: decode it with "
                        "dcpfast convert or dcpfast.pcap.read_pcap",
    "unreadable": "cannot read {source}: {reason}",
    "output_exists": "{out} already exists: write elsewhere, or replace it "
                     "(mode=\"overwrite\", --overwrite)",
    "output_not_dataset": "{out} holds {name}, which is not part of a Parquet dataset: "
                          "not replacing it",
    "output_not_ours": "{out} holds {name}, which dcpfast did not write: not replacing it "
                       "(move it away, or write elsewhere)",
    "output_in_input": "{out} is inside the input {input}: write elsewhere (a later run "
                       "would read the output as dumps)",
    "not_a_file": "{source} is not a regular file or directory (a {kind}): give files or "
                  "directories of dumps",
    "dangling_link": "a symbolic link to {target}, which does not exist",
    "worker_mismatch": "Spark's Python workers run dcpfast {here} (from {where}, {python}) "
                       "but this process runs {there}: run from a directory that holds no "
                       "dcpfast/ source tree, or set PYTHONSAFEPATH=1 and PYSPARK_PYTHON to "
                       "this interpreter",
    "worker_python": "Spark's Python workers would run {python}, which is not this "
                     "interpreter ({here}) and lacks its dcpfast: set PYSPARK_PYTHON={here} "
                     "before the session starts",
    "stream_capture": "{source}: {reason}; the dcp stream reads raw DCP dumps",
    "stream_compressed": "{source} is compressed ({codec}): the dcp stream reads raw dumps "
                         "that grow (decompress it, or read it with read_dcp)",
    "delta_exists": "{out} is already a Delta table: append to it or replace it "
                    "(mode=\"append\" or \"overwrite\", --append or --overwrite)",
    "delta_not_table": "{out} holds {name} and is not a Delta table: write elsewhere",
    # reports (reporting)
    "report_clocks": "cannot report captures ({captures}) and dumps ({dumps}) together: "
                     "a capture's times are arrival times, a dump's are its documents' CAS "
                     "clock; report them apart",
    "report_empty": "no input to report on",
    # the stream checks (streams.checks): an anomaly's details, a loss's expectation
    "check_snapshot": "snapshot [{start}, {end}]",
    "check_oso_snapshot": "an OSO snapshot",
    "check_reached": "seqno {seqno}",
    "check_no_item": "no item",
    "check_backwards": "by_seqno {seqno} does not exceed the previous {previous}",
    "check_outside": "by_seqno {seqno} outside {where}",
    "check_before_marker": "by_seqno {seqno} before any snapshot marker of the stream",
    "check_ended_early": "{where} ended at {at}",
    "check_stream_end_inside": "stream end ({status}) inside {where}",
    "check_reached_suffix": ", reached {at}",
    "check_oso_not_ended": "an OSO snapshot ended without its end marker",
    "check_oso_not_started": "an OSO snapshot end without its start",
    "check_bytes_lost": "{length} bytes skipped: {reason}",
    "check_unmatched_rollback": "rollback to seqno {seqno} for opaque 0x{opaque:x}: no "
                                "request or stream uses that opaque",
    "expect_above": "a seqno above {seqno}",
    "expect_range": "a seqno in [{start}, {end}]",
    "expect_marker": "a snapshot marker",
    "expect_end": "its end, seqno {seqno}",
    "expect_oso_end": "the OSO snapshot's end",
    "expect_oso_start": "an OSO snapshot's start",
    "found_item": "an item at seqno {seqno}",
    "found_marker": "a new snapshot",
    "found_oso_end": "an OSO end",
    # document state (documents)
    "state_no_prepare": "commit of the prepare at seqno {prepared} (vbucket {vbucket}): no "
                        "such prepare is pending in the stream (captured mid-stream?)",
    "state_seqno_backwards": "seqno {seqno} of vbucket {vbucket} is not above the stream's "
                             "previous seqno {previous}",
    "state_lost": "frames of vbucket {vbucket} were lost before this one: {details} "
                  "(expected {expected}, found {found})",
    "state_keep_going": "; errors=\"skip\" keeps going, the consistent seqno of vbucket "
                        "{vbucket} stops before the loss",
    "state_skip_hint": "; errors=\"skip\" keeps going",
    "state_unknown_collections": "only_collections names {names}, which the stream never "
                                 "names (its system events name: {known}); give collection "
                                 "ids for collections created before the dump began",
    "state_capture_buffer": "a packet capture, not a DCP dump: give state its path, or the "
                            "batches of dcpfast.pcap.read_pcap",
    "state_unplaced_rollback": "rollback response (to seqno {seqno}) that no request and no "
                               "stream message places on a vbucket",
    # comparing two buckets (compare)
    "diff_side": "{reason} (in the {side})",
    "diff_side_file": "{reason} (in {file})",
    "diff_side_in": "{reason} (in the {side}: {file})",
    "diff_unknown_collections": "only_collections names {names}, which neither side holds "
                                "(they hold: {known}); a collection whose create event a "
                                "dump lacks goes by 0x<its id>",
    "diff_without_tombstones": "the {side} state was built without include_deleted=True: "
                               "build it with include_deleted=True (the diff needs its "
                               "tombstones)",
    "diff_keys_unsaid": "the {side}'s keys were read without collection ids, its stream not "
                        "saying whether they carry one (no HELLO, no collection event), "
                        "while the {other}'s carry them: read both with collections=True "
                        "(--collections) if the {side}'s keys carry collection ids too",
}


def describe(code: int, a: object = 0, b: object = 0) -> str:
    """The reason for a problem code and its two details: a scan ``Problem`` (a plain int
    is one), a ``ValueProblem`` or a ``CaptureProblem``."""
    table = _CODED.get(type(code))
    if table is None:
        return _SCAN[Problem(code)].format(a=a, b=b)
    return table[code].format(a=a, b=b)


def text(name: str, /, **fields: object) -> str:
    """The reason named ``name`` with its format ``fields`` filled in."""
    return _NAMED[name].format(**fields)


def is_truncated(reason: str) -> bool:
    """Whether a skipped region's ``reason`` is the scan's truncated frame: one the end of
    the data it was given cut short."""
    return reason.startswith(_SCAN[Problem.TRUNCATED].split(":")[0] + ":")


def names_other_format(reason: str) -> bool:
    """Whether ``reason`` says that the input is of another format than DCP frames."""
    return _NAMED["other_format"].split("{")[0] in reason


def is_capture_gap(reason: str) -> bool:
    """Whether a skipped region's ``reason`` is a capture gap: bytes of a TCP stream the
    capture lacks, not damage."""
    return reason.startswith(_NAMED["capture_gap"].split(":")[0])


def optional(module: str, extra: str, what: str) -> ModuleType:
    """The optional dependency ``module`` (a package or one of its modules), or an
    ImportError that says ``what`` needs it and the extra that installs it; an import that
    fails inside an installed package is raised as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise
        raise ImportError(text("needs_extra", what=what, module=module.split(".")[0],
                               extra=extra), name=e.name) from e
