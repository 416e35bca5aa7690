"""The rules of docs/development.md, checked on the source: layers, privacy, sizes, cores,
and tests laid out like the package.

Each test reads the code as text or syntax trees; none imports what it checks, so a rule
broken in a module that fails to import is still reported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dcpfast"

#: The layers, lowest first: a module may import its own layer's modules (within its
#: own subpackage) and the layers below, never one above.
LAYERS = (
    ("protocol", "packets", "threads", "arrays"),
    ("formats",),
    ("errors", "schema", "testing"),
    ("options",),
    ("_core",),
    ("buffers", "memory"),
    ("arrow",),
    ("batch",),
    ("io",),
    ("values", "events", "cached", "streams", "pcap"),
    ("documents",),
    ("compare", "reporting", "changes", "mirror"),
    ("spark",),
    ("cli",),
    ("__init__", "__main__"),
)
#: Imports that run against the layers on purpose, each with its reason: the one exception,
#: and the one import circle (docs/development.md).
ALLOWED_UPWARD = {
    # FrameBatch.values() and .system_events() are conveniences for the functions of
    # dcpfast.values and dcpfast.events (the README's tour), imported when called.
    ("batch", "values"), ("batch", "events"),
}
#: The public modules: every public name of dcpfast has its home in the ``__all__`` of
#: exactly one of them ("" is ``dcpfast`` itself); the modules inside them are their
#: implementation.
FACES = ("", "io", "pcap", "streams", "values", "events", "cached", "documents", "compare",
         "reporting", "changes", "mirror", "spark",
         "testing", "cli", "memory")
#: The compiled cores: only ``_core`` imports them.
COMPILED = ("cscan", "cpcap", "cvalues", "cstate", "cmemory")
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 80
#: A function longer than MAX_FUNCTION_LINES says why in a comment next to its ``def``
#: (on the line above it, or ending the line itself) that starts with this.
LONG_REASON = "# long:"
#: Underscore names that are public API of the standard library (NamedTuple's methods).
STDLIB_UNDERSCORE = frozenset({"_asdict", "_replace", "_fields", "_make"})


def sources(*suffixes: str, roots=(PACKAGE,)) -> list[Path]:
    return sorted(p for root in roots for s in suffixes for p in root.rglob(f"*{s}")
                  if ".venv" not in p.parts and "build" not in p.parts)


def module_name(path: Path) -> str:
    """``content.streams.summary`` for dcpfast/content/streams/summary.py."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def layer(name: str) -> int:
    top = name.split(".")[0]
    for level, names in enumerate(LAYERS):
        if top in names:
            return level
    raise AssertionError(f"module {name} is in no layer: add it to LAYERS")


def imported(path: Path) -> list[tuple[str, int]]:
    """The dcpfast modules a file imports (relative or absolute), with line numbers."""
    tree = ast.parse(path.read_text())
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.split(".")[0] == "dcpfast":
                target = ".".join(node.module.split(".")[1:])
            else:
                continue
            subs = [f"{target}.{a.name}" if target else a.name for a in node.names]
            modules = [sub for sub in subs     # ``from . import io, arrow`` names modules
                       if (PACKAGE / sub.replace(".", "/")).exists()
                       or (PACKAGE / (sub.replace(".", "/") + ".py")).exists()]
            found += [(sub, node.lineno) for sub in modules]
            if target and len(modules) < len(subs):     # names defined in ``target``
                found.append((target, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dcpfast" and "." in alias.name:
                    found.append((alias.name.split(".", 1)[1], node.lineno))
    return found


PY_SOURCES = sources(".py")


@pytest.mark.parametrize("path", PY_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dependencies_run_one_way(path):
    here = module_name(path)
    wrong = []
    for target, line in imported(path):
        allowed = (here, target) in ALLOWED_UPWARD or target.split(".")[0] == "_core" and \
            here.split(".")[0] == "_core"
        if layer(target) > layer(here) and not allowed:
            wrong.append(f"line {line}: {here} imports {target}, a higher layer")
        elif (layer(target) == layer(here) and target.split(".")[0] != here.split(".")[0]
              and here.split(".")[0] not in LAYERS[-1]):
            wrong.append(f"line {line}: {here} imports {target}, a sibling of its layer")
    assert not wrong, "\n".join(wrong)


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes,
    parameters and imported aliases."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _is_module(path: Path, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from ... import name`` imports a module of dcpfast (a package-private
    module such as ``_core`` may be imported by the package's other modules)."""
    if not node.level:
        return False
    base = path.parent
    for _ in range(node.level - 1):
        base = base.parent
    for part in (node.module or "").split(".") if node.module else ():
        base = base / part
    return (base / name).is_dir() or (base / f"{name}.py").exists()


@pytest.mark.parametrize("path", PY_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_underscore_names_stay_in_their_module(path):
    tree = ast.parse(path.read_text())
    defined = _defined_names(tree)
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not _is_module(path, node, alias.name):
                    wrong.append(f"line {node.lineno}: imports {alias.name} from {node.module}")
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = node.attr
            if name.startswith("_") and not name.startswith("__") and name not in defined \
                    and name not in STDLIB_UNDERSCORE:
                wrong.append(f"line {node.lineno}: reads {ast.unparse(node)}, "
                             "private to another module")
    assert not wrong, "\n".join(wrong)


def test_only_core_picks_the_cores():
    """No module but ``_core`` reads the switch or imports a compiled core by name (tests,
    benchmarks and fuzz targets ask ``_core.compiled()``/``_core.twins()``)."""
    reads = re.compile(r"environ[^\n]*DCPFAST_PUREPYTHON|getenv\([^)]*DCPFAST_PUREPYTHON")
    imports = re.compile(r"^\s*(import|from)\b[^\n]*\b(" + "|".join(COMPILED) + r")\b", re.M)
    offenders = []
    for path in sources(".py", roots=(PACKAGE, ROOT / "tests", ROOT / "benchmarks",
                                      ROOT / "fuzz")):
        if path == PACKAGE / "_core" / "__init__.py":
            continue
        text = path.read_text()
        if (path.is_relative_to(PACKAGE) and reads.search(text)) or imports.search(text):
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


#: The one module that starts processes: a state's worker processes, each running
#: ``python -c`` on dcpfast itself (never a compiler or a build).
STARTS_PROCESSES = {"dcpfast/documents/processes.py"}


def test_the_package_neither_compiles_nor_writes_the_repository():
    forbidden = re.compile(r"^\s*(import|from)\s+(subprocess|distutils|setuptools|sysconfig|"
                           r"Cython)\b|README", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in PY_SOURCES
                 if forbidden.search(p.read_text())]
    assert set(offenders) == STARTS_PROCESSES
    worker = (ROOT / "dcpfast/documents/processes.py").read_text()
    assert re.findall(r"subprocess\.(\w+)", worker) == ["Popen", "PIPE", "PIPE"]
    assert "[sys.executable, \"-c\", _WORKER" in worker


ALL_SOURCES = sources(".py", ".pyx", ".pxi", ".pxd", ".h", ".pyi",
                      roots=(PACKAGE, ROOT / "tests", ROOT / "benchmarks", ROOT / "fuzz"))


@pytest.mark.parametrize("path", ALL_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_is_too_long(path):
    assert path.read_text().count("\n") <= MAX_FILE_LINES


def _python_functions(text: str):
    """(name, first line, code lines) of every function, its docstring not counted."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            doc = (first.end_lineno - first.lineno + 1
                   if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                   and isinstance(first.value.value, str) else 0)
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1 - doc


def _cython_functions(text: str):
    """(name, first line, code lines) of the functions of a .pyx/.pxi file, judged by
    indentation: a function ends where the code returns to its ``def``'s indentation."""
    lines = text.splitlines()
    head = re.compile(r"^(\s*)(?:cdef|cpdef|def)\s[^=]*?\b(\w+)\s*\(")
    for i, line in enumerate(lines):
        found = head.match(line)
        if not found or line.rstrip().endswith(("nogil", "noexcept")) and "(" not in line:
            continue
        indent, end = len(found.group(1)), i + 1
        while end < len(lines) and (not lines[end].strip() or
                                    len(lines[end]) - len(lines[end].lstrip()) > indent or
                                    lines[end].lstrip().startswith(")")):
            end += 1
        body = lines[i:end]
        doc = 0
        quote = next((j for j, b in enumerate(body[1:], 1) if b.strip()), None)
        if quote is not None and body[quote].strip().startswith('"""'):
            closing = next((j for j in range(quote, len(body))
                            if body[j].rstrip().endswith('"""') and
                            (j > quote or body[j].strip().count('"""') == 2)), quote)
            doc = closing - quote + 1
        code = [b for b in body if b.strip()]
        yield found.group(2), i + 1, len(code) - doc


@pytest.mark.parametrize("path", sources(".py", ".pyx", ".pxi", roots=(PACKAGE,)),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_long_functions_say_why(path):
    text = path.read_text()
    lines = text.splitlines()
    functions = _python_functions(text) if path.suffix == ".py" else _cython_functions(text)
    unexplained = []
    for name, first, length in functions:
        if length <= MAX_FUNCTION_LINES:
            continue
        around = lines[first - 2:first]
        if not any(LONG_REASON in line for line in around):
            unexplained.append(f"{name} (line {first}): {length} lines")
    assert not unexplained, "\n".join(unexplained)


# -- one public path for each name, faces that only re-export, no import circle -----------


def _face_path(face: str) -> Path:
    path = PACKAGE.joinpath(*face.split(".")) if face else PACKAGE
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _all_names(path: Path) -> list[str]:
    """The names of a module's ``__all__``, read from its syntax tree; ``[*names, ...]``
    where ``names`` is another module's ``__all__`` imported under that name is followed."""
    tree = ast.parse(path.read_text())
    aliases = {a.asname: node.module for node in tree.body if isinstance(node, ast.ImportFrom)
               for a in node.names if a.name == "__all__" and a.asname}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            names = []
            for element in node.value.elts:
                if isinstance(element, ast.Starred):
                    names += _all_names(path.parent / f"{aliases[element.value.id]}.py")
                else:
                    names.append(element.value)
            return names
    raise AssertionError(f"{path} has no __all__")


def _origin(path: Path, name: str) -> str:
    """The file that defines ``name`` as seen from ``path``: followed through the
    ``from .module import name`` statements that re-export it."""
    tree = ast.parse(path.read_text())
    body = [n for node in tree.body
            for n in (node.body if _typing_only(node) else [node])]
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    base = path.parent
                    for _ in range(node.level - 1):
                        base = base.parent
                    target = base.joinpath(*(node.module or "").split("."))
                    target = target / "__init__.py" if target.is_dir() else \
                        target.with_suffix(".py")
                    return _origin(target, alias.name)
    return str(path.relative_to(PACKAGE))


def test_each_public_name_has_one_home():
    """A thing public in one module is not public in another (two things of one name,
    such as ``dcpfast.state`` and its Spark twin ``dcpfast.spark.state``, may be)."""
    homes: dict[tuple[str, str], list[str]] = {}
    for face in FACES:
        path = _face_path(face)
        for name in _all_names(path):
            homes.setdefault((name, _origin(path, name)), []).append(
                f"dcpfast.{face}" if face else "dcpfast")
    twice = {name: where for (name, _), where in homes.items() if len(where) > 1}
    assert not twice, f"names public in more than one module: {twice}"


def _typing_only(node: ast.AST) -> bool:
    """Whether ``node`` is an ``if TYPE_CHECKING:`` block (imports for the type checker)."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
        node.test.id == "TYPE_CHECKING"


@pytest.mark.parametrize("path", [p for p in PY_SOURCES if p.name == "__init__.py"
                                  and p.parent.name != "_core"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_face_only_re_exports(path):
    """A package's ``__init__`` imports and re-exports; its logic lives in its modules
    (``_core`` is the one exception: it picks the cores). A module ``__getattr__`` and
    ``__dir__`` that import names on first use are allowed."""
    tree = ast.parse(path.read_text())
    logic = [f"line {node.lineno}: {type(node).__name__}" for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If))
             and getattr(node, "name", "") not in ("__getattr__", "__dir__")
             and not _typing_only(node)]
    assert not logic


def test_the_top_level_names_load_from_their_homes():
    """``import dcpfast`` imports its names on first use: each from the module its typing
    import names, and ``import dcpfast`` alone loads none of the heavy modules."""
    import subprocess
    import sys

    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    typed = {alias.asname or alias.name: node.module for block in tree.body
             if _typing_only(block) for node in block.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    import dcpfast
    assert sorted(typed) == sorted(dcpfast.__all__)
    for name, module in typed.items():
        assert getattr(dcpfast, name) is getattr(
            __import__(f"dcpfast.{module}", fromlist=[name]), name)
    loaded = subprocess.run([sys.executable, "-c", "import sys, dcpfast; "
                             "print(sorted(m for m in sys.modules if m.startswith('numpy') "
                             "or m.startswith('dcpfast.')))"], capture_output=True, text=True,
                            check=True).stdout
    assert loaded.strip() == "[]"


#: The verbs users call on a whole source, each in the ``api.py`` of its face.
VERBS = {"state": "documents", "diff": "compare", "report": "reporting"}


def test_the_verbs_live_in_their_faces_api():
    """``state``, ``diff`` and ``report`` are defined in ``documents/api.py``,
    ``compare/api.py`` and ``reporting/api.py``, where ``dcpfast`` finds them; a builder
    lives in a ``builder.py``, and no module is called ``build.py``."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    typed = {alias.asname or alias.name: node.module for block in tree.body
             if _typing_only(block) for node in block.body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    for verb, face in VERBS.items():
        assert typed[verb] == f"{face}.api"
        defined = ast.parse((PACKAGE / face / "api.py").read_text()).body
        assert any(isinstance(node, ast.FunctionDef) and node.name == verb
                   for node in defined), f"{face}/api.py defines no {verb}"
    assert not [p for p in PY_SOURCES if p.name == "build.py"]


def _graph(*, upward: bool = False) -> dict[str, set[str]]:
    """Module -> the dcpfast modules it imports (at import time or inside a function), the
    imports of ALLOWED_UPWARD left out unless ``upward``."""
    graph: dict[str, set[str]] = {}
    for path in PY_SOURCES:
        here = module_name(path)
        graph.setdefault(here, set())
        for target, _ in imported(path):
            if (upward or (here, target) not in ALLOWED_UPWARD) and target != here:
                graph[here].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles a walk of ``graph`` finds (none where there is none)."""
    state: dict[str, int] = {}          # 1: on the path being walked, 2: done
    circles = []

    def walk(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2
    for node in sorted(graph):
        if node not in state:
            walk(node, [node])
    return circles


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    """Whether ``goal`` is among the modules ``start`` imports, directly or not."""
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_no_import_circle():
    """The imports of every module, at import time and inside functions, run in no circle
    but through ALLOWED_UPWARD's: without them the whole graph has none."""
    circles = _circles(_graph())
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def _function_lines(tree: ast.AST) -> set[int]:
    """The lines of the imports made inside a function (when it is called)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(inner.lineno for inner in ast.walk(node)
                         if isinstance(inner, (ast.Import, ast.ImportFrom)))
    return lines


def test_the_one_circle_is_imported_when_called():
    """ALLOWED_UPWARD's imports, the one circle of the graph (``FrameBatch.values()`` and
    ``.system_events()`` reach ``values`` and ``events``, which build on ``batch``), are
    each made inside a function, never at import, and each still closes its circle (an
    entry that no longer does is stale)."""
    paths = {module_name(p): p for p in PY_SOURCES}
    whole = _graph(upward=True)
    wrong = []
    for here, target in sorted(ALLOWED_UPWARD):
        path = paths[here]
        inside = _function_lines(ast.parse(path.read_text()))
        lines = [line for found, line in imported(path) if found == target]
        if not lines:
            wrong.append(f"{here} no longer imports {target}: take it off ALLOWED_UPWARD")
        wrong += [f"line {line}: {here} imports {target} at import time, not when called"
                  for line in lines if line not in inside]
        if lines and not _reaches(whole, target, here):
            wrong.append(f"{here} -> {target} closes no circle: a plain upward import")
    assert not wrong, "\n".join(wrong)


_IMPORT = re.compile(r"^\s*(?:from\s+(dcpfast(?:\.\w+)*)\s+import\s+([\w, ]+)|"
                     r"import\s+(dcpfast(?:\.\w+)*))", re.M)


@pytest.mark.parametrize("page", [ROOT / "README.md",
                                  *sorted(p for p in (ROOT / "docs").glob("*.md")
                                          if p.name != "development.md")],
                         ids=lambda p: p.name)
def test_the_documentation_imports_from_the_public_modules(page):
    """Every import a user page shows names a public module (development.md describes the
    implementation and may name its modules)."""
    faces = {f"dcpfast.{f}" if f else "dcpfast" for f in FACES}
    wrong = []
    for found in _IMPORT.finditer(page.read_text()):
        module = found.group(1) or found.group(3)
        if found.group(1) == "dcpfast":
            modules = {f"dcpfast.{n.strip()}" for n in found.group(2).split(",")
                       if (PACKAGE / n.strip()).exists()
                       or (PACKAGE / f"{n.strip()}.py").exists()}
        else:
            modules = {module}
        wrong += sorted(m for m in modules if m not in faces)
    assert not wrong, f"imports of implementation modules: {wrong}"


# -- the tests laid out like the package ----------------------------------------------------

TESTS = ROOT / "tests"
#: The tests' folders named otherwise than the package they mirror.
TEST_FOLDERS = {"core": "_core"}
#: What the tests' tree holds besides test files and their helpers.
TEST_DATA = {"c", "data"}
#: The test files at tests/ top level that are about the whole house, not one module.
WHOLE_HOUSE = {
    "test_architecture.py": "these rules, on the source",
    "test_readme.py": "the documentation: column table, links, no diary",
    "test_api.py": "the public API as users of dataframes meet it",
    "test_vectors.py": "every test vector of the wire reference, and a real server's frames",
    "test_recorded.py": "frames other projects recorded from real servers",
    "test_roundtrip.py": "encoder-to-scanner round trips of every frame kind",
    "test_large.py": "a dump of more than 2 GB in bounded memory",
    "test_bounds.py": "memory bounded on hostile input, across the commands and modules",
    "test_platform.py": "the cores' C headers on the platforms the wheels are built for",
    "test_fuzz_harnesses.py": "the fuzz harnesses run their seeds",
}
#: Test files whose name is not their module's, with the module each tests.
NAMED_OTHERWISE: dict[str, str] = {}
#: The modules no test file is named for, and where they are tested ("pkg.*": every such
#: module of the subpackage).
TESTED_THROUGH = {
    "options": "ScanOptions, handed down by every entry point (tests/io/)",
    "packets": "the capture formats' numbers, through tests/pcap/ and tests/core/test_pcap.py",
    "protocol": "the wire's constants, through test_vectors.py and test_roundtrip.py",
    "schema": "the column definition, through test_batch.py and test_readme.py's column table",
    "io.resume": "the loop state of a chunked read, through iter_batches cut every way "
                 "(tests/io/test_dumps.py, tests/core/test_scan_malformed.py)",
    "pcap.batch": "CaptureBatch, through tests/pcap/test_reader.py",
    "streams.frames": "what the stream tables and summary read, through tests/streams/",
    "documents.*": "the state's engine, through state against its plain-Python model "
                   "(tests/documents/test_api*.py)",
    "compare.*": "through diff against its plain-Python model (tests/compare/test_api.py)",
    "reporting.*": "through report against conversations of known timing "
                   "(tests/reporting/test_api.py) and the page (test_page.py)",
    "spark.dcp_source": "the data source's class, through its read paths "
                        "(tests/spark/test_datasource.py, test_stream_reader.py)",
    "spark.reader": "the batch readers, through the dcp source's read paths, filters "
                    "pushed down too (tests/spark/test_datasource.py)",
}


def package_modules(package: str) -> set[str]:
    """The names a test file of ``package``'s folder may be named for ("" is the top level):
    its modules but ``__init__`` and ``__main__``, in ``_core`` each core by its role
    (``scan`` for cscan and pyscan, which the suite runs through one switch)."""
    root = PACKAGE / package if package else PACKAGE
    roles = {p.stem[1:] for p in root.glob("c*.pyx")}
    return {p.stem[2:] if p.stem.startswith("py") and p.stem[2:] in roles else p.stem
            for p in root.glob("*.py") if p.stem not in ("__init__", "__main__")} | roles


def all_modules() -> set[str]:
    """Every module a test file may be named for, dotted (``io.dumps``, ``_core.scan``)."""
    packages = ["", *(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())]
    return {f"{package}.{module}" if package else module
            for package in packages for module in package_modules(package)}


def mirrored(folder: Path) -> str:
    """The package a folder of tests/ mirrors ("" for tests/ itself)."""
    name = folder.relative_to(TESTS).as_posix()
    return "" if name == "." else TEST_FOLDERS.get(name, name)


def named_module(test: Path) -> str | None:
    """The module a test file is named for (``test_<module>.py`` or
    ``test_<module>_<aspect>.py`` in the folder of its package), or None."""
    package = mirrored(test.parent)
    if not (PACKAGE / package).is_dir():
        return None
    name = test.stem.removeprefix("test_")
    for module in sorted(package_modules(package), key=len, reverse=True):
        if name == module or name.startswith(f"{module}_"):
            return f"{package}.{module}" if package else module
    return None


TEST_FILES = sorted(TESTS.rglob("test_*.py"))


def test_the_tests_are_laid_out_like_the_package():
    """A folder of tests/ mirrors a subpackage; each test file in it is named for a module
    of that subpackage, each at the top level for a top-level module or the whole house;
    the lists that say otherwise name files that exist and need saying so."""
    wrong = [f"tests/{d.name}/ mirrors no subpackage of dcpfast/" for d in TESTS.iterdir()
             if d.is_dir() and d.name not in TEST_DATA and not d.name.startswith((".", "_"))
             and not (PACKAGE / mirrored(d)).is_dir()]
    for test in TEST_FILES:
        where = test.relative_to(TESTS).as_posix()
        if named_module(test) is None and where not in WHOLE_HOUSE | NAMED_OTHERWISE:
            wrong.append(f"tests/{where} is named for no module of "
                         f"dcpfast/{mirrored(test.parent)} (test_<module>.py or "
                         "test_<module>_<aspect>.py)")
    for where in [*WHOLE_HOUSE, *NAMED_OTHERWISE]:
        if not (TESTS / where).is_file():
            wrong.append(f"tests/{where} is listed but does not exist")
        elif named_module(TESTS / where) is not None:
            wrong.append(f"tests/{where} is named for a module now: take it off the list")
    modules = all_modules()
    wrong += [f"tests/{where} is listed as testing {module}, which does not exist"
              for where, module in NAMED_OTHERWISE.items() if module not in modules]
    assert not wrong, "\n".join(wrong)


def _tested_through(module: str) -> str | None:
    """The TESTED_THROUGH entry that says where ``module`` is tested, if any."""
    package = module.rpartition(".")[0]
    for entry in (module, f"{package}.*" if package else None):
        if entry in TESTED_THROUGH:
            return entry
    return None


def test_every_module_is_named_by_a_test():
    """Each module is named by a test file, or TESTED_THROUGH says where it is tested
    instead; the faces (``__init__``) and ``__main__`` are left out."""
    named = {named_module(t) for t in TEST_FILES} | set(NAMED_OTHERWISE.values())
    left = sorted(all_modules() - named)
    unnamed = [m for m in left if _tested_through(m) is None]
    stale = sorted(set(TESTED_THROUGH) - {_tested_through(m) for m in left})
    assert not unnamed and not stale, (
        f"modules no test file is named for (name one tests/<package>/test_<module>.py, "
        f"or say in TESTED_THROUGH where each is tested): {unnamed}; "
        f"TESTED_THROUGH entries no longer needed: {stale}")
