"""The time of each frame: the capture's timestamps, or the CAS hybrid logical clock of a
dump's document changes.

A capture stamps every packet, so every frame has the time its last byte was captured. A
dump has no arrival times; its document changes carry a CAS, the vbucket's hybrid logical
clock (nanoseconds since the epoch with the low 16 bits a logical counter: the same
reading as ``dcpfast.state(at_time=...)``, docs/state.md). On that clock a stream message
without a CAS of its own (a snapshot marker, a commit, a Stream End) takes the latest CAS
tick of its stream before it; every other frame has no time and is left out of the
series (it is still counted). A CAS before ``MIN_CAS`` (2000-01-01) is no clock reading:
test frames and some tools leave it 0 or small.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, kinds_of

#: The two clocks of a report.
CAPTURE, CAS = "capture", "cas"
#: The earliest CAS read as a time: 2000-01-01T00:00:00Z, in ns.
MIN_CAS = 946_684_800 * 10**9
_TICK = np.uint64(~0xFFFF & (2**64 - 1))
_LIMIT = np.uint64(2**63)
#: Per frame kind: a document change with a value (it carries its CAS).
_CARRIES_CAS = P.kinds_where(lambda k: k.opcode in P.DOCUMENT_VALUES and not k.response)


def cas_times(batch: FrameBatch) -> np.ndarray:
    """Each frame's own CAS tick (int64 ns), 0 for a frame without one."""
    cas = batch["cas"]
    own = _CARRIES_CAS[kinds_of(batch)] & (cas >= np.uint64(MIN_CAS)) & (cas < _LIMIT)
    return np.where(own, cas & _TICK, np.uint64(0)).astype(np.int64)


def carried(times: np.ndarray, groups: np.ndarray, heads: np.ndarray,
            before: np.ndarray) -> np.ndarray:
    """``times`` (sorted into groups starting at ``heads``, ``groups`` numbering each
    row's group) with each 0 replaced by the latest non-zero time before it in its group,
    else by its group's ``before`` (its time carried from earlier batches; 0: none)."""
    at = np.arange(len(times))
    start = heads[groups]
    last = np.maximum.accumulate(np.where(times > 0, at, start - 1))
    return np.where(last >= start, times[np.maximum(last, 0)], before[groups])


def iso(ns: int | None) -> str | None:
    """ns since the epoch as ISO 8601 UTC to the microsecond (``...Z``), None for None."""
    if ns is None:
        return None
    seconds, rest = divmod(int(ns), 10**9)
    moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    return moment.replace(microsecond=rest // 1000).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
