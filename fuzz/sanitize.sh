#!/usr/bin/env bash
# Memory-safety run of the compiled cores (cmemory, cscan, cvalues, cpcap, cstate in dcpfast/_core), in a scratch copy of this
# checkout (its tracked files and new files git does not ignore):
#   1. build them with bounds checks, AddressSanitizer and UndefinedBehaviorSanitizer (any
#      finding aborts), replay the fuzz corpora and run the tests but Spark's and the slow;
#   2. rebuild them optimised as shipped and replay the corpora under valgrind memcheck.
# The corpora are the seeds of fuzz/make_corpus.py plus fuzz/corpus/<target>/ if present.
# Replays route every Python allocation through malloc (PYTHONMALLOC=malloc), so that the
# checkers see each object's bounds; the tests keep CPython's allocator, which is faster.
# Hypothesis deadlines are off: instrumented code is slow. Usage: fuzz/sanitize.sh [python]
# (default: python3); needs gcc and valgrind. Exits non-zero at the first failing step,
# naming it.
set -Eeuo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
targets="scan values pcap reassembly"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
began=$SECONDS
step=setup
trap 'echo "memory-safety run FAILED at: $step (after $((SECONDS - began)) s)" >&2' ERR

git -C "$here" ls-files -z --cached --others --exclude-standard \
    | (cd "$here" && while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done) \
    | (cd "$here" && xargs -0 cp --parents -t "$work")
cd "$work"
export PYTHONPATH="$work"
unset DCPFAST_PUREPYTHON

step="seed corpora"
for target in $targets; do
    "$python" fuzz/make_corpus.py "corpus/$target" "$target"
    if [ -d "$here/fuzz/corpus/$target" ]; then
        find "$here/fuzz/corpus/$target" -maxdepth 1 -type f -exec cp -t "corpus/$target" {} +
    fi
done

# build [sanitize]: compile the extensions from scratch (no object or C file of the other
# build reused), keeping the compiler's output in build.log
build() {
    rm -rf build dcpfast/_core/*.so dcpfast/_core/*.c
    if ! env ${1:+DCPFAST_SANITIZE=1 CFLAGS=-fno-sanitize-recover=all} \
            "$python" setup.py build_ext --inplace >build.log 2>&1; then
        tail -40 build.log
        return 1
    fi
}

# instrumented yes|no: whether every extension calls the ASan and UBSan runtimes
instrumented() {
    local so symbols
    for so in dcpfast/_core/c*.so; do
        symbols="$(nm -D --undefined-only "$so")"
        if [[ $symbols == *__asan_report_load* && $symbols == *__ubsan_handle_* ]]; then
            [ "$1" = yes ] || { echo "$so: built with sanitizers" >&2; return 1; }
        else
            [ "$1" = no ] || { echo "$so: built without sanitizers" >&2; return 1; }
        fi
    done
}

echo "== 1. ASan + UBSan build (bounds checks on, -O0)"
step="sanitizer build"
build sanitize
instrumented yes
# The runtimes must be loaded before the interpreter; CPython's own allocations at exit
# are not leaks worth reporting.
asan="$(gcc -print-file-name=libasan.so)"
ubsan="$(gcc -print-file-name=libubsan.so)"
sanitized=(env LD_PRELOAD="$asan:$ubsan" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1)
step="replay under ASan + UBSan"
"${sanitized[@]}" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1 \
    PYTHONMALLOC=malloc "$python" fuzz/replay.py corpus
step="tests under ASan + UBSan"
cat >no_deadlines.py <<'EOF'
from hypothesis import settings

settings.register_profile("sanitizers", deadline=None)
settings.load_profile("sanitizers")
EOF
"${sanitized[@]}" "$python" -m pytest -q -p no:cacheprovider -p no_deadlines \
    -m "not spark and not slow" tests \
    >pytest.log 2>&1 || { tail -80 pytest.log; false; }
tail -1 pytest.log

echo "== 2. valgrind memcheck, optimised build"
step="optimised build"
build
instrumented no
# Known false reports outside dcpfast: CPython 3.11 reads the unset digit of a zero-valued
# int (multiplied by its size, 0) and the garbage then follows small-int pointers through
# the interpreter, so uninitialised-value reports whose innermost frame is CPython's are
# dropped (invalid accesses anywhere, and uninitialised values used in the extensions or
# numpy, still count); ld.so's word-wise strncmp reads past short strings.
cat >valgrind.supp <<'EOF'
{
   cpython-int-digit-cond
   Memcheck:Cond
   obj:*/libpython3*.so*
}
{
   cpython-int-digit-value
   Memcheck:Value8
   obj:*/libpython3*.so*
}
{
   ld.so-strncmp-is-dst
   Memcheck:Addr8
   fun:strncmp
   fun:is_dst
}
EOF
step="replay under valgrind"
PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 --errors-for-leak-kinds=none \
    --suppressions=valgrind.supp --track-origins=yes --log-file=valgrind.log \
    "$python" fuzz/replay.py corpus \
    || { cat valgrind.log; false; }
grep "ERROR SUMMARY" valgrind.log | tail -1 | sed 's/^==[0-9]*== /valgrind: /'
echo "memory-safety run clean ($((SECONDS - began)) s)"
