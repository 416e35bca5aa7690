"""What the cores are asked and what they answer: named types instead of positional tuples,
and the codes the state core and its callers agree on.

Both scan cores (``cscan`` and its twin ``pyscan``) take a ``ScanRequest`` and return a
``ScanResult``. The core never raises for malformed input: it reports the first problem
of a strict scan in ``failure``, and ``batch`` turns that into ``DcpFormatError``.

Both state cores (``cstate`` and its twin ``pystate``) take a request and return a result
for each of their calls: ``check_streams`` (``CheckRequest``, ``CheckResult``),
``walk_state`` (``WalkRequest``, ``WalkResult``), ``validity`` (``ValidityRequest``, which
carries the ``ValidityResult`` it fills) and ``pair_durable`` (``DurableRequest``,
``DurableResult``). The codes (``EV_*``, ``INFO_*``, ``R_*``, ``GIVEN_*``, ``C_*``,
``W_*``, ``K_*``) are defined here only, and so are the bits both cores keep in a
stream's check and walk state (``CS_*``, ``WS_*``) and the names they give the protocol's
numbers they read (``P_*``, taken from ``protocol``): ``setup.py`` writes them all as the
compiled core's compile-time constants (``cython_codes``), which it checks against these
at import (``check_codes``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..protocol import OsoFlag, SnapshotFlag, StreamEndStatus

#: Rows a scan reserves before it has measured the frames, when its first frames are no
#: guide: frames shorter than ``MIN_MEAN`` bytes on average would need more rows than the
#: input's size at that mean plus ``FIRST_ROWS``. The compiled core reserves so, and a
#: threaded scan (``io.threaded``) sizes the columns of a whole buffer by the same rule.
FIRST_ROWS = 65536
MIN_MEAN = 48


class ScanRequest(NamedTuple):
    """One scan of ``buf[start:]``."""

    #: Where in the buffer the scan starts.
    start: int
    #: The columns to fill (names of ``schema.NAMES``, in schema order).
    names: tuple[str, ...]
    #: Whether document keys start with a LEB128 collection id.
    collections: bool
    #: Step over damage (``errors="skip"``) instead of stopping at it.
    skip: bool
    #: Most frames to take; -1 for no limit.
    max_frames: int
    #: Frames longer than this (header included) are malformed.
    max_frame_size: int
    #: Stream position of ``buf[0]``, added to every offset.
    base: int
    #: No bytes follow the buffer: a frame cut short is damage.
    final: bool
    #: Skip mode: the frame at ``start`` was found by resynchronising at the end of the
    #: previous chunk and must still show a plausible frame after it.
    unverified: bool = False
    #: 0, or the log2 size of the data buffers of the Arrow binary views to write.
    view_bits: int = 0
    #: -1, or a position from which no frame is taken: the walk ends at the first frame
    #: boundary at or past it (a resynchronisation may still look beyond it).
    stop: int = -1


class ScanResult(NamedTuple):
    """What a scan found."""

    #: Frames decoded.
    frames: int
    #: End of the complete frames (where the next chunk resumes).
    consumed: int
    #: A numpy column for each requested name.
    arrays: dict[str, np.ndarray]
    #: The kind of each frame (an index into ``protocol.KINDS``).
    kinds: np.ndarray
    #: Skipped bytes as ``(start, length, code, a, b)`` (``code``: a ``protocol.Problem``).
    regions: list[tuple[int, int, int, int, int]]
    #: Skip mode: the frame at ``consumed`` awaits the resynchronisation checks.
    unverified: bool
    #: The binary-view structs of ``key`` and ``value`` (``(count, 16)`` uint8) when asked
    #: for and every value fits a data buffer, else None.
    views: dict[str, np.ndarray] | None
    #: The first problem of a strict scan as ``(position, code, a, b)``, else None; the
    #: other fields then describe no frames.
    failure: tuple[int, int, int, int] | None = None


# -- the state core (``cstate``, ``pystate``) ------------------------------------------
# The stream checks (``check_streams``) read one event per row of a vbucket stream, in
# arrival order, and keep each stream's check state in a row of a uint64 array; the
# state walk (``walk_state``) reads the state engine's rows likewise. The codes below are
# what both cores and their callers agree on.

#: Stream events the checks read.
EV_ITEM = 0            # a document change or system event: a seqno item
EV_ADVANCE = 1         # a seqno advance
EV_MARKER = 2          # a snapshot marker
EV_OSO_START = 3       # an OSO snapshot marker that starts one
EV_OSO_END = 4         # an OSO snapshot marker that ends one
EV_END = 5             # a Stream End
EV_REQUEST = 6         # a Stream Request (its start seqno in ``seqno``)
EV_RESPONSE = 7        # a Stream Request response placed on the stream
EV_NONE = 255          # a row the checks pass over

#: Bits of a row's ``info``.
INFO_COLLECTIONS = 1   # the connection is collection-enabled
INFO_UNFILTERED = 2    # a request known to ask for no collection filter
INFO_SEED = 4          # a request whose start seqno the next item must exceed

#: What a check found (the anomaly kinds of ``streams.checks.ANOMALIES``, in this order).
R_BACKWARDS = 0        # a seqno not above the previous one (outside OSO)
R_OUTSIDE = 1          # an item outside its marker's range, or before any marker
R_EARLY = 2            # a snapshot closed by a marker or OSO start before its end
R_ENDED_INSIDE = 3     # a Stream End inside a snapshot before its end
R_OSO_NOT_ENDED = 4    # a marker or OSO start inside an OSO snapshot
R_OSO_NOT_STARTED = 5  # an OSO end without its start

#: Bits of a finding's ``given``: a seqno was found (or a snapshot reached one); a range
#: (or a seqno to exceed) was expected.
GIVEN_FOUND = 1
GIVEN_RANGE = 2

#: Columns of a stream's check state (``check_streams``'s ``state``).
C_BITS, C_OPAQUE, C_CHAIN, C_START, C_END, C_FLAGS, C_REACH = range(7)
C_FIELDS = 7

#: Rows of the state engine (``documents.rows``): what each one is.
W_MUTATION, W_DELETION, W_EXPIRATION, W_PREPARE, W_COMMIT, W_ABORT, W_EVENT, W_ADVANCE, \
    W_MARKER, W_OSO, W_RESTART, W_END, W_LOSS, W_REQUEST, W_SKIP = range(15)
W_NONE = 15
#: ``W_LOSS``: bytes were lost there (a capture gap, skipped damage) that may have held
#: frames of any stream; ``W_REQUEST``: a Stream Request in the stream (its start seqno in
#: ``seqno``), which the walk passes over; ``W_NONE``: a row both pass over (a Stream
#: Request whose value does not decode); ``W_SKIP``: a frame of no stream the state reads
#: (a response, an opcode it has no use for), which has no stream slot (-1) and both pass
#: over.

#: Columns of a stream's walk state (``walk_state``'s ``carry``).
K_BITS, K_CHAIN, K_CUT, K_START, K_END, K_CONSISTENT, K_FLOOR = range(7)
K_FIELDS = 7
#: Bits of ``K_BITS``: frames of the stream were lost (its consistent seqno no longer
#: rises); a run of the stream began and has not yet shown where (``K_FLOOR``); the
#: stream has sent items.
K_LOST = 16
K_FRESH = 32
K_ITEMS = 64

# -- the cores' own state bits, shared by the compiled core and its twin ------------------
# What the bits of a stream's check state (``C_BITS``) and walk state (``K_BITS``) mean to
# the cores that keep them; no caller reads them (the walk's ``K_LOST``, ``K_FRESH`` and
# ``K_ITEMS`` above are its callers' too).

#: Bits of ``C_BITS``.
CS_OPEN = 1            # a run of the stream is open
CS_STARTED = 2         # the run began with a request or a placed response
CS_LAST_START = 4      # the stream's latest message is that request or response
CS_CHAIN = 8           # C_CHAIN holds the seqno the next item must exceed
CS_REACH = 16          # C_REACH holds the highest seqno since the snapshot opened
CS_ADVANCED = 32       # a seqno advance was seen in the run
CS_UNFILTERED = 64     # the run's request asked for no collection filter
CS_OPAQUE = 128        # C_OPAQUE holds the opaque of the stream's latest message
CS_ENDED = 256         # a Stream End closed the run
#: Two bits of ``C_BITS`` from ``CS_SNAP_SHIFT`` on: what opened the current snapshot.
CS_SNAP_SHIFT = 9
CS_SNAP_MASK = 3 << CS_SNAP_SHIFT
CS_NO_SNAP = 0         # no snapshot is open
CS_SNAP_MARKER = 1     # a snapshot marker (its range in C_START, C_END; flags in C_FLAGS)
CS_SNAP_OSO = 2        # an OSO snapshot's start: its items come in key order
CS_SNAP_OSO_CLOSED = 3  # an OSO snapshot's end: an item before the next marker is outside

#: Bits of ``K_BITS`` besides ``K_LOST``, ``K_FRESH`` and ``K_ITEMS``.
WS_IN_OSO = 1          # inside an OSO snapshot
WS_LAZY = 2            # restarted; the restart point awaits the stream's next item
WS_HAS_MARKER = 4      # K_START, K_END hold its open snapshot
WS_COMPLETED = 8       # a snapshot completed since the last restart

# -- the protocol's numbers the state cores read, named from ``protocol`` ------------------
P_SNAP_DISK = int(SnapshotFlag.DISK)
P_SNAP_HISTORY = int(SnapshotFlag.HISTORY)
P_END_OK = int(StreamEndStatus.OK)
P_OSO_START = int(OsoFlag.START)
P_OSO_END = int(OsoFlag.END)

#: The prefixes of the codes above: what ``codes`` gathers.
CODE_PREFIXES = ("EV_", "INFO_", "R_", "GIVEN_", "C_", "W_", "K_", "CS_", "WS_", "P_")


def codes() -> dict[str, int]:
    """The codes the state core and its callers agree on, the state bits of both cores and
    the protocol's numbers they read, by name, in definition order."""
    return {name: value for name, value in globals().items()
            if name.startswith(CODE_PREFIXES) and type(value) is int}


def cython_codes() -> str:
    """The codes as Cython declarations: an enum of compile-time constants, which the
    compiled core's loops compare and switch on, and ``_CODES``, the same by name, which
    it checks against ``codes()`` at import (``check_codes``). ``setup.py`` writes them to
    ``contract.pxi``, which ``cstate.pyx`` includes."""
    found = codes()
    return "\n".join([
        "# The codes of contract.py as compile-time constants: written by setup.py from",
        "# contract.cython_codes(); edit contract.py, not this file.",
        "cdef enum:", *(f"    {name} = {value}" for name, value in found.items()), "",
        "_CODES = {", *(f'    "{name}": {name},' for name in found), "}", ""])


def check_codes(compiled: dict[str, int], module: str) -> None:
    """Raise ``ImportError`` unless ``compiled``, the codes ``module`` was compiled with,
    are this module's: a core built against other codes would misread every row."""
    if compiled != codes():
        raise ImportError(f"{module} was compiled against other contract codes: rebuild it")


class CheckRequest(NamedTuple):
    """One call of the stream checks (``check_streams``): one event per row of each
    vbucket stream, in arrival order."""

    #: uint8 per row: its stream event (``EV_*``); ``EV_NONE`` rows are passed over.
    event: np.ndarray
    #: int64 per row: its stream's row in ``state``.
    slot: np.ndarray
    #: uint8 per row: ``INFO_*`` bits.
    info: np.ndarray
    #: uint32 per row: the message's opaque.
    opaque: np.ndarray
    #: uint64 per row: an item's or seqno advance's seqno, a Stream Request's start seqno.
    seqno: np.ndarray
    #: uint64 per row: a snapshot marker's start.
    snap_start: np.ndarray
    #: uint64 per row: a snapshot marker's end.
    snap_end: np.ndarray
    #: uint32 per row: a snapshot marker's flags (``protocol.SnapshotFlag``).
    snap_flags: np.ndarray
    #: uint32 per row: a Stream End's status.
    end_status: np.ndarray
    #: uint64, ``C_FIELDS`` columns: each stream's check state, carried from call to
    #: call (zeros for a stream not yet seen), updated in place.
    state: np.ndarray


class Findings(NamedTuple):
    """What the stream checks found, per finding: its row, the rule it broke, the seqno
    found and what was expected (the range ``[low, high]``: an item outside its snapshot,
    a snapshot short of its end; or the seqno ``low`` to exceed: a seqno going
    backwards)."""

    #: int64 per finding: its row.
    at: np.ndarray
    #: uint8 per finding: its ``R_*`` code (an index into ``streams.checks.ANOMALIES``).
    rule: np.ndarray
    #: uint64 per finding: the seqno found (or reached), where ``given`` has GIVEN_FOUND.
    found: np.ndarray
    #: uint8 per finding: which are there: ``GIVEN_FOUND``, a seqno was found or reached;
    #: ``GIVEN_RANGE``, a range or a seqno to exceed was expected.
    given: np.ndarray
    #: uint64 per finding: the expected range's start, or the seqno to exceed.
    low: np.ndarray
    #: uint64 per finding: the expected range's end.
    high: np.ndarray

    def take(self, index) -> Findings:
        """The findings at ``index`` (positions or a mask)."""
        return Findings(*(column[index] for column in self))


class CheckResult(NamedTuple):
    """What the stream checks found over the rows, and per row whether a run of a stream
    starts there."""

    #: the findings, in row order.
    findings: Findings
    #: bool per row: a run of a stream starts there.
    starts: np.ndarray


class WalkRequest(NamedTuple):
    """One stretch of the state engine's rows, in stream order, for the state walk
    (``walk_state``)."""

    #: uint8 per row: what it is (``W_*``): a ``W_LOSS`` row (bytes lost that may have
    #: held frames of any stream) makes every stream lost; ``W_SKIP`` rows are passed over.
    what: np.ndarray
    #: int64 per row: its stream's row in ``carry`` (not read at ``W_LOSS`` and ``W_SKIP``
    #: rows, which have no stream).
    slot: np.ndarray
    #: uint64 per row: an item's seqno; a restart's point where it rolled back.
    seqno: np.ndarray
    #: uint64 per row: a change's CAS (its clock, against ``at_time``).
    cas: np.ndarray
    #: uint64 per row: a snapshot marker's start.
    snap_start: np.ndarray
    #: uint64 per row: a snapshot marker's end.
    snap_end: np.ndarray
    #: uint32 per row: an OSO marker's flags (``protocol.OsoFlag``).
    oso: np.ndarray
    #: uint8 per row: a restart rolled back to ``seqno`` (else its point is its stream's
    #: next item's seqno less one).
    rolled: np.ndarray
    #: uint64 per row: the at_seqno limit of its vbucket.
    limit: np.ndarray
    #: uint8 per row: frames of its stream were lost just before it.
    lost: np.ndarray
    #: The time cut (the CAS clock, nanoseconds); 2**64 - 1: none.
    at_time: int
    #: uint64, ``K_FIELDS`` columns: each stream's walk state, carried from stretch to
    #: stretch, updated in place.
    carry: np.ndarray


class WalkResult(NamedTuple):
    """What the state walk found in a stretch, per row; and the restarts of earlier
    stretches whose point it tells."""

    #: bool per row: an item whose seqno is not above its stream's previous one, outside
    #: OSO.
    bad: np.ndarray
    #: uint64 per row: at a bad item, that previous seqno.
    previous: np.ndarray
    #: bool per row: a change within the cuts (at_seqno limit, time cut), not bad.
    applies: np.ndarray
    #: uint64 per row: at a restart whose point is ``known``, that point.
    point: np.ndarray
    #: bool per row: a restart whose point this stretch tells, where its stream had sent
    #: items before (a restart can discard nothing else).
    known: np.ndarray
    #: int64: the slots of the restarts carried from an earlier stretch whose point an
    #: item of this one tells (where their stream had sent items before).
    carried_slots: np.ndarray
    #: uint64: those restarts' points.
    carried_points: np.ndarray


class ValidityResult(NamedTuple):
    """When each version answered for lasts (``validity``), one value per version: arrays
    the caller makes (in the memory it wants them in) and the core fills."""

    #: uint64: the version's seqno.
    from_seqno: np.ndarray
    #: int64: its CAS's clock (the low 16 bits cleared).
    from_time: np.ndarray
    #: uint64: the seqno of the collection clear that ended it, or the next version's of
    #: its document (kept or not).
    to_seqno: np.ndarray
    #: int64: the next version's clock.
    to_time: np.ndarray
    #: uint8: ``to_seqno`` is known.
    seqno_valid: np.ndarray
    #: uint8: ``to_time`` is known.
    time_valid: np.ndarray


class ValidityRequest(NamedTuple):
    """The versions of a history, in order, of which to say when some last
    (``validity``): a version lasts until the next version of its document, or the
    collection clear that ended it."""

    #: uint64 per version: its seqno.
    seqno: np.ndarray
    #: uint64 per version: its CAS.
    cas: np.ndarray
    #: uint64 per version: ``alive``, ``discarded``, or the seqno of the collection clear
    #: that ended it.
    gone: np.ndarray
    #: uint8 per version: the next version is of the same document.
    same: np.ndarray
    #: int64: the versions to answer for (their indices); None: all.
    kept: np.ndarray | None
    #: ``gone`` of a version that stands.
    alive: int
    #: ``gone`` of a version thrown away (not ended by a clear).
    discarded: int
    #: Where the answers go, one value per version answered for; ``validity`` returns it.
    out: ValidityResult


class DurableRequest(NamedTuple):
    """Durable writes to pair (``pair_durable``): changes in groups (documents), the
    changes of each group in the order of their indices."""

    #: int64 per change: its group, an id in ``0..size-1``.
    group: np.ndarray
    #: uint8 per change: what it is (``W_*``).
    what: np.ndarray
    #: uint64 per change: its seqno.
    seqno: np.ndarray
    #: uint64 per change: a commit's prepared seqno.
    prepared: np.ndarray
    #: How many groups there are.
    size: int


class DurableResult(NamedTuple):
    """Each commit with the change before it in its group, and the prepares left
    waiting."""

    #: int64: each commit (``W_COMMIT``), ascending.
    commits: np.ndarray
    #: int64 per commit: the change before it in its group; -1: none.
    before: np.ndarray
    #: bool per commit: that change is its prepare (a ``W_PREPARE`` whose seqno is the
    #: commit's prepared seqno).
    ok: np.ndarray
    #: int64: the prepares that are the last change of their group, ascending.
    waiting: np.ndarray
