"""Fixtures of the Spark tests (the session itself is tests/conftest.py's ``spark``)."""

from __future__ import annotations

import pytest

from dcpfast import testing as T


@pytest.fixture(scope="module")
def stream():
    return T.synthetic_stream(80, seed=7, value_size=60)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Three dumps (one with durable writes), as the jobs' tests use (the read paths'
    tests, in test_datasource.py, write three of their own)."""
    root = tmp_path_factory.mktemp("job-dumps")
    paths = []
    for i, items in enumerate((300, 40, 900)):
        path = root / f"d{i}.dcp"
        path.write_bytes(T.synthetic_stream(items, seed=20 + i, sync_writes=i == 2))
        paths.append(str(path))
    return root, paths
