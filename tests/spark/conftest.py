"""Fixtures of the Spark tests (the session itself is tests/conftest.py's ``spark``)."""

from __future__ import annotations

import pytest

from dcpfast import testing as T


@pytest.fixture(scope="module")
def stream():
    return T.synthetic_stream(80, seed=7, value_size=60)
