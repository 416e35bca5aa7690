"""What an input is when it is not DCP frames: the start of a file of another format, so
that an input given by mistake is named in one line ("a Parquet file, not DCP frames")
rather than as its first frame's unknown magic; and ``capture_kind``, which tells a pcap or
pcapng capture by its magic number (``io.kinds`` sniffs inputs with it).

DCP frames start with a magic byte of 0x80, 0x81, 0x82, 0x83, 0x08 or 0x18, none of them
printable, so text cannot be mistaken for them, nor they for text.
"""

from __future__ import annotations

from . import packets

#: Bytes of an input's start that ``other_format`` looks at.
HEAD_BYTES = 64
#: Magic numbers of other formats, and what each starts.
_MAGICS = (
    (b"PAR1", "a Parquet file"),
    (b"ARROW1", "an Arrow IPC file"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "an executable"),
    (b"%PDF", "a PDF document"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
)
#: Bytes that text holds: printable ASCII and white space.
_TEXT = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


def capture_kind(head: bytes) -> str | None:
    """"pcap" or "pcapng" when ``head`` (the first bytes of a file) starts such a packet
    capture (``read_pcap`` reads them), else None."""
    if len(head) < 4:
        return None
    magic = int.from_bytes(head[:4], "little")
    if magic == packets.PCAPNG_SECTION:
        return "pcapng"
    if {magic, int.from_bytes(head[:4], "big")} & {packets.PCAP_MAGIC_US, packets.PCAP_MAGIC_NS}:
        return "pcap"
    return None


def other_format(head: bytes) -> str | None:
    """What ``head``, the first bytes of an input, start when they are recognisably not
    DCP frames ("a Parquet file", "a pcap capture", "JSON text", "text", ...); None where
    they are nothing known (DCP frames, damage, an empty input)."""
    for magic, what in _MAGICS:
        if head.startswith(magic):
            return what
    capture = capture_kind(head)
    if capture is not None:
        return f"a {capture} capture (dcpfast.pcap.read_pcap reads it)"
    try:
        chars = head.decode("utf-8") if head else ""
    except UnicodeDecodeError as cut:      # a character cut at the end of the head is text
        if cut.start < len(head) - 3:
            return None
        chars = head[:cut.start].decode("utf-8")
    if chars and all(ord(c) >= 0x80 or ord(c) in _TEXT for c in chars):
        return "JSON text" if chars.lstrip()[:1] in ("{", "[") else "text"
    return None
