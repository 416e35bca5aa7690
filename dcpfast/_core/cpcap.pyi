import numpy as np
from typing_extensions import Buffer

def walk(buf: Buffer, pos: int, fmt: int, big: bool, if_link: np.ndarray, if_tsres: np.ndarray,
         if_tsoff: np.ndarray, ts: np.ndarray, keys: np.ndarray, seqs: np.ndarray,
         flags: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
         counters: np.ndarray) -> tuple[int, int, int, int]: ...
