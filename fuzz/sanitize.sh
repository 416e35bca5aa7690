#!/usr/bin/env bash
# Memory-safety run: build the compiled modules with bounds checks, AddressSanitizer and
# UndefinedBehaviorSanitizer in a scratch copy of this checkout, then run the test suite
# and replay the fuzz corpus under them; then replay the corpus under valgrind memcheck
# with the normal optimised build. Usage: fuzz/sanitize.sh [python] (default: python3).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$here" ls-files -z | (cd "$here" && xargs -0 cp --parents -t "$work")
cd "$work"
export PYTHONPATH="$work"
"$python" fuzz/make_corpus.py "$work/corpus"
[ -d "$here/fuzz/corpus" ] && cp "$here"/fuzz/corpus/* "$work/corpus/" 2>/dev/null || true

echo "== ASan + UBSan build"
DCPFAST_SANITIZE=1 "$python" setup.py -q build_ext --inplace >/dev/null
preload="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
LD_PRELOAD="$preload" "$python" fuzz/replay.py "$work/corpus"
LD_PRELOAD="$preload" "$python" -m pytest -q -p no:cacheprovider \
    -m "not spark and not slow" tests

echo "== valgrind memcheck, optimised build"
rm -f dcpfast/*.so
"$python" setup.py -q build_ext --inplace >/dev/null
PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 \
    --errors-for-leak-kinds=none --quiet "$python" fuzz/replay.py "$work/corpus"
echo "memory-safety run clean"
