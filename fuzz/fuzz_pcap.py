"""Coverage-guided fuzzing of the packet-capture reader (atheris).

``read_pcap`` reads the input as a capture file, once with the compiled record walker
``cpcap`` and once with its twin ``pypcap`` (instrumented: it guides the fuzzer). Both
must yield the same batches, counters and problems. Skip mode may raise only
``CaptureFormatError`` (a file that is no capture at all), strict mode only
``DcpFormatError`` (of which ``CaptureFormatError`` is a kind).

    python fuzz/fuzz_pcap.py CORPUS_DIR -max_total_time=60

Input: a mode byte (bit 0: strict; bit 1: collections decided per direction rather than
off; bits 2-7 pick the capture bytes read per step), then the capture.
"""

from __future__ import annotations

import sys
import warnings
from io import BytesIO

import atheris

with atheris.instrument_imports(include=["dcpfast._core.pypcap", "dcpfast.pcap"]):
    from dcpfast import _core, pcap
    from dcpfast.errors import CaptureFormatError, DcpFormatError

    _pcap_py = _core.twins()["pcap"]
compiled = _core.compiled()["pcap"]     # not instrumented, checked against the twin


def _read(walker, data, **options):
    """Everything ``read_pcap`` gives for ``data`` with ``walker`` reading the records (the
    module picks its walker at import): per batch its connection, frames, regions and
    timestamps, then the counters and problems, or the error that ended it."""
    chosen, _core.pcap = _core.pcap, walker
    out = []
    try:
        reader = pcap.read_pcap(BytesIO(data), **options)
        for b in reader:
            out.append((b.connection, b["offset"].tolist(), b["opcode"].tolist(),
                        list(b.errors), b.timestamps.tolist()))
        out.append((reader.counters, reader.problems))
    except DcpFormatError as error:
        if options["errors"] == "skip" and not isinstance(error, CaptureFormatError):
            raise
        out.append((type(error), str(error)))
    finally:
        _core.pcap = chosen
    return out


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    mode, data = raw[0], raw[1:]
    options = dict(errors="strict" if mode & 1 else "skip", collections=None if mode & 2
                   else False, batch_bytes=64 + (mode >> 2) * 61)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # TLS traffic seen in the capture
        fast = _read(compiled, data, **options)
        slow = _read(_pcap_py, data, **options)
    assert fast == slow, (fast, slow)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
