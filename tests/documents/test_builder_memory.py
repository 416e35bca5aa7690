"""Every entry point of the state engine (``dcpfast.state``, processes, a bare
``StateBuilder``, rows fed as Spark feeds them, the command) runs it in the working
cache: the builder enters numpy's memory context itself."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from numpy._core.multiarray import get_handler_name

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.documents import StateBuilder
from dcpfast.documents.engine import Engine
from dcpfast.documents.rows import batch_rows
from dcpfast.events import read_events

compiled_only = pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                                   reason="the twin has no spans: numpy's memory stays numpy's")


# -- every entry point runs the engine in the working cache ----------------------------------


@pytest.fixture
def handlers(monkeypatch):
    """The numpy handler each call of the engine's update and finish ran with."""
    seen: list[str] = []
    for name in ("update", "finish"):
        method = getattr(Engine, name)

        def probe(self, *args, _method=method, _name=name, **kwargs):
            seen.append(f"{_name}:{get_handler_name()}")
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(Engine, name, probe)
    return seen


def _ran_in_spans(seen: list[str]) -> None:
    assert any(s.startswith("update:") for s in seen), seen
    assert any(s.startswith("finish:") for s in seen), seen
    assert {s.split(":")[1] for s in seen} == {"dcpfast_spans"}, seen
    assert get_handler_name() == "default_allocator"


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "d.dcp"
    path.write_bytes(t.synthetic_stream(2000, seed=21, vbuckets=4))
    return path


@compiled_only
@pytest.mark.parametrize("threads", [1, 2])
def test_state_runs_the_engine_in_the_working_cache(handlers, dump, threads):
    assert dcpfast.state(dump, threads=threads).num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_a_state_shared_among_processes_runs_its_share_in_the_working_cache(handlers, dump):
    """This process builds one share (the others, worker processes, run the same
    ``StateBuilder``)."""
    assert dcpfast.state(dump, processes=2).num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_a_bare_state_builder_runs_the_engine_in_the_working_cache(handlers, dump):
    builder = StateBuilder()
    for batch in dcpfast.iter_batches(dump, 1 << 16):
        builder.update(batch)
    assert builder.table().num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_rows_fed_as_spark_feeds_them_run_in_the_working_cache(handlers, dump):
    """Spark's partitions give the builder rows (``feed``) and take ``result``."""
    builder, batch = StateBuilder(values=False), dcpfast.read(dump)
    rows, _ = batch_rows(batch, 0, values=False, events=read_events(batch)[0])
    builder.feed(rows)
    assert builder.result().num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_the_command_runs_the_engine_in_the_working_cache(handlers, dump, tmp_path):
    done = CliRunner().invoke(main, ["state", str(dump), "-o", str(tmp_path / "s.parquet")])
    assert done.exit_code == 0, done.output
    _ran_in_spans(handlers)
