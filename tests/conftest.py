"""Shared fixtures; the whole suite runs against whichever scan core the process uses.

The tests are laid out like the package, so that a module's tests are found by its name:
``dcpfast/X/Y.py`` is tested in ``tests/X/test_Y.py`` and ``tests/X/test_Y_<aspect>.py``
(``tests/core/`` for ``dcpfast/_core``, whose compiled cores and twins are named by role:
``test_scan*.py`` for cscan and pyscan), a top-level module ``dcpfast/Y.py`` in
``tests/test_Y*.py``. The tests about the whole house rather than one module stay at
``tests/`` top level (test_architecture.py lists them in ``WHOLE_HOUSE``, and checks the
layout). ``tests`` is a package: helpers are imported as ``tests.<helper>`` (the
strategies, cores, memory, models and scenarios here; ``tests/cli/commands.py`` for the
command's tests), fixtures shared by a folder live in its ``conftest.py``, and two
folders may hold test files of one name.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

import dcpfast

#: Property tests never fail on time: an example slowed by a busy machine is not a bug
#: (timings go into benchmarks, never into pass or fail).
settings.register_profile("dcpfast", deadline=None)
settings.load_profile("dcpfast")


def pytest_report_header(config):
    return f"dcpfast scan core: {dcpfast.IMPLEMENTATION}"


@pytest.fixture(autouse=True)
def _no_swallowed_exceptions(capfd):
    """Fail a test if a C-level callback swallowed an exception ("Exception ignored")."""
    yield
    _, err = capfd.readouterr()
    assert "Exception ignored" not in err, err


def scan_stream(data, **kwargs):
    """Decode ``data`` as a complete stream: a cut-off last frame counts as damage."""
    return list(dcpfast.iter_batches([data], **kwargs))


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the Spark tests (skipped without pyspark or Java)."""
    import os
    import shutil
    import sys

    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Spark 4 needs Java 17+")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("dcpfast-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def can_spark():
    """Skip a test that starts Spark in a child process where it cannot (as the shared
    ``spark`` fixture skips)."""
    import os
    import shutil

    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Spark 4 needs Java 17+")
