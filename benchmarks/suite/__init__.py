"""The dcpfast benchmark suite's parts, shared by the scripts in ``benchmarks/``.

``common`` (checks, the machine, the scripts' options), ``timing`` (best of R, runs taking
turns), ``corpora`` (the four synthetic corpora, cached, with the generator's record),
``decoders`` (what is timed besides the public API: one core call, a ``struct`` walk),
``probe`` (the C machine-limit probe, compiled at run time), ``bandwidth`` (the machine's
memory bandwidth on 1 to N threads, a C probe likewise), ``verify`` (the checks made
before anything is timed), ``memory`` (traced allocation, peak RSS in a child process),
``measure`` (one corpus checked and timed), ``targets``, ``table`` (the generated
performance table in the docs) and ``scan`` (the run and the command line of
``bench_scan.py``).
"""
