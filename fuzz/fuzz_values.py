"""Coverage-guided fuzzing of the value decoders: Snappy and xattr sections (atheris).

The input's values go into a stream of document frames, which ``values.values`` decodes
once with the compiled helper ``cvalues`` and once with its twin ``pyvalues`` (the twin
is instrumented and guides the fuzzer), in both error modes. The two must agree exactly;
strict mode may raise only ``DcpFormatError``, skip mode nothing; each damaged value is a
null body and one skipped region; and a value the Snappy library inflates on its own
decodes to the same bytes.

    python fuzz/fuzz_values.py CORPUS_DIR -max_total_time=60

Input: an option byte (bits 0-1: xattrs "split", "drop", "keep", "split"; bit 2: no
decompression), then values, each a kind byte (bits 0-2: datatype; bits 3-4: mutation,
deletion, expiration, prepare), a length byte and that many bytes (the last may be short).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["dcpfast._core.pyvalues", "dcpfast.values"]):
    from dcpfast import _core, protocol, testing, values
    from dcpfast.errors import DcpFormatError, skipped_regions
    from dcpfast.io import dumps

    _values_py = _core.twins()["values"]

import cramjam

compiled = _core.compiled()["values"]   # not instrumented, checked against the twin

_XATTRS = ("split", "drop", "keep", "split")
_FRAMES = (testing.mutation, testing.deletion, testing.expiration, testing.prepare)
_SNAPPY, _XATTR = int(protocol.Datatype.SNAPPY), int(protocol.Datatype.XATTR)


def _parse(raw: bytes):
    """The options and the (kind, datatype, value) records of an input."""
    options, at, records = raw[0], 1, []
    while at + 2 <= len(raw):
        kind, size = raw[at], raw[at + 1]
        records.append((kind >> 3 & 3, kind & 7, raw[at + 2:at + 2 + size]))
        at += 2 + size
    return options, records


def _decode(helper, data, mode, **options):
    """``values.values`` of a fresh batch of ``data`` with ``helper`` doing the per-value
    work (the module picks its helper at import); the table or the error, and the regions
    the scan and the values skipped."""
    scanned = dumps.scan(data, collections=False, errors=mode, final=True)
    chosen, _core.values = _core.values, helper
    try:
        result = values.values(scanned, **options)
    except DcpFormatError as error:
        if mode == "skip":
            raise
        result = error
    finally:
        _core.values = chosen
    skipped = [] if isinstance(result, DcpFormatError) else skipped_regions(result)
    return result, [*scanned.errors, *skipped]


def _same(fast, slow):
    (a, a_errors), (b, b_errors) = fast, slow
    assert a_errors == b_errors, (a_errors, b_errors)
    if isinstance(a, DcpFormatError) or isinstance(b, DcpFormatError):
        assert (type(a), str(a)) == (type(b), str(b)), (a, b)
    else:
        assert a.equals(b), (a, b)


def _inflated(value: bytes):
    """The Snappy library's own inflation of a raw block, or None if it refuses it."""
    try:
        return bytes(cramjam.snappy.decompress_raw(value))
    except Exception:                   # the library's error types vary by version
        return None


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    options, records = _parse(raw)
    kw = dict(xattrs=_XATTRS[options & 3], decompress=not options & 4)
    data = b"".join(_FRAMES[kind](b"k%d" % i, value, by_seqno=i + 1, datatype=datatype)
                    for i, (kind, datatype, value) in enumerate(records))
    strict = _decode(compiled, data, "strict", **kw)
    _same(strict, _decode(_values_py, data, "strict", **kw))
    skip = _decode(compiled, data, "skip", **kw)
    _same(skip, _decode(_values_py, data, "skip", **kw))
    table, regions = skip
    table.validate(full=True)
    assert table.num_rows == len(records)
    assert table["body"].null_count == len(regions), regions
    if isinstance(strict[0], DcpFormatError):
        assert regions and strict[0].offset == regions[0].offset, (strict[0], regions)
    else:
        assert not regions and strict[0].equals(table)
    bodies = table["body"].to_pylist()
    for (_, datatype, value), body in zip(records, bodies):
        snappy = datatype & _SNAPPY and kw["decompress"] and value
        if datatype & _XATTR and kw["xattrs"] != "keep" and not (datatype & _SNAPPY and
                                                                    not kw["decompress"]):
            continue                    # the section is cut off: only the twins judge it
        expect = _inflated(value) if snappy else value
        assert body == expect, (datatype, value, body, expect)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
