"""The Python workers that run dcpfast's data sources: which interpreter, with which
environment, and a check that they run the dcpfast this process runs.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (``python3`` when unset) in the
executor's working directory, and ``python -m`` puts that directory first on
``sys.path``. Run from a source checkout, a worker would import the checkout's
``dcpfast/`` (without compiled cores: the pure-Python twin) while the driver runs the
installed one; run from a virtual environment that is not activated, ``python3`` may
have no dcpfast at all. dcpfast's data sources are therefore registered with an
interpreter and an environment of their own, for their workers only (the session's
settings are left as they are): on a local master the interpreter of this process unless
``PYSPARK_PYTHON`` names one, and ``PYTHONSAFEPATH=1``, which keeps the working directory
off ``sys.path``. Each task still checks that it runs the same dcpfast, with the same
cores, as the driver (``same_dcpfast``), and fails in one line when it does not.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
import weakref
import zlib

from ..batch import IMPLEMENTATION
from ..errors import text

#: The environment the data sources' workers get on top of the session's.
WORKER_ENV = {"PYTHONSAFEPATH": "1"}

#: The data sources registered in each session, by name (registering again logs a warning).
_REGISTERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dcpfast")
    except PackageNotFoundError:
        return "unknown"


def identity() -> str:
    """What a worker must run: dcpfast's version and its cores (``"0.1.0/cython"``)."""
    return f"{_version()}/{IMPLEMENTATION}"


def same_dcpfast(expected: str | None) -> None:
    """Fail in one line where this worker runs another dcpfast than the driver
    (``expected``: the driver's ``identity()``; None: not checked)."""
    if expected is None or expected == identity():
        return
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    raise RuntimeError(text("worker_mismatch", here=identity(), there=expected,
                            where=package, python=sys.executable))


def _local(spark) -> bool:
    try:
        return spark.sparkContext.master.startswith("local")
    except Exception:                       # Spark Connect: no SparkContext here
        return False


def interpreter(spark) -> str | None:
    """The interpreter dcpfast's workers run: this one on a local master unless
    ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) names one (through ``launcher``);
    else the session's (None where the session cannot be asked)."""
    try:
        chosen = spark.sparkContext.pythonExec
    except Exception:
        return None
    named = os.environ.get("PYSPARK_PYTHON") or spark.conf.get("spark.pyspark.python", None)
    if _local(spark) and (not named or _same(named, sys.executable)):
        return launcher()
    return chosen


def _same(a: str, b: str) -> bool:
    found = shutil.which(a)
    return found is not None and os.path.abspath(found) == os.path.abspath(b)


#: The shell script of ``launcher``: the worker's ``PYTHONPATH`` without pyspark's zipped
#: sources, then this interpreter.
_LAUNCHER = """#!/bin/sh
kept=""
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    */python/lib/pyspark.zip|*/python/lib/py4j-*-src.zip) ;;
    *) kept="$kept${kept:+:}$entry" ;;
  esac
done
unset IFS
PYTHONPATH="$kept"
export PYTHONPATH
exec "{python}" "$@"
"""


@functools.cache
def launcher() -> str:
    """What a local master's workers run: this interpreter, through a small shell script
    (in the temporary directory) that takes pyspark's zipped sources off their path where
    they are the installed pyspark's own, so that they import its compiled modules.

    Spark puts ``SPARK_HOME/python/lib/pyspark.zip`` first on a worker's path; Python
    compiles what it imports from a zip on every start (it keeps no bytecode of it), which
    costs each Python process Spark starts about a second of CPU. Elsewhere (not POSIX,
    another ``SPARK_HOME``, no zip): this interpreter itself."""
    try:
        import pyspark
    except ImportError:
        return sys.executable
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    zipped = os.path.join(home, "python", "lib", "pyspark.zip")
    spark_home = os.environ.get("SPARK_HOME")
    if os.name != "posix" or not os.path.exists(zipped) or \
            (spark_home and os.path.realpath(spark_home) != os.path.realpath(home)):
        return sys.executable
    text_of = _LAUNCHER.replace("{python}", sys.executable.replace('"', '\\"'))
    name = f"dcpfast-python-{zlib.crc32(text_of.encode()):08x}.sh"
    path = os.path.join(tempfile.gettempdir(), name)
    try:
        with open(path) as f:
            if f.read() == text_of and os.access(path, os.X_OK):
                return path
    except OSError:
        pass
    try:
        fd, scratch = tempfile.mkstemp(prefix=name, dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            f.write(text_of)
        os.chmod(scratch, 0o755)
        os.replace(scratch, path)
    except OSError:
        return sys.executable
    return path


def check_interpreter(spark) -> None:
    """For functions Spark runs with the session's interpreter (``mapInArrow``): fail at
    once, in one line, where a local master's workers would run a Python that is not this
    one and has no dcpfast (``python3`` outside the virtual environment)."""
    try:
        chosen = spark.sparkContext.pythonExec
    except Exception:
        return
    if not _local(spark) or os.environ.get("PYSPARK_PYTHON") or \
            spark.conf.get("spark.pyspark.python", None):
        return
    found = shutil.which(chosen)
    if found and os.path.realpath(os.path.dirname(found)) == \
            os.path.realpath(os.path.dirname(sys.executable)):
        return
    if sys.prefix != sys.base_prefix or not found:        # a virtual environment's dcpfast
        raise RuntimeError(text("worker_python", python=found or chosen,
                                here=sys.executable))


@contextlib.contextmanager
def worker_python(spark):
    """While the block runs, Python functions handed to Spark (a data source registered,
    a ``mapInArrow`` function) take ``interpreter(spark)`` and ``WORKER_ENV`` for their
    workers: pyspark reads both from the SparkContext (``pythonExec``, ``environment``)
    as it wraps a function, so they are set for the block and put back after it; the
    session's own Python workers keep theirs. On Spark Connect (no SparkContext here)
    nothing changes."""
    try:
        context = spark.sparkContext
        kept = context.pythonExec, context.environment
    except Exception:
        yield
        return
    context.pythonExec = interpreter(spark) or kept[0]
    context.environment = {**kept[1], **WORKER_ENV}
    try:
        yield
    finally:
        context.pythonExec, context.environment = kept


def registered(spark, source) -> None:
    """Register the data source class ``source`` in ``spark`` (once per session), its
    workers run by ``interpreter(spark)`` with ``WORKER_ENV`` (``worker_python``)."""
    names = _REGISTERED.setdefault(spark, set())
    if source.name() in names:
        return
    with worker_python(spark):
        spark.dataSource.register(source)
    names.add(source.name())
