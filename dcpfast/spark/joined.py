"""The streams under the paths of a read or a job, and their planned partitions: each file a
dump of its own, or (``joined``, ``source.JOINED``) the files of a directory, or every
file given, one dump cut into pieces, read as one stream as ``dcpfast.read`` reads a
directory (``io.files``): a frame cut across two pieces decodes whole and offsets are
positions in the joined stream.

A joined stream of plain files is planned as one file of their summed size
(``io.ranges.plan``), its byte ranges anchored at frame boundaries of the joined stream
(``source.JoinedFile``); one that holds a compressed piece is read whole, in one task.
Needs pyarrow, not Spark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pyarrow import fs

from ..io.ranges import Piece, plan
from .source import checked_joined, filesystem, list_files, splittable


def streams(paths: Sequence[str], joined: str, *, exclude: Sequence[str] = ()
            ) -> list[tuple[str, list[tuple[str, int]]]]:
    """The streams under ``paths``: ``(name, files)``, each file ``(uri, size)`` in the
    order read; a stream of one file is named by it."""
    checked_joined(joined)
    if joined == "all":
        files = list_files(paths, exclude=exclude)
        return [(_pieces_name(files), files)] if len(files) > 1 else \
            [(uri, [(uri, size)]) for uri, size in files]
    found = []
    for path in paths:
        files = list_files([path], exclude=exclude)
        if joined == "directories" and len(files) > 1 and _is_directory(path):
            found.append((path, files))
        else:
            found += [(uri, [(uri, size)]) for uri, size in files]
    return found


def _is_directory(path: str) -> bool:
    store, where = filesystem(path)
    return store.get_file_info(where).type == fs.FileType.Directory


def _pieces_name(files: list[tuple[str, int]]) -> str:
    """How messages name the pieces given as one dump."""
    return f"{files[0][0]} + {len(files) - 1:,} more piece(s)"


def planned(paths: Sequence[str], joined: str, partition_bytes: int, parallelism: int, *,
            exclude: Sequence[str] = ()) -> list[list[Piece]]:
    """The partitions of pieces of the streams under ``paths`` (``io.ranges.plan``): a
    joined stream is planned as one file, its pieces carrying its files; it is cut into
    byte ranges only where none of them is compressed."""
    found = streams(paths, joined, exclude=exclude)
    groups = {name: tuple(files) for name, files in found if len(files) > 1}

    def can_split(uri: str) -> bool:
        if uri in groups:
            return all([splittable(part) for part, _ in groups[uri]])
        return splittable(uri)

    entries = [(name, sum(size for _, size in files)) if name in groups else files[0]
               for name, files in found]
    parts = plan(entries, partition_bytes, parallelism, splittable=can_split)
    return [[dataclasses.replace(p, files=groups[p.uri]) if p.uri in groups else p
             for p in part] for part in parts]
