"""Build the Cython cores of ``dcpfast._core`` (memory, DCP frame scan, packet-capture walk,
values, stream checks and document state).

DCPFAST_DEBUG=1 builds with bounds checks, assertions and no optimisation;
DCPFAST_SANITIZE=1 adds AddressSanitizer and UndefinedBehaviorSanitizer;
DCPFAST_ANNOTATE=1 writes Cython's HTML annotation next to the sources;
DCPFAST_REQUIRE_CORES=1 fails the build where the cores cannot be compiled (the wheels set
it); without it dcpfast then installs with the pure-Python twins of the cores.
"""

import importlib.util
import os
import sys
import types
from glob import glob
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError


def flag(name):
    return os.environ.get(name, "") not in ("", "0")


debug = flag("DCPFAST_DEBUG") or flag("DCPFAST_SANITIZE")
directives = dict(language_level=3, boundscheck=debug, wraparound=False, cdivision=True,
                  initializedcheck=debug, freethreading_compatible=True, embedsignature=True,
                  autotestdict=False)
compile_args = ["-O0", "-g", "-UNDEBUG"] if debug else ["-O3"]
link_args = []
if flag("DCPFAST_SANITIZE"):
    sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    compile_args += sanitize
    link_args += sanitize

# What each extension is built from besides its .pyx: editing any of these rebuilds it.
core = "dcpfast/_core/"
wire = [core + "wire.pxd", core + "wire.h"]
memory = [core + "cmemory.pxd", core + "span_flags.h"]      # what the memory core's users see
depends = {
    "cmemory": [*memory, core + "spans.h", core + "numpy_spans.h"],
    "cscan": [*sorted(glob(core + "scan_*.pxi")), *memory, core + "bitmaps.h", *wire],
    "cpcap": wire,
    "cvalues": [core + "xattr_keys.h", *wire],
    "cstate": [*sorted(glob(core + "state_*.pxi")), core + "keys.h", core + "contract.py",
               core + "contract.pxi", "dcpfast/protocol.py", *memory, *wire],
}


def load_contract():
    """contract.py and protocol.py, whose numbers it names, loaded on their own as the
    modules of a package of their own (``_dcpfast_build``), without importing dcpfast."""
    for name, path in (("_dcpfast_build", None), ("_dcpfast_build._core", None),
                       ("_dcpfast_build.protocol", "dcpfast/protocol.py"),
                       ("_dcpfast_build._core.contract", core + "contract.py")):
        if path is None:
            sys.modules[name] = types.ModuleType(name)
            sys.modules[name].__path__ = []
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def write_contract_codes():
    """Write the codes of contract.py as the Cython declarations that cstate includes
    (contract.pxi, git-ignored), where they changed: contract.py stays their one definition."""
    text, path = load_contract().cython_codes(), Path(core, "contract.pxi")
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


write_contract_codes()

extensions = [Extension(f"dcpfast._core.{name}", [f"{core}{name}.pyx"], depends=files,
                        include_dirs=["dcpfast/_core", numpy.get_include()],
                        extra_compile_args=compile_args, extra_link_args=link_args)
              for name, files in depends.items()]



class BuildCores(build_ext):
    """All the compiled cores or none: where one fails to compile (no C compiler, say),
    none is installed and dcpfast runs on the twins (``dcpfast.IMPLEMENTATION`` says
    "python"), since a build with some cores but not all is refused at import."""

    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            if flag("DCPFAST_REQUIRE_CORES"):
                raise
            for ext in self.extensions:
                built = self.get_ext_fullpath(ext.name)
                if os.path.exists(built):
                    os.remove(built)
            print(f"warning: the compiled cores of dcpfast could not be built ({e}); it "
                  "installs with their pure-Python twins, which do the same work more "
                  "slowly", file=sys.stderr)


setup(ext_modules=cythonize(extensions, compiler_directives=directives,
                            annotate=flag("DCPFAST_ANNOTATE")),
      cmdclass={"build_ext": BuildCores})
