"""``dcpfast.mirror``: the Delta table after every run, and every version committed, held
against the plain-Python model of the state (state_model) at each vbucket's consistent
seqno of what the run read; dumps that grow at random byte positions, with rollbacks,
restarts, collection drops, lost frames; runs killed with SIGKILL and run again; any
sequence of runs ends as one run does; inputs and tables a run must refuse."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast.mirror import AnotherWriter, InputsChanged, NotAMirror, mirror
from dcpfast.mirror.inputs import whole_frames
from dcpfast.mirror.table import METADATA_KEY
from tests.state_model import decoded, expected, model, rows_of
from tests.state_scenarios import scenario

deltalake = pytest.importorskip("deltalake")

#: The table's signed columns, as the state holds them.
UNSIGNED = {"vbucket": pa.uint16(), "collection_id": pa.uint32(), "by_seqno": pa.uint64(),
            "rev_seqno": pa.uint64(), "cas": pa.uint64(), "flags": pa.uint32(),
            "expiration": pa.uint32(), "datatype": pa.uint8(), "delete_time": pa.uint32()}


def unsigned(table: pa.Table) -> pa.Table:
    """The mirror's rows with the state's types back."""
    for name, kind in UNSIGNED.items():
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, pc.cast(table[name], kind, safe=False))
    return table


def wanted(data: bytes) -> dict:
    """The model's documents of ``data`` at each vbucket's consistent seqno."""
    frames, bodies = decoded(data, errors="skip")
    _, points, _ = model(frames, bodies)
    docs, _, _ = model(frames, bodies, at_seqno=points)
    return expected(docs, include_deleted=False)


def held(uri, version: int | None = None) -> dict:
    table = deltalake.DeltaTable(uri, version=version).to_pyarrow_table()
    return rows_of(unsigned(table))


def _sorted(versions: dict) -> dict:
    return {key: sorted(vs, key=lambda v: (v["by_seqno"], v["cas"]))
            for key, vs in versions.items()}


def model_history(data: bytes) -> dict:
    """The model's versions of ``data`` at each vbucket's consistent seqno."""
    frames, bodies = decoded(data, errors="skip")
    _, points, _ = model(frames, bodies)
    docs, _, _ = model(frames, bodies, at_seqno=points, history=True)
    return docs


def wanted_history(data: bytes) -> dict:
    return _sorted(expected(model_history(data), history=True, include_deleted=False))


def held_history(uri) -> dict:
    table = deltalake.DeltaTable(uri).to_pyarrow_table()
    for side, seqno, clock in (("__START_AT", "valid_from_seqno", "valid_from_time"),
                               ("__END_AT", "valid_to_seqno", "valid_to_time")):
        point = table[side].combine_chunks()
        valid = point.is_valid()
        assert pc.struct_field(point, "seqno").filter(valid).to_pylist() == \
            table[seqno].filter(valid).to_pylist()
        assert pc.struct_field(point, "time").filter(valid).to_pylist() == \
            table[clock].filter(valid).to_pylist()
        assert table[seqno].filter(pc.invert(valid)).null_count == \
            len(table[seqno].filter(pc.invert(valid)))
    table = table.set_column(table.schema.get_field_index("valid_to_seqno"),
                             "valid_to_seqno", pc.cast(table["valid_to_seqno"], pa.uint64(),
                                                       safe=False))
    return _sorted(rows_of(unsigned(table.drop_columns(["__START_AT", "__END_AT"])),
                           history=True))


def grow(path, data: bytes, end: int) -> None:
    """The dump at ``path`` grown to ``data[:end]`` (a writer appending)."""
    have = os.path.getsize(path) if os.path.exists(path) else 0
    with open(path, "ab") as f:
        f.write(data[have:end])


def applied(uri, version: int) -> int:
    """How many bytes of the stream the commit ``version`` applied."""
    commits = {c["version"]: c for c in deltalake.DeltaTable(uri).history()}
    run = json.loads(commits[version][METADATA_KEY])
    return sum(p["offset"] for p in run["inputs"]) - run["waiting"]


CONVERSATIONS = [dict(restarts=0.25, vbuckets=2), dict(restarts=0.1, requests=True),
                 dict(collections=False), dict(restarts=0.15, stream_ids=True)]


@pytest.mark.parametrize("seed", range(4))
def test_every_run_is_the_model_at_its_consistent_seqnos(seed, tmp_path):
    rng = random.Random(seed)
    data = scenario(seed + 900, **CONVERSATIONS[seed])
    dump, uri = tmp_path / "bucket.dcp", str(tmp_path / "bucket.delta")
    cuts = sorted(rng.sample(range(1, len(data)), 5)) + [len(data)]
    for end in cuts:
        grow(dump, data, end)
        run = mirror(dump, uri)
        assert run.waiting == end - whole_frames(data[:end])
        assert held(uri) == wanted(data[:end - run.waiting])
        assert run.documents == len(wanted(data[:end - run.waiting]))
    # every version of the table: the bucket as that run applied it (time travel)
    last = deltalake.DeltaTable(uri).version()
    for version in range(last + 1):
        assert held(uri, version) == wanted(data[:applied(uri, version)])


@pytest.mark.parametrize("seed", range(3))
def test_the_history_is_every_version_and_when_it_was_current(seed, tmp_path):
    rng = random.Random(seed)
    data = scenario(960 + seed, **CONVERSATIONS[seed])
    dump = tmp_path / "d.dcp"
    uri, versions = str(tmp_path / "t.delta"), str(tmp_path / "h.delta")
    for end in sorted(rng.sample(range(1, len(data)), 3)) + [len(data)]:
        grow(dump, data, end)
        run = mirror(dump, uri, history=versions)
        assert held_history(versions) == wanted_history(data[:end - run.waiting])
        assert held(uri) == wanted(data[:end - run.waiting])
    # the documents as of a time: a filter of the history
    table = deltalake.DeltaTable(versions).to_pyarrow_table()

    def micros(cas: int) -> int:             # the CAS clock's whole ticks, as Delta keeps them
        return (cas & ~0xFFFF) // 1000

    cas = sorted(pc.cast(table["cas"], pa.uint64(), safe=False).to_pylist())
    at = micros(cas[len(cas) // 2])
    when = pa.scalar(at, pa.timestamp("us", tz="UTC"))
    live = table.filter(pc.and_kleene(
        pc.less_equal(pc.struct_field(table["__START_AT"], "time"), when),
        pc.or_kleene(pc.is_null(table["__END_AT"]), pc.greater(pc.struct_field(
            table["__END_AT"], "time"), when))))
    as_of = set()                            # the model: a version from its CAS to the next's
    for key, vs in model_history(data).items():
        for v, after in zip(vs, vs[1:] + [None]):
            ends = micros(after["cas"]) if after is not None and \
                v["valid_to_seqno"] == after["by_seqno"] else None
            if not v["deleted"] and micros(v["cas"]) <= at and (
                    ends is None and v["valid_to_seqno"] is None or
                    ends is not None and at < ends):
                as_of.add(key)
    assert {(r["vbucket"], r["collection_id"], r["key"]) for r in
            live.select(["vbucket", "collection_id", "key"]).to_pylist()} == as_of


def test_rotated_dumps_in_a_directory_are_one_stream(tmp_path):
    data = scenario(905, restarts=0.2, vbuckets=2)
    folder = tmp_path / "dumps"
    folder.mkdir()
    uri = str(tmp_path / "t.delta")
    bounds = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        (folder / f"dump-{i:03d}.dcp").write_bytes(data[lo:hi])   # cut mid-frame: one stream
        mirror(folder, uri)
        assert held(uri) == wanted(data[:whole_frames(data[:hi])])


@given(st.lists(st.integers(1, 2**31), min_size=1, max_size=4), st.integers(0, 3))
@settings(max_examples=12, deadline=None)
def test_any_sequence_of_runs_ends_as_one_run(tmp_path_factory, picks, which):
    tmp = tmp_path_factory.mktemp("runs")
    data = scenario(910 + which, **CONVERSATIONS[which])
    dump, uri, once = tmp / "d.dcp", str(tmp / "many.delta"), str(tmp / "one.delta")
    for end in sorted({p % len(data) for p in picks}) + [len(data)]:
        grow(dump, data, end)
        mirror(dump, uri)
    mirror(dump, once)
    assert held(uri) == held(once)
    assert deltalake.DeltaTable(once).version() == 0


def test_lost_frames_stop_their_vbucket_with_a_warning(tmp_path):
    data = scenario(920, vbuckets=2, restarts=0.0)
    batch = dcpfast.scan(data)
    offsets = batch.to_arrow()["offset"].to_pylist() + [len(data)]
    markers = [i for i in range(len(batch)) if batch.frame(i)["opcode"] == 0x56]
    gap = markers[len(markers) // 2]         # a snapshot marker lost: its items have none
    damaged = data[:offsets[gap]] + data[offsets[gap + 1]:]
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    dump.write_bytes(damaged)
    run = mirror(dump, uri)
    assert run.lost == [batch.frame(gap)["vbucket"]]
    state = dcpfast.state(damaged, errors="skip")
    cut = {r["vbucket"]: r["consistent_seqno"]
           for r in dcpfast.documents.consistency(state).to_pylist()}
    want = dcpfast.state(damaged, errors="skip", at_seqno=cut)
    assert held(uri) == rows_of(want)
    history = deltalake.DeltaTable(uri).history(1)[0]
    assert json.loads(history[METADATA_KEY])["lost"] == run.lost


KILLER = """
import sys
from dcpfast.mirror import mirror
mirror(sys.argv[1], sys.argv[2], history=sys.argv[3] if len(sys.argv) > 3 else None)
"""


@pytest.mark.parametrize("seed", range(3))
def test_runs_killed_at_any_moment_and_run_again(seed, tmp_path):
    rng = random.Random(seed)
    data = scenario(930 + seed, restarts=0.2, vbuckets=3, snapshots=60)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    versions = [str(tmp_path / "h.delta")] if seed == 2 else []
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    for end in sorted(rng.sample(range(1, len(data)), 4)) + [len(data)]:
        grow(dump, data, end)
        child = subprocess.Popen([sys.executable, "-c", KILLER, str(dump), uri, *versions],
                                 env=env)
        time.sleep(rng.uniform(0.0, 1.5))
        child.send_signal(signal.SIGKILL)
        child.wait()
    mirror(dump, uri, history=versions[0] if versions else None)    # not killed
    assert held(uri) == wanted(data)
    if versions:
        assert held_history(versions[0]) == wanted_history(data)
    for version in range(deltalake.DeltaTable(uri).version() + 1):
        assert held(uri, version) == wanted(data[:applied(uri, version)])


# -- what a run refuses, the table unchanged ---------------------------------------------


def _mirrored(tmp_path):
    data = scenario(940, vbuckets=2)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    dump.write_bytes(data[:len(data) // 2])
    mirror(dump, uri)
    return data, dump, uri


def test_inputs_that_do_not_continue_the_ones_applied(tmp_path):
    data, dump, uri = _mirrored(tmp_path)
    version = deltalake.DeltaTable(uri).version()
    dump.write_bytes(data[:len(data) // 4])                       # truncated
    with pytest.raises(InputsChanged, match="shrank"):
        mirror(dump, uri)
    dump.write_bytes(scenario(941, vbuckets=2))                   # another bucket's
    with pytest.raises(InputsChanged):
        mirror(dump, uri)
    other = tmp_path / "other.dcp"
    other.write_bytes(data)
    with pytest.raises(InputsChanged, match="missing"):
        mirror(other, uri)                                       # the file applied is not named
    dump.unlink()
    with pytest.raises(FileNotFoundError):
        mirror(dump, uri)
    assert deltalake.DeltaTable(uri).version() == version


def test_a_table_no_mirror_wrote(tmp_path):
    uri = str(tmp_path / "plain.delta")
    deltalake.write_deltalake(uri, pa.table({"x": [1, 2]}))
    dump = tmp_path / "d.dcp"
    dump.write_bytes(scenario(942, vbuckets=1))
    with pytest.raises(NotAMirror, match="no dcpfast mirror"):
        mirror(dump, uri)
    assert deltalake.DeltaTable(uri).version() == 0
    with pytest.raises(NotAMirror, match="no dcpfast mirror"):
        mirror(dump, str(tmp_path / "new.delta"), history=uri)     # as the history table
    assert not (tmp_path / "new.delta").exists()


def test_a_second_writer_fails_and_loses_nothing(tmp_path):
    data, dump, uri = _mirrored(tmp_path)
    stale = deltalake.DeltaTable(uri)                  # a run that read the table ...
    dump.write_bytes(data[:3 * len(data) // 4])
    mirror(dump, uri)                                  # ... while another committed
    from dcpfast.mirror.table import commit

    rows = unsigned(deltalake.DeltaTable(uri).to_pyarrow_table())
    with pytest.raises(AnotherWriter, match="another writer"):
        commit(uri, stale, None, deltalake.DeltaTable(uri).to_pyarrow_table().slice(0, 1),
               pa.table({"vbucket": pa.array([], pa.int32()),
                         "collection_id": pa.array([], pa.int64()),
                         "key": pa.array([], pa.binary())}), {"run": 2, "inputs": []})
    assert rows_of(unsigned(deltalake.DeltaTable(uri).to_pyarrow_table())) == rows_of(rows)
    dump.write_bytes(data)
    mirror(dump, uri)
    assert held(uri) == wanted(data)


def test_two_first_runs_one_table(tmp_path):
    data = scenario(943, vbuckets=1)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    dump.write_bytes(data)
    from dcpfast.mirror.table import commit

    mirror(dump, uri)                       # the other run created the table first
    rows = deltalake.DeltaTable(uri).to_pyarrow_table()
    with pytest.raises(AnotherWriter, match="nothing of this run was committed"):
        commit(uri, None, rows, rows.slice(0, 0), rows.slice(0, 0),
               {"run": 1, "inputs": []})
    assert deltalake.DeltaTable(uri).version() == 0


def two_runs(tmp_path, seed: int) -> tuple[bytes, str]:
    """A stream and its mirror after two runs: on its first half, then on all of it."""
    data = scenario(seed, vbuckets=2, restarts=0.2)
    dump, uri = tmp_path / "d.dcp", str(tmp_path / "t.delta")
    dump.write_bytes(data[:len(data) // 2])
    mirror(dump, uri)
    dump.write_bytes(data)
    mirror(dump, uri)
    return data, uri


def test_readers_open_the_table_as_any_delta_table(tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    data, uri = two_runs(tmp_path, 944)
    docs = deltalake.DeltaTable(uri).to_pyarrow_table()
    assert rows_of(unsigned(docs)) == wanted(data)
    frame = pl.read_delta(uri)
    assert sorted(frame["key_str"].to_list()) == sorted(docs["key_str"].to_pylist())
    assert duckdb.sql("SELECT count(*) AS n FROM docs").fetchall()[0][0] == docs.num_rows
    first = deltalake.DeltaTable(uri, version=0).to_pandas()
    assert len(first) == len(wanted(data[:whole_frames(data[:len(data) // 2])]))
