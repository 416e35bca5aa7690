"""The options of ``state``, checked before any work: each wrong type or value is a
one-line ``TypeError`` or ``ValueError`` that names the option. Numpy integers count as
integers (a seqno taken from a batch's column is one)."""

from __future__ import annotations

import datetime as dt
import numbers
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import numpy as np

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NO_LIMIT = np.uint64(2**64 - 1)
_U64 = 2**64
_U32 = 2**32


def _integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _kind(value) -> str:
    return type(value).__name__


def flag(name: str, value) -> bool:
    """``value`` as a bool: True or False (numpy's too), nothing else."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, not {value!r}")


def nanoseconds(at_time) -> int:
    """``at_time`` as nanoseconds since the epoch: a ``datetime`` (naive means UTC), an ISO
    8601 string, or an int of nanoseconds; a time the CAS clock cannot hold (before the
    epoch, or 2**64 ns after it) is a ``ValueError``."""
    ns = _nanoseconds(at_time)
    if not 0 <= ns < _U64:
        raise ValueError(f"at_time {at_time!r} is outside the CAS clock's range "
                         "(1970-01-01 to 2554-07-21 UTC)")
    return ns


def _nanoseconds(at_time) -> int:
    if _integer(at_time):
        return int(at_time)
    if isinstance(at_time, str):
        try:
            at_time = dt.datetime.fromisoformat(at_time)
        except ValueError:
            raise ValueError(f"at_time {at_time!r} is not an ISO 8601 time") from None
    if isinstance(at_time, dt.datetime):
        if at_time.tzinfo is None:
            at_time = at_time.replace(tzinfo=dt.timezone.utc)
        return (at_time - _EPOCH) // dt.timedelta(microseconds=1) * 1000
    raise TypeError(f"at_time must be a datetime, an ISO string or nanoseconds, "
                    f"not {_kind(at_time)}")


def seqnos(at_seqno) -> int | dict[int, int] | None:
    """``at_seqno`` checked: None, a seqno for every vbucket, or vbucket -> seqno (plain
    ints, for the metadata)."""
    if at_seqno is None:
        return None
    if _integer(at_seqno):
        if not 0 <= at_seqno < _U64:
            raise ValueError(f"at_seqno {at_seqno} is not a seqno (0 to 2**64 - 1)")
        return int(at_seqno)
    if isinstance(at_seqno, Mapping):
        out = {}
        for vb, seqno in at_seqno.items():
            if not _integer(vb):
                raise TypeError(f"at_seqno's vbuckets must be integers, not {vb!r}")
            if not 0 <= vb <= 0xFFFF:
                raise ValueError(f"at_seqno's vbucket {vb} is not in 0..65535")
            if not _integer(seqno):
                raise TypeError(f"at_seqno[{vb}] must be an integer seqno, not {seqno!r}")
            if not 0 <= seqno < _U64:
                raise ValueError(f"at_seqno[{vb}] = {seqno} is not a seqno (0 to 2**64 - 1)")
            out[int(vb)] = int(seqno)
        return out
    raise TypeError(f"at_seqno must be None, an integer seqno or a mapping vbucket -> seqno, "
                    f"not {_kind(at_seqno)}")


def limits(at_seqno: int | dict[int, int] | None):
    """A function from vbucket ids (uint32 array) to their at_seqno limits: no limit
    (None), one seqno for every vbucket (an int), or a mapping vbucket -> seqno, where the
    vbuckets it leaves out get nothing."""
    if at_seqno is None:
        return lambda vb: np.full(len(vb), _NO_LIMIT, np.uint64)
    if isinstance(at_seqno, int):
        return lambda vb: np.full(len(vb), at_seqno, np.uint64)
    table = np.zeros(1 << 16, np.uint64)
    for vb, seqno in at_seqno.items():
        table[vb] = seqno
    return lambda vb: table[vb]


def chosen(only_collections) -> list[int | str] | None:
    """``only_collections`` checked: None, or the collections to keep (ids as ints in
    0..2**32 - 1, names as non-empty strings); one id or name may be given alone."""
    if only_collections is None:
        return None
    if isinstance(only_collections, (str, bytes)) or _integer(only_collections):
        only_collections = [only_collections]
    if not isinstance(only_collections, Iterable) or isinstance(only_collections, Mapping):
        raise TypeError(f"only_collections takes collection ids (int) and names (str), "
                        f"not {_kind(only_collections)}")
    out: list[int | str] = []
    for c in only_collections:
        if _integer(c):
            if not 0 <= c < _U32:
                raise ValueError(f"only_collections: {c} is not a collection id")
            out.append(int(c))
        elif isinstance(c, str) and c:
            out.append(c)
        else:
            raise TypeError(f"only_collections takes collection ids (int) and names (str), "
                            f"not {c!r}")
    return out


def positive(name: str, value) -> int:
    """``value`` checked to be an integer of at least 1."""
    if not _integer(value) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1, not {value!r}")
    return int(value)


def scan_collections(collections) -> bool | None:
    """The scan's ``collections`` option: None (decided from the stream) or a bool."""
    if collections is None:
        return None
    if isinstance(collections, (bool, np.bool_)):
        return bool(collections)
    raise TypeError(f"collections (whether keys carry a collection prefix) must be None, "
                    f"True or False, not {collections!r}; only_collections= keeps "
                    "collections")


class Options(NamedTuple):
    """The options of a state, checked."""

    at_seqno: int | dict[int, int] | None
    at_time: int | None
    include_deleted: bool
    values: bool
    only_collections: list[int | str] | None
    errors: str
    history: bool
