"""Arrow tables as JSON lines (``json_lines``), built column by column.

Each column becomes an array of JSON texts with Arrow's kernels (numbers cast, strings
quoted, structs joined from their fields' texts), and a row's line is the join of its
columns' texts: no Python object per row. What Arrow has no kernel for is done in Python
for the values that need it alone: strings holding a control character (escaped by
orjson), and the JSON content of a Debezium document, which is checked to parse before
it is spliced in as JSON (content that does not parse stays text, ``content_encoding``
then ``text``); bytes are base64 all at once (``encoding``). The lines are those orjson
writes of each row (``to_pylist``), byte for byte.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .encoding import base64_text
from .formats import DOCUMENT

#: Rows per piece of output.
ROWS = 65536
#: The characters JSON escapes as codes (RE2).
_CONTROL = r"[\x00-\x1f]"
_TEXT = pa.large_string()
_NULL = pa.scalar("null", _TEXT)
#: Pieces are never null but for a document's null content (its quote piece says null).
_NULL_AS_NOTHING = pc.JoinOptions(null_handling="replace", null_replacement="")


def json_lines(table: pa.Table, *, rows: int = ROWS) -> Iterator[bytes]:
    """The rows of ``table`` as JSON lines, in pieces of at most ``rows`` rows: bytes as
    base64, maps as objects, a Debezium document's JSON content as JSON."""
    for batch in table.to_batches(max_chunksize=rows):
        if not batch.num_rows:
            continue
        pieces = _object(batch.schema.names, [_pieces(c) for c in batch.columns])
        text = _joined([*pieces, pa.scalar("\n", _TEXT)], batch.num_rows)
        offsets = text.buffers()[1]
        start, end = (int.from_bytes(offsets[at * 8:at * 8 + 8], "little", signed=True)
                      for at in (text.offset, text.offset + len(text)))
        yield text.buffers()[2][start:end].to_pybytes()


def _object(names: list[str], fields: list[list]) -> list:
    """The pieces of an object of the fields' pieces (named ``names``)."""
    pieces: list = []
    for i, (name, field) in enumerate(zip(names, fields, strict=True)):
        pieces += [pa.scalar(("{" if i == 0 else ",") + orjson.dumps(name).decode() + ":",
                             _TEXT), *field]
    return pieces + [pa.scalar("}" if names else "{}", _TEXT)]


def _joined(pieces: list, n: int) -> pa.Array:
    """The text of ``pieces`` (texts and text scalars) joined, row by row; adjacent
    scalars are joined first."""
    merged: list = []
    for piece in pieces:
        if isinstance(piece, pa.Scalar) and merged and isinstance(merged[-1], pa.Scalar):
            merged[-1] = pa.scalar(merged[-1].as_py() + piece.as_py(), _TEXT)
        else:
            merged.append(piece)
    if len(merged) == 1:
        only = merged[0]
        return only if isinstance(only, pa.Array) else pa.array([only.as_py()] * n, _TEXT)
    return pc.binary_join_element_wise(*merged, pa.scalar("", _TEXT),
                                       options=_NULL_AS_NOTHING)


def _json(array: pa.Array) -> pa.Array:
    """The JSON text of each value of ``array`` (``null`` for a null)."""
    return _joined(_pieces(array), len(array))


def _pieces(array: pa.Array) -> list:
    """Pieces (texts, text scalars) whose join is the JSON text of each value of
    ``array``: a struct without nulls is its fields' pieces, joined with the rest."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        return _pieces(array.dictionary_decode())
    if pa.types.is_null(kind):
        return [_NULL]
    if pa.types.is_struct(kind):
        if kind == DOCUMENT:
            text = _document(array)
        else:
            pieces = _object([f.name for f in kind], [_pieces(c) for c in array.flatten()])
            if not array.null_count:
                return pieces
            text = _joined(pieces, len(array))
        return [pc.if_else(array.is_valid(), text, _NULL) if array.null_count else text]
    if pa.types.is_boolean(kind):
        text = pc.if_else(array, pa.scalar("true", _TEXT), pa.scalar("false", _TEXT))
    elif pa.types.is_integer(kind):
        text = array.cast(_TEXT)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _quoted(array.cast(_TEXT))
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        text = pc.binary_join_element_wise(pa.scalar('"', _TEXT), base64_text(array),
                                           pa.scalar('"', _TEXT), pa.scalar("", _TEXT))
    elif pa.types.is_map(kind):
        text = _map(array)
    else:
        text = _only_valid(array, lambda value: orjson.dumps(value, default=_default))
    return [pc.fill_null(text, _NULL) if text.null_count else text]


def _quoted(text: pa.Array) -> pa.Array:
    """Strings as JSON strings."""
    return pc.binary_join_element_wise(pa.scalar('"', _TEXT), _escaped(text),
                                       pa.scalar('"', _TEXT), pa.scalar("", _TEXT))


def _escaped(text: pa.Array) -> pa.Array:
    """Strings as the inside of JSON strings: backslashes and quotes escaped by Arrow's
    kernels (where there are any), the strings that hold a control character by
    orjson."""
    data = _bytes(text)
    escaped = text
    if (data == ord("\\")).any():
        escaped = pc.replace_substring(escaped, "\\", "\\\\")
    if (data == ord('"')).any():
        escaped = pc.replace_substring(escaped, '"', '\\"')
    if not (data < 0x20).any():
        return escaped
    odd = pc.fill_null(pc.match_substring_regex(text, _CONTROL), False)
    dumped = [orjson.dumps(value)[1:-1].decode() for value in text.filter(odd).to_pylist()]
    return pc.replace_with_mask(escaped, odd, pa.array(dumped, _TEXT))


def _bytes(text: pa.Array) -> np.ndarray:
    """The bytes of a large string array's values (of nulls too, which hold none)."""
    offsets = np.frombuffer(text.buffers()[1], np.int64)[text.offset:text.offset + len(text) + 1]
    data = text.buffers()[2]
    if data is None or not len(offsets):
        return np.empty(0, np.uint8)
    return np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]]


def _map(array: pa.MapArray) -> pa.Array:
    """Maps as JSON objects of their pairs, in order."""
    pairs = pc.binary_join_element_wise(_json(array.keys), pa.scalar(":", _TEXT),
                                        _json(array.items), pa.scalar("", _TEXT))
    joined = pc.binary_join(pa.ListArray.from_arrays(array.offsets, pairs),
                            pa.scalar(",", _TEXT))
    text = pc.binary_join_element_wise(pa.scalar("{", _TEXT), joined, pa.scalar("}", _TEXT),
                                       pa.scalar("", _TEXT))
    return pc.if_else(array.is_valid(), text, _NULL) if array.null_count else text


def _only_valid(array: pa.Array, encode) -> pa.Array:
    """``encode`` (a value to its JSON bytes) of each valid value; null where null."""
    valid = array.is_valid()
    texts = [encode(value).decode() for value in array.filter(valid).to_pylist()]
    if not array.null_count:
        return pa.array(texts, _TEXT)
    return pc.replace_with_mask(pa.nulls(len(array), _TEXT), valid, pa.array(texts, _TEXT))


def _document(array: pa.StructArray) -> pa.Array:
    """A Debezium document's JSON object: its ``content`` spliced in as JSON where
    ``content_encoding`` says ``json`` and it parses, else a string (``text`` where it
    was meant as JSON)."""
    fields = dict(zip([f.name for f in array.type], array.flatten(), strict=True))
    content, encoding = fields["content"].cast(_TEXT), fields["content_encoding"]
    meant = pc.fill_null(pc.and_(pc.equal(encoding, "json"), content.is_valid()), False)
    parses = pa.array([_parses(value) for value in content.filter(meant).to_pylist()],
                      pa.bool_())
    as_json = pc.replace_with_mask(meant, meant, parses)
    fields["content_encoding"] = pc.if_else(pc.and_(meant, pc.invert(as_json)), "text",
                                            encoding)
    quoted = pc.and_(content.is_valid(), pc.invert(as_json))
    if pc.any(quoted).as_py():
        content = pc.replace_with_mask(content, quoted, _escaped(content.filter(quoted)))
    quote = pc.if_else(content.is_valid(), pc.if_else(as_json, pa.scalar("", _TEXT),
                                                      pa.scalar('"', _TEXT)), _NULL)
    pieces = [[*_pieces(column)] for column in fields.values()]
    pieces[list(fields).index("content")] = [quote, content, pc.if_else(
        pc.equal(quote, pa.scalar('"', _TEXT)), pa.scalar('"', _TEXT), pa.scalar("", _TEXT))]
    return _joined(_object(list(fields), pieces), len(array))


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _default(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"{type(value).__name__} is not JSON")
