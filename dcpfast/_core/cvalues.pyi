from collections.abc import Callable

import numpy as np
from typing_extensions import Buffer

_Problem = tuple[int, int, int | str, int]

def snappy_lengths(buf: Buffer, starts: np.ndarray, lengths: np.ndarray,
                   out: np.ndarray) -> list[_Problem]: ...
def inflate(buf: Buffer, starts: np.ndarray, lengths: np.ndarray, out: np.ndarray,
            bounds: np.ndarray, decompress_into: Callable[[Buffer, Buffer], int],
            ) -> list[_Problem]: ...
def parse_xattrs(a: Buffer, b: Buffer, source: np.ndarray, starts: np.ndarray,
                 lengths: np.ndarray, skip: np.ndarray, pairs: np.ndarray,
                 ) -> tuple[int, int, list[_Problem]]: ...
def xattr_strings(a: Buffer, b: Buffer, source: np.ndarray, starts: np.ndarray,
                  lengths: np.ndarray, pairs: np.ndarray, key_offsets: np.ndarray,
                  key_data: np.ndarray, value_offsets: np.ndarray,
                  value_data: np.ndarray) -> None: ...
def extents_at(offsets: list[np.ndarray], valids: list[np.ndarray | None], chunk: np.ndarray,
               entry: np.ndarray, starts: np.ndarray, bounds: np.ndarray,
               valid: np.ndarray) -> None: ...
def spread_extents(chunk: np.ndarray, starts: np.ndarray, bounds: np.ndarray,
                   item_chunk: np.ndarray, item_entry: np.ndarray) -> None: ...
def chunk_extents(sources: list[np.ndarray], starts: list[np.ndarray],
                  lengths: list[np.ndarray], valids: list[np.ndarray | None], base: np.ndarray,
                  chunk: np.ndarray, entry: np.ndarray, source: np.ndarray, start: np.ndarray,
                  bounds: np.ndarray, valid: np.ndarray) -> None: ...
def gather_chunks(chunks: list[Buffer], chunk: np.ndarray, starts: np.ndarray,
                  bounds: np.ndarray, out: np.ndarray) -> None: ...
