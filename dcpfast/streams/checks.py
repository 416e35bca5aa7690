"""The stream checks: what DCP allows a vbucket stream to send, and the evidence that frames
were lost, one implementation for ``summarize`` and ``dcpfast.state`` (on one process, in
batches, on Spark). docs/streams.md says what each check means and why, from kv_engine's
own rules.

A caller turns its rows into one stream event each (``EV_*`` of ``_core.contract``: a
seqno item, a seqno advance, a snapshot marker, an OSO start or end, a Stream End, a
Stream Request or its placed response), in arrival order, with its stream's slot (a dense
number per vbucket stream), and ``Checks.run`` steps through them in the compiled core,
each stream's check state carried from call to call. What it finds (``contract.Findings``)
is worded by ``details`` (summarize) and ``expectation`` (the state's errors).
"""

from __future__ import annotations

import json

import numpy as np

from .. import _core
from .. import protocol as P
from .._core import contract as C
from ..errors import text

#: Anomaly kinds, in code order: the checks' ``R_*`` codes, then the two the summary adds.
ANOMALIES = ("seqno_not_increasing", "outside_snapshot", "snapshot_ended_early",
             "ended_in_snapshot", "oso_not_ended", "oso_not_started", "unmatched_rollback",
             "bytes_lost")
UNMATCHED, BYTES_LOST = len(ANOMALIES) - 2, len(ANOMALIES) - 1

#: By opcode: the stream event of a request with that opcode (OSO markers and Stream
#: Requests are told apart by the caller).
EVENT_OF_OPCODE = np.full(256, C.EV_NONE, np.uint8)
EVENT_OF_OPCODE[[int(op) for op in P.SEQNO_ITEMS]] = C.EV_ITEM
EVENT_OF_OPCODE[P.Opcode.SEQNO_ADVANCED] = C.EV_ADVANCE
EVENT_OF_OPCODE[P.Opcode.SNAPSHOT_MARKER] = C.EV_MARKER
EVENT_OF_OPCODE[P.Opcode.STREAM_END] = C.EV_END


def oso_events(flags: np.ndarray) -> np.ndarray:
    """The event of each OSO snapshot marker with ``flags``: an end where the END flag is
    set, else a start where START is."""
    return np.where(flags & P.OsoFlag.END != 0, C.EV_OSO_END,
                    np.where(flags & P.OsoFlag.START != 0, C.EV_OSO_START,
                             C.EV_NONE)).astype(np.uint8)


class Checks:
    """Each vbucket stream's check state, from call to call: ``run`` the checks over the
    next rows of the streams (slots ``0..slots-1``)."""

    def __init__(self):
        self.state = np.zeros((0, C.C_FIELDS), np.uint64)

    def run(self, event: np.ndarray, slot: np.ndarray, info: np.ndarray, opaque: np.ndarray,
            seqno: np.ndarray, snap_start: np.ndarray, snap_end: np.ndarray,
            snap_flags: np.ndarray, end_status: np.ndarray) -> tuple[C.Findings, np.ndarray]:
        """The findings over these rows, and where a run of a stream starts (bool per
        row). ``slot`` is int64; the other columns as the scan gives them."""
        slots = int(slot.max()) + 1 if len(slot) else 0
        if slots > len(self.state):
            grown = np.zeros((max(slots, 2 * len(self.state)), C.C_FIELDS), np.uint64)
            grown[:len(self.state)] = self.state
            self.state = grown

        def typed(column, dtype):
            return np.ascontiguousarray(column, dtype)

        result = _core.state.check_streams(C.CheckRequest(
            event=typed(event, np.uint8), slot=typed(slot, np.int64), info=typed(info, np.uint8),
            opaque=typed(opaque, np.uint32), seqno=typed(seqno, np.uint64),
            snap_start=typed(snap_start, np.uint64), snap_end=typed(snap_end, np.uint64),
            snap_flags=typed(snap_flags, np.uint32), end_status=typed(end_status, np.uint32),
            state=self.state))
        return result.findings, result.starts


def request_info(flags: int, body: str | None, collections: bool) -> int:
    """The ``info`` bits of a Stream Request with ``flags`` and JSON value ``body``: its
    start seqno seeds the seqno order unless it asks for the latest seqno (FromLatest),
    and it is known unfiltered when its value names no collections or scope."""
    info = C.INFO_COLLECTIONS if collections else 0
    if not flags & P.StreamRequestFlag.FROM_LATEST:
        info |= C.INFO_SEED
    try:
        value = json.loads(body) if body else {}
    except ValueError:
        value = None
    if isinstance(value, dict) and "collections" not in value and "scope" not in value:
        info |= C.INFO_UNFILTERED
    return info


def details(rule: int, found: int, given: int, low: int, high: int, status: int) -> str:
    """What a finding (or a summary anomaly) says: the seqno found and what it broke."""
    seqno = found if given & C.GIVEN_FOUND else None
    where = text("check_snapshot", start=low, end=high) if given & C.GIVEN_RANGE \
        else text("check_oso_snapshot")
    at = text("check_reached", seqno=seqno) if seqno is not None else text("check_no_item")
    if rule == C.R_BACKWARDS:
        return text("check_backwards", seqno=seqno, previous=low)
    if rule == C.R_OUTSIDE:
        return text("check_outside", seqno=seqno, where=where) if given & C.GIVEN_RANGE \
            else text("check_before_marker", seqno=seqno)
    if rule == C.R_EARLY:
        return text("check_ended_early", where=where, at=at)
    if rule == C.R_ENDED_INSIDE:
        name = enum_name(status)
        return text("check_stream_end_inside", status=name, where=where) + \
            (text("check_reached_suffix", at=at) if given & C.GIVEN_RANGE else "")
    if rule == C.R_OSO_NOT_ENDED:
        return text("check_oso_not_ended")
    return text("check_oso_not_started")


def expectation(rule: int, found: int, given: int, low: int, high: int) -> tuple[str, str]:
    """(what was expected, what was found) of a finding, for an error's words."""
    if rule == C.R_BACKWARDS:
        return text("expect_above", seqno=low), str(found)
    if rule == C.R_OUTSIDE:
        if given & C.GIVEN_RANGE:
            return text("expect_range", start=low, end=high), str(found)
        return text("expect_marker"), text("found_item", seqno=found)
    if rule in (C.R_EARLY, C.R_ENDED_INSIDE):
        got = str(found) if given & C.GIVEN_FOUND else text("check_no_item")
        return (text("expect_end", seqno=high) if given & C.GIVEN_RANGE
                else text("expect_oso_end")), got
    if rule == C.R_OSO_NOT_ENDED:
        return text("expect_oso_end"), text("found_marker")
    return text("expect_oso_start"), text("found_oso_end")


def enum_name(status: int) -> str:
    """The lower-case name of a Stream End status (its number when it has none)."""
    try:
        return P.StreamEndStatus(status).name.lower()
    except ValueError:
        return str(status)
