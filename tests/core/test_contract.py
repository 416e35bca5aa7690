"""Each compiled core and its pure-Python twin are interchangeable by name: for every role
(scan, pcap, values) the two modules define the same public functions and classes, the
functions with the same parameters (names, kinds, defaults), and the core's stub
(``dcpfast/_core/c*.pyi``) declares exactly those. (mypy's stubtest, run by ``.ci/run``,
checks the stubs against the compiled modules as well.)"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from dcpfast import _core
from tests.cores import COMPILED, TWINS

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
