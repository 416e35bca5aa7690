"""Shared fixtures; the whole suite runs against whichever scan core the process uses."""

from __future__ import annotations

import pytest

import dcpfast


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
