"""Coverage-guided fuzzing of system-event decoding (atheris).

The input becomes one system-event frame (0x5f) that ``events.system_events`` decodes in
both error modes: strict may raise only ``DcpFormatError``, skip nothing; a payload strict
mode rejects is skip mode's one skipped region and missing row, and one it accepts gives
the same table in both. A ``Manifest`` then learns from the rows.

    python fuzz/fuzz_events.py CORPUS_DIR -max_total_time=60

Input: event id, version and key length bytes, then the key and the value.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["dcpfast.events"]):
    from dcpfast import events, testing
    from dcpfast.errors import DcpFormatError, skipped_regions
    from dcpfast.io import dumps


def _decode(data, mode):
    """The event table of a fresh batch of ``data`` (or the error), and the regions the scan
    and the events skipped."""
    scanned = dumps.scan(data, collections=True, errors=mode, final=True)
    try:
        table = events.system_events(scanned)
    except DcpFormatError as error:
        if mode == "skip":
            raise
        return scanned, error, list(scanned.errors)
    return scanned, table, [*scanned.errors, *skipped_regions(table)]


def test_one_input(raw: bytes) -> None:
    if len(raw) < 3:
        return
    event_id, version, key_len = raw[:3]
    key, value = raw[3:3 + key_len], raw[3 + key_len:]
    data = testing.system_event(event_id, by_seqno=1, version=version, key=key, value=value)
    _, strict, _ = _decode(data, "strict")
    scanned, table, regions = _decode(data, "skip")
    table.validate(full=True)
    if isinstance(strict, DcpFormatError):
        assert strict.offset == 0 and table.num_rows == 0, (strict, table)
        assert [(r.offset, r.length) for r in regions] == [(0, len(data))], regions
    else:
        assert table.num_rows == 1 and not regions and strict.equals(table), regions
        manifest = events.Manifest().update(table)
        assert manifest.uid == table["manifest_uid"][0].as_py()
        manifest.label(scanned).validate(full=True)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
