"""Timing: the best of R runs after a warm-up, the measurements of a set taking turns."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Timing:
    """The times of one measurement over ``frames`` frames of ``nbytes`` bytes."""

    label: str
    frames: int
    nbytes: int
    times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.best

    @property
    def gb_per_s(self) -> float:
        return self.nbytes / self.best / 1e9


def timed(label: str, frames: int, nbytes: int, fn: Callable, repeat: int) -> Timing:
    """Best of ``repeat`` runs of ``fn`` after one warm-up run."""
    timing = Timing(label, frames, nbytes)
    take_turns([(timing, fn)], repeat)
    return timing


def best(fn: Callable, repeat: int) -> float:
    """Seconds of the best of ``repeat`` runs of ``fn`` after one warm-up run."""
    return timed("", 0, 0, fn, repeat).best


def take_turns(runs: list[tuple[Timing, Callable]], repeat: int) -> None:
    """Time each ``(timing, fn)`` ``repeat`` times after one warm-up run each, taking turns
    (a load change on a shared machine then hits every measurement alike), with the
    garbage collector paused as ``timeit`` does."""
    for _, fn in runs:
        fn()
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for timing, fn in runs:
                start = time.perf_counter()
                fn()
                timing.times.append(time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()
