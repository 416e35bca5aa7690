"""Errors raised for malformed input, and the words for each scan problem."""

from __future__ import annotations

from typing import NamedTuple

from .protocol import Problem


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


class SkippedRegion(NamedTuple):
    """Bytes that ``errors="skip"`` passed over: where, how many, and why."""

    offset: int
    length: int
    reason: str


_TEXT = {
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
    Problem.LEB128_NON_CANONICAL: "collection id prefix is overlong (non-canonical {a}-byte encoding)",
    Problem.LEB128_OVERFLOW: "collection id prefix exceeds 32 bits (5th byte 0x{a:02x})",
    Problem.RESERVED_COLLECTION: "reserved collection id {a}",
    Problem.EMPTY_LOGICAL_KEY: "empty logical key after the collection id prefix",
    Problem.TRUNCATED: "truncated frame: {a} of its {b} bytes before the end of data",
    Problem.RESYNC: "no frame boundary here: the bytes after this frame do not hold together",
}


def describe(code: int, a: int = 0, b: int = 0) -> str:
    """Human-readable reason for a scanner problem code and its two details."""
    return _TEXT[Problem(code)].format(a=a, b=b)
