"""The checks made before anything is timed: the compiled core against the generator's
record, the projection, ``dcpfast.scan``, ``to_arrow``, ``values()``, the twin, the
``struct`` walk and the probe against the core. A failed check raises ``CheckFailed``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dcpfast import FrameBatch, protocol, scan

from .common import check
from .decoders import ALL_COLUMNS, COMPILED, PROJECTION, TWIN, core_scan, header_walk


def same_columns(a: dict, b: dict, names, what: str) -> None:
    """Columns ``names`` of ``a`` and ``b`` are equal."""
    for name in names:
        check(np.array_equal(a[name], b[name]), f"{what}: column {name} differs")


def verify(name: str, view, expected: dict, subset_frames: int) -> tuple[FrameBatch, int]:
    """Check the Cython core against the generator, the projection, the facade, Arrow and
    ``values()``, the twin and the struct walk against the core; return the reference
    batch and the byte length of the first ``subset_frames`` frames."""
    what = f"{name}: Cython core"
    result, failure = core_scan(COMPILED, view, ALL_COLUMNS)
    check(failure is None, f"{what}: strict scan failed at {failure}")
    count, consumed, columns, kinds, regions = result[:5]
    check(count == expected["frames"], f"{what}: {count} frames, the generator wrote "
          f"{expected['frames']}")
    check(consumed == len(view) and not regions,
          f"{what}: consumed {consumed} of {len(view)} bytes, {len(regions)} skipped")
    opcodes = {str(op): int(n) for op, n in enumerate(np.bincount(columns["opcode"])) if n}
    check(opcodes == expected["opcodes"], f"{what}: opcode mix differs from the generator's")
    for column in ("by_seqno", "key_len", "value_len"):
        total = int(columns[column].sum(dtype=np.uint64))
        check(total == expected[f"{column}_sum"],
              f"{what}: sum of {column} {total}, generator {expected[f'{column}_sum']}")

    result, failure = core_scan(COMPILED, view, PROJECTION)
    check(failure is None and tuple(result[2]) == PROJECTION, f"{name}: projection failed")
    same_columns(result[2], columns, PROJECTION, f"{name}: projection")

    batch = scan(view, collections=True)
    check(batch.collections and len(batch) == count, f"{name}: dcpfast.scan: wrong frames")
    same_columns(batch.to_dict(), columns, ALL_COLUMNS, f"{name}: dcpfast.scan")
    for binary_view in (False, True):
        table = batch.to_arrow(binary_view=binary_view)
        check(table.num_rows == count, f"{name}: to_arrow: wrong row count")
        for column in ("key", "value"):
            values = table[column].cast(pa.large_binary())
            total = pc.sum(pc.binary_length(values)).as_py() or 0
            check(total == expected[f"{column}_len_sum"],
                  f"{name}: to_arrow(binary_view={binary_view}): {column} bytes {total}")
    documents = sum(n for op, n in expected["opcodes"].items()
                    if int(op) in protocol.DOCUMENT_VALUES)
    rows = batch.values().num_rows
    check(rows == documents, f"{name}: values(): {rows} rows, {documents} document changes")

    end = int(columns["offset"][subset_frames]) if subset_frames < count else len(view)
    result, failure = core_scan(TWIN, view[:end], ALL_COLUMNS)
    check(failure is None, f"{name}: pure-Python twin: strict scan failed at {failure}")
    check(result[0] == subset_frames and result[1] == end,
          f"{name}: pure-Python twin: {result[0]} frames over {result[1]} bytes")
    check(np.array_equal(result[3], kinds[:subset_frames]), f"{name}: twin: kinds differ")
    same_columns(result[2], {n: c[:subset_frames] for n, c in columns.items()}, ALL_COLUMNS,
                 f"{name}: pure-Python twin vs Cython core")

    walked = header_walk(view[:end])
    check(walked[0] == columns["opcode"][:subset_frames].tolist(),
          f"{name}: header walk: opcodes differ from the scan")
    return batch, end


def verify_probe(name: str, found: dict, batch: FrameBatch) -> None:
    """The probe saw the scan's frames: count, opcodes, bytes 6-7 and body lengths."""
    want = {"frames": len(batch),
            "opcode_sum": int(batch["opcode"].sum(dtype=np.uint64)),
            "bytes67_sum": int(batch["vbucket"].sum(dtype=np.uint64))
            + int(batch["status"].sum(dtype=np.uint64)),
            "body_len_sum": int(batch["body_len"].sum(dtype=np.uint64))}
    for key, value in want.items():
        check(found[key] == value, f"{name}: probe {key} {found[key]}, the scan's {value}")
