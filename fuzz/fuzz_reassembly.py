"""Coverage-guided fuzzing of TCP reassembly with adversarial segment orders (atheris).

The input (``orders.py``, which also holds the check) is segments of a known DCP stream
in any order, overlapping and duplicated, each copy with its own value bytes.
``read_pcap`` must give every frame with the bytes of their first copies (the
first-principles stream), nothing else: a frame is decoded only where every byte of it
came; when all of the stream came and the reorder window is the default, every frame,
with no error. Strict mode may raise ``DcpFormatError`` only where part of the stream is
missing. Hangs (an order that costs more than n log n) end at libFuzzer's timeout.

    python fuzz/fuzz_reassembly.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["dcpfast.pcap"]):
    import dcpfast.pcap  # noqa: F401  (instrumented before orders imports it)

import orders


def test_one_input(raw: bytes) -> None:
    if raw:
        orders.check(raw)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
