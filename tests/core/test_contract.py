"""Each compiled core and its pure-Python twin are interchangeable by name: for every role
(scan, pcap, values, state) the two modules define the same public functions and classes,
the functions with the same parameters (names, kinds, defaults), and the core's stub
(``dcpfast/_core/c*.pyi``) declares exactly those. (mypy's stubtest, run by ``.ci/run``,
checks the stubs against the compiled modules as well.) The state core's calls read every
field of their ``contract`` request, in both cores, and answer its result; its codes are
``contract``'s, compiled in from the declarations ``setup.py`` writes from them."""

from __future__ import annotations

import ast
import functools
import inspect
import json
import operator
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from dcpfast import _core
from dcpfast import protocol as P
from dcpfast._core import contract as C
from tests.c_probes import CORE
from tests.cores import COMPILED, TWINS, every

ROLES = sorted(_core.CORES)
STUBS = Path(_core.__file__).parent

#: A parameter as compared: name, kind, and its default (``NO_DEFAULT`` for none,
#: ``ANY_DEFAULT`` where a stub writes ``...``).
NO_DEFAULT = inspect.Parameter.empty
ANY_DEFAULT = Ellipsis

needs_compiled = pytest.mark.skipif(COMPILED is None, reason="no compiled cores were built")


def public(module: ModuleType) -> dict[str, object]:
    """The functions and classes a module defines (not those it imports), by name."""
    return {name: obj for name, obj in vars(module).items()
            if not name.startswith("_") and callable(obj)
            and getattr(obj, "__module__", None) == module.__name__}


def parameters(function) -> list[tuple]:
    """(name, kind, default) of each parameter of ``function``."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def stub(role: str) -> dict[str, list | None]:
    """The public names a core's stub declares: a function's parameters, None for a class
    or any other public name."""
    tree = ast.parse((STUBS / f"{_core.CORES[role][0]}.pyi").read_text())
    declared: dict[str, list | None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            declared[node.name] = stub_parameters(node.args)
        elif isinstance(node, ast.ClassDef):
            declared[node.name] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            declared.update({t.id: None for t in targets if isinstance(t, ast.Name)})
    return {name: value for name, value in declared.items() if not name.startswith("_")}


def stub_parameters(args: ast.arguments) -> list[tuple]:
    """(name, kind, default) of each parameter a stub's function declares."""
    kind = inspect.Parameter
    positional = [(a, kind.POSITIONAL_ONLY) for a in args.posonlyargs] + \
        [(a, kind.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [NO_DEFAULT] * (len(positional) - len(args.defaults)) + list(args.defaults)
    found = [(a.arg, k, d) for (a, k), d in zip(positional, defaults)]
    if args.vararg:
        found.append((args.vararg.arg, kind.VAR_POSITIONAL, NO_DEFAULT))
    found += [(a.arg, kind.KEYWORD_ONLY, NO_DEFAULT if d is None else d)
              for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        found.append((args.kwarg.arg, kind.VAR_KEYWORD, NO_DEFAULT))
    return [(name, k, d if d is NO_DEFAULT else ast.literal_eval(d)) for name, k, d in found]


def same_default(declared: object, runtime: object) -> bool:
    if declared is ANY_DEFAULT:
        return runtime is not NO_DEFAULT
    return declared is runtime or (type(declared) is type(runtime) and declared == runtime)


@needs_compiled
@pytest.mark.parametrize("role", ROLES)
def test_compiled_signatures_are_introspectable(role):
    """Cython's binding (on by default in Cython 3) gives every compiled function a real
    signature, which the comparisons below rely on."""
    for name, obj in public(COMPILED[role]).items():
        if not inspect.isclass(obj):
            kinds = {p.kind for p in inspect.signature(obj).parameters.values()}
            assert kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD}, (role, name)


@needs_compiled
@pytest.mark.parametrize("role", ROLES)
def test_twin_has_the_compiled_names_and_signatures(role):
    compiled, twin = public(COMPILED[role]), public(TWINS[role])
    assert sorted(compiled) == sorted(twin)
    for name, obj in compiled.items():
        assert inspect.isclass(obj) == inspect.isclass(twin[name]), name
        if not inspect.isclass(obj):
            assert parameters(obj) == parameters(twin[name]), name


@pytest.mark.parametrize("role", ROLES)
def test_stub_declares_exactly_the_core(role):
    """The stub against the twin (the same names and signatures as the compiled module:
    see above), so that this holds where no core was built too."""
    declared, twin = stub(role), public(TWINS[role])
    assert sorted(declared) == sorted(twin)
    for name, params in declared.items():
        assert (params is None) == inspect.isclass(twin[name]), name
        if params is not None:
            runtime = parameters(twin[name])
            assert [p[:2] for p in params] == [p[:2] for p in runtime], name
            for (pname, _, default), (_, _, actual) in zip(params, runtime):
                assert same_default(default, actual), (name, pname, default, actual)


def test_the_codes_are_the_contracts_ints_of_their_prefixes():
    found = C.codes()
    assert found == {name: value for name, value in vars(C).items()
                     if name.startswith(C.CODE_PREFIXES) and type(value) is int}
    assert {"EV_NONE", "INFO_SEED", "R_OSO_NOT_STARTED", "GIVEN_RANGE", "C_FIELDS", "W_SKIP",
            "W_NONE", "K_ITEMS", "CS_SNAP_MASK", "WS_COMPLETED", "P_OSO_END"} <= set(found)
    assert "FIRST_ROWS" not in found and all(0 <= v < 2**31 for v in found.values())


def test_the_state_bits_are_apart_and_the_protocol_numbers_protocols():
    """The bits of a stream's check state (``C_BITS``) and walk state (``K_BITS``) are
    single bits, none shared; the snapshot kinds fit their two bits; the protocol's
    numbers the cores read are those of ``protocol``."""
    found = C.codes()
    check = [v for n, v in found.items() if n.startswith("CS_") and "SNAP" not in n]
    walk = [v for n, v in found.items() if n.startswith("WS_")] + [C.K_LOST, C.K_FRESH,
                                                                   C.K_ITEMS]
    assert all(b & (b - 1) == 0 for b in check + walk)                 # single bits
    for bits in (check + [C.CS_SNAP_MASK], walk):
        assert sum(bits) == functools.reduce(operator.or_, bits)        # none shared
    kinds = (C.CS_NO_SNAP, C.CS_SNAP_MARKER, C.CS_SNAP_OSO, C.CS_SNAP_OSO_CLOSED)
    assert sorted(kinds) == list(range(4))
    assert C.CS_SNAP_MASK == (max(kinds) << C.CS_SNAP_SHIFT)
    assert (C.P_SNAP_DISK, C.P_SNAP_HISTORY, C.P_END_OK, C.P_OSO_START, C.P_OSO_END) == (
        P.SnapshotFlag.DISK, P.SnapshotFlag.HISTORY, P.StreamEndStatus.OK, P.OsoFlag.START,
        P.OsoFlag.END)


@pytest.mark.skipif(not (CORE.parents[1] / "setup.py").is_file(),
                    reason="needs the source tree's setup.py (an installed dcpfast has none)")
def test_setup_loads_the_codes_without_importing_dcpfast():
    """setup.py reads contract.py, and protocol.py whose numbers it names, on their own:
    the declarations it writes are these, and dcpfast is not imported to write them."""
    root = CORE.parents[1]
    tree = ast.parse((root / "setup.py").read_text())
    wanted = [node for node in tree.body
              if isinstance(node, (ast.Import, ast.ImportFrom))
              or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "core")
              or (isinstance(node, ast.FunctionDef) and node.name == "load_contract")]
    program = ast.unparse(ast.Module(body=wanted, type_ignores=[])) + textwrap.dedent("""
        print(json.dumps([load_contract().cython_codes(),
                          any(m == "dcpfast" or m.startswith("dcpfast.") for m in sys.modules)]))
        """)
    done = subprocess.run([sys.executable, "-c", "import json\n" + program], cwd=root,
                          capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [C.cython_codes(), False]


def declared(text: str) -> tuple[dict[str, int], list[str]]:
    """The enum (name -> value) and the names of ``_CODES`` in Cython declarations as
    ``contract.cython_codes`` writes them."""
    lines = text.splitlines()
    enum = lines.index("cdef enum:")
    values = {}
    for line in lines[enum + 1:]:
        if not line.startswith("    "):
            break
        name, value = line.split(" = ")
        values[name.strip()] = int(value)
    start = lines.index("_CODES = {")
    names = [line.strip().rstrip(",").split(": ") for line in lines[start + 1:]
             if line.startswith("    ")]
    assert all(key == f'"{value}"' for key, value in names)
    return values, [value for _, value in names]


def test_the_declarations_hold_every_code():
    values, checked = declared(C.cython_codes())
    assert values == C.codes()
    assert checked == list(C.codes())


@pytest.mark.skipif(not (CORE / "contract.pxi").is_file(),
                    reason="no contract.pxi: setup.py writes it when it builds the cores")
def test_the_written_declarations_are_the_contracts():
    """setup.py wrote the declarations of these codes (it rewrites them where contract.py
    changed)."""
    assert (CORE / "contract.pxi").read_text() == C.cython_codes()


@needs_compiled
def test_the_compiled_core_holds_the_contracts_codes():
    assert vars(COMPILED["state"])["_CODES"] == C.codes()


def test_a_core_compiled_with_other_codes_is_refused():
    """The check the compiled core runs at import: any code changed, missing or added
    since it was compiled stops it."""
    C.check_codes(C.codes(), "cstate")
    changed = {**C.codes(), "W_SKIP": C.W_SKIP + 1}
    missing = {name: value for name, value in C.codes().items() if name != "K_ITEMS"}
    added = {**C.codes(), "W_NEW": 99}
    for codes in (changed, missing, added):
        with pytest.raises(ImportError, match="cstate was compiled against other contract"):
            C.check_codes(codes, "cstate")


def watched(request, read: set):
    """``request`` as an instance of a subclass of its type that notes each field read."""
    kind = type(request)

    class Watched(kind):
        __slots__ = ()

        def __getattribute__(self, name):
            if name in kind._fields:
                read.add((kind.__name__, name))
            return super().__getattribute__(name)
    return Watched(**request._asdict())


def requests():
    """One small request of each call of the state core, built by name, and the type of
    its result."""
    n = 4
    u8, u32, u64 = (np.zeros(n, t) for t in (np.uint8, np.uint32, np.uint64))
    slot = np.zeros(n, np.int64)
    seqno = np.arange(1, n + 1, dtype=np.uint64)
    what = np.array([C.W_MARKER, C.W_PREPARE, C.W_COMMIT, C.W_MUTATION], np.uint8)
    yield pytest.param("check_streams", C.CheckResult, lambda: C.CheckRequest(
        event=np.array([C.EV_MARKER, C.EV_ITEM, C.EV_ITEM, C.EV_END], np.uint8), slot=slot,
        info=u8, opaque=u32, seqno=seqno, snap_start=np.ones(n, np.uint64),
        snap_end=np.full(n, 9, np.uint64), snap_flags=u32, end_status=u32,
        state=np.zeros((1, C.C_FIELDS), np.uint64)), id="check_streams")
    yield pytest.param("walk_state", C.WalkResult, lambda: C.WalkRequest(
        what=what, slot=slot, seqno=seqno, cas=u64, snap_start=seqno, snap_end=seqno + 1,
        oso=u32, rolled=u8, limit=np.full(n, 3, np.uint64), lost=u8, at_time=2**64 - 1,
        carry=np.zeros((1, C.K_FIELDS), np.uint64)), id="walk_state")
    yield pytest.param("pair_durable", C.DurableResult, lambda: C.DurableRequest(
        group=np.array([0, 1, 1, 0], np.int64), what=what, seqno=seqno,
        prepared=np.array([0, 0, 2, 0], np.uint64), size=2), id="pair_durable")
    yield pytest.param("validity", C.ValidityResult, lambda: C.ValidityRequest(
        seqno=seqno, cas=seqno << np.uint64(16), gone=np.array([2**64 - 1, 0, 7, 0], np.uint64),
        same=np.array([1, 1, 0, 0], np.uint8), kept=np.array([0, 2, 3], np.int64),
        alive=2**64 - 1, discarded=0,
        out=C.ValidityResult(from_seqno=np.zeros(3, np.uint64), from_time=np.zeros(3, np.int64),
                             to_seqno=np.zeros(3, np.uint64), to_time=np.zeros(3, np.int64),
                             seqno_valid=np.zeros(3, np.uint8),
                             time_valid=np.zeros(3, np.uint8))), id="validity")


@pytest.mark.parametrize("call, result, make", list(requests()))
def test_each_core_reads_every_field_of_its_request(call, result, make):
    """Both cores, given the same request built by name, read each of its fields (those of
    the result it writes into too) and answer the same result, of the contract's type."""
    answers = []
    for core in every("state"):
        read: set = set()
        request = make()
        if "out" in request._fields:
            request = request._replace(out=watched(request.out, read))
        answer = getattr(core, call)(watched(request, read))
        assert isinstance(answer, result), core.__name__
        fields = {(type(request).__name__, f) for f in request._fields}
        if "out" in request._fields:
            fields |= {(result.__name__, f) for f in result._fields}
        assert read == fields, core.__name__
        answers.append(answer)
    for answer in answers[1:]:
        assert answer._fields == answers[0]._fields
        for mine, theirs in zip(_arrays(answer), _arrays(answers[0]), strict=True):
            np.testing.assert_array_equal(mine, theirs)


def _arrays(answer) -> list:
    """The arrays of a result, those of a result inside it (``CheckResult.findings``)
    too."""
    return [a for part in answer
            for a in (_arrays(part) if isinstance(part, tuple) else [part])]
