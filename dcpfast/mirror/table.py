"""The mirror's Delta table: its schema (the state's, signed where Delta has no unsigned
types), the run its last commit recorded, and the one transaction of a run.

A run's changes go in one commit: the first run writes the table; later runs MERGE the
documents changed, added and gone on their identity (vbucket, collection id, key). Each
commit carries the run in its metadata (``METADATA_KEY``: the run's number, where each
input stood, each vbucket's consistent seqno, what was lost) and Delta's application
transaction (``APP_ID``, the run's number), so that a run never commits twice: a commit
is made only on the version the run read, else it fails (another writer).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import optional

#: The Delta application transaction id of a mirror's commits.
APP_ID = "dcpfast.mirror"
#: The commit metadata key of a run.
METADATA_KEY = "dcpfast.mirror"
#: A document's identity in the table.
IDENTITY = ("vbucket", "collection_id", "key")
#: A version's identity in the history table.
VERSION_IDENTITY = (*IDENTITY, "by_seqno", "cas")
#: Delta has no unsigned integers: each as the signed type that holds all its values
#: (64-bit ones as int64, their bits kept: CAS and seqnos stay below 2**63).
_SIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
           pa.uint64(): pa.int64()}


class NotAMirror(ValueError):
    """A Delta table that no mirror wrote, where a mirror was asked for."""


class AnotherWriter(RuntimeError):
    """Another writer committed to the table while a run was reading it."""


class WriteFailed(OSError):
    """A run's files or commit could not be written (no permission, a full disk): nothing
    of the run was committed."""


def deltalake():
    """The ``deltalake`` module (the ``delta`` extra)."""
    return optional("deltalake", "delta", "dcpfast.mirror")


def table_schema(schema: pa.Schema) -> pa.Schema:
    """The table's schema of the state's ``schema``."""
    return pa.schema([pa.field(f.name, _SIGNED.get(f.type, f.type), f.nullable)
                      for f in schema])


def as_table(rows: pa.Table) -> pa.Table:
    """State rows as the table holds them (unsigned columns signed, bits kept)."""
    schema = table_schema(rows.schema)
    columns = []
    for field, column in zip(schema, rows.columns, strict=True):
        if column.type == pa.uint64():
            column = pc.cast(column, pa.int64(), safe=False)
        elif column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.table(columns, schema=schema)


def as_history(rows: pa.Table) -> pa.Table:
    """The state's history rows as the history table holds them: with ``__START_AT``
    and ``__END_AT`` (the seqno and the CAS time at which the version began and ended,
    as Auto CDC names them; ``__END_AT`` null while it is current)."""
    table = as_table(rows)

    def point(seqno: str, time: str) -> pa.Array:
        s, t = table[seqno].combine_chunks(), table[time].combine_chunks()
        return pa.StructArray.from_arrays([s, t], names=["seqno", "time"],
                                          mask=s.is_null())
    return table.append_column("__START_AT", point("valid_from_seqno", "valid_from_time")) \
        .append_column("__END_AT", point("valid_to_seqno", "valid_to_time"))


def opened(uri: str):
    """The Delta table at ``uri``, or None where there is none."""
    module = deltalake()
    try:
        return module.DeltaTable(uri)
    except module.exceptions.TableNotFoundError:
        return None


def last_run(table) -> dict:
    """The run the table's last commit recorded; ``NotAMirror`` where it recorded none."""
    for commit in table.history(1):
        raw = commit.get(METADATA_KEY)
        if raw is not None:
            return json.loads(raw)
    raise NotAMirror(f"{table.table_uri}: a Delta table no dcpfast mirror wrote (its last "
                     "commit says nothing of a mirror's run): mirror into another table")


def commit(uri: str, table, rows: pa.Table | None, changed: pa.Table, gone: pa.Table,
           run: dict, identity: tuple[str, ...] = IDENTITY) -> int:
    """Commit a run: the whole table (``rows``, where there is no table yet) or the
    rows ``changed`` and ``gone`` (their ``identity`` columns) MERGEd into ``table`` on
    ``identity``; the table's new version."""
    if table is None:
        with _committing(uri):
            deltalake().write_deltalake(uri, rows, mode="error",
                                        commit_properties=_properties(run))
        return 0
    return merged(uri, table, changed, gone, run, identity)[0]


def merged(uri: str, table, changed: pa.Table, gone: pa.Table, run: dict,
           identity: tuple[str, ...] = IDENTITY) -> tuple[int, dict[str, int]]:
    """MERGE the rows ``changed`` and ``gone`` (their ``identity`` columns) into
    ``table`` on ``identity`` in one commit: its version, and the rows ``inserted``,
    ``updated`` and ``deleted``."""
    source = pa.concat_tables([
        changed.append_column("_gone", pa.array([False] * changed.num_rows, pa.bool_())),
        _identities_of(gone, changed.schema)], promote_options="none")
    columns = {c: f"s.`{c}`" for c in changed.column_names}
    on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in identity)
    with _committing(uri):
        metrics = (table.merge(source, on, source_alias="s", target_alias="t",
                               commit_properties=_properties(run))
                   .when_matched_delete(predicate="s._gone")
                   .when_matched_update(columns, predicate="NOT s._gone")
                   .when_not_matched_insert(columns, predicate="NOT s._gone")
                   .execute())
    return table.version(), {k: int(metrics.get(f"num_target_rows_{k}", 0))
                             for k in ("inserted", "updated", "deleted")}


def held_in(table, cleared: tuple[tuple[int, int, int], ...], columns: list[str]
            ) -> pa.Table:
    """The ``columns`` of ``table``'s rows in the collections ``cleared`` ((vbucket,
    collection id, seqno): on that vbucket), with the seqno as ``_clear``."""
    clears = pa.table({"vbucket": pa.array([c[0] for c in cleared], pa.int32()),
                       "collection_id": pa.array([c[1] for c in cleared], pa.int64()),
                       "_clear": pa.array([c[2] for c in cleared], pa.int64())})
    held = table.to_pyarrow_table(
        columns=columns, filters=[("collection_id", "in", sorted({c[1] for c in cleared}))])
    return held.join(clears, ["vbucket", "collection_id"], join_type="inner")


def extended(uri: str, table, versions: pa.Table, run: dict,
             cleared: tuple[tuple[int, int, int], ...] = ()) -> int:
    """Commit new versions (``versions``: as the history table holds them, tombstones
    included) to the history ``table`` in one MERGE: each document's current version ends
    where its first new version begins, or at the first clear of its collection
    (``cleared``: (vbucket, collection id, seqno)) where that comes first, and the new
    versions but the tombstones are added; the table's new version."""
    key = list(IDENTITY)
    first = versions.group_by(key).aggregate([("valid_from_seqno", "min")]) \
        .rename_columns([*key, "valid_from_seqno"])
    ends = first.join(versions.select([*key, "valid_from_seqno", "valid_from_time"]),
                      [*key, "valid_from_seqno"])
    if cleared:
        ends = _cleared_ends(table, ends, cleared)
    ends = ends.append_column("__START_AT", pa.StructArray.from_arrays(
        [ends["valid_from_seqno"].combine_chunks(), ends["valid_from_time"].combine_chunks()],
        names=["seqno", "time"]))
    added = versions.filter(pc.invert(pc.fill_null(versions["deleted"], False)))
    n = ends.num_rows
    closers = pa.table({f.name: ends[f.name] if f.name in key else pa.nulls(n, f.type)
                        for f in added.schema}, schema=added.schema)
    for name, source in (("valid_to_seqno", "valid_from_seqno"),
                         ("valid_to_time", "valid_from_time"), ("__END_AT", "__START_AT")):
        at = closers.schema.get_field_index(name)
        closers = closers.set_column(at, closers.schema.field(at),
                                     ends[source].cast(closers.schema.field(at).type))
    source = pa.concat_tables([
        added.append_column("_close", pa.array([False] * added.num_rows, pa.bool_())),
        closers.append_column("_close", pa.array([True] * n, pa.bool_()))])
    on = " AND ".join(f"t.`{c}` = s.`{c}`" for c in key) + (
        " AND ((s._close AND t.valid_to_seqno IS NULL) OR (NOT s._close AND "
        "t.by_seqno = s.by_seqno AND t.cas = s.cas))")
    with _committing(uri):
        (table.merge(source, on, source_alias="s", target_alias="t",
                     commit_properties=_properties(run))
         .when_matched_update({c: f"s.`{c}`" for c in ("valid_to_seqno", "valid_to_time",
                                                       "__END_AT")}, predicate="s._close")
         .when_not_matched_insert({c: f"s.`{c}`" for c in added.column_names},
                                  predicate="NOT s._close")
         .execute())
    return table.version()


def _cleared_ends(table, ends: pa.Table, cleared: tuple[tuple[int, int, int], ...]
                  ) -> pa.Table:
    """``ends`` (each document's first new version, where its current one ends) with
    the current versions in the collections ``cleared`` ending at the clear where it comes
    first (at its seqno, no time: an event carries no CAS)."""
    key = list(IDENTITY)
    held = held_in(table, cleared, [*key, "valid_to_seqno"])
    held = held.filter(pc.is_null(held["valid_to_seqno"])).select([*key, "_clear"])
    both = held.join(ends, key, join_type="full outer")
    seqno, clear = both["valid_from_seqno"], both["_clear"]
    first = pc.and_(pc.is_valid(clear), pc.or_(pc.is_null(seqno),
                                               pc.fill_null(pc.less(clear, seqno), True)))
    time = ends.schema.field("valid_from_time").type
    return pa.table({**{c: both[c] for c in key},
                     "valid_from_seqno": pc.if_else(first, clear, seqno),
                     "valid_from_time": pc.if_else(first, pa.nulls(both.num_rows, time),
                                                   both["valid_from_time"])})


def rows_in(table) -> int:
    """The rows of ``table``'s current version (from its log: no data file read)."""
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    return int(pc.sum(actions.column("num_records")).as_py() or 0)


def _properties(run: dict):
    """A run's commit: its metadata, Delta's application transaction, no retry."""
    from deltalake import CommitProperties, Transaction

    return CommitProperties(custom_metadata={METADATA_KEY: json.dumps(run)},
                            max_commit_retries=0,
                            app_transactions=[Transaction(APP_ID, run["run"])])


@contextlib.contextmanager
def _committing(uri: str) -> Iterator[None]:
    """A failed commit as ``AnotherWriter`` (a commit raced) or ``WriteFailed``."""
    module = deltalake()
    try:
        yield
    except module.exceptions.DeltaError as failed:
        if not isinstance(failed, module.exceptions.CommitFailedError) and \
                "already exists" not in str(failed):
            raise WriteFailed(f"{uri}: the run could not be written ({failed}); nothing of "
                              "it was committed: the table is as it was") from None
        raise AnotherWriter(f"{uri}: another writer committed to the table while this run "
                            f"read it ({failed}); nothing of this run was committed: run it "
                            "again") from None


def _identities_of(gone: pa.Table, schema: pa.Schema) -> pa.Table:
    """Rows of ``schema`` holding only the identities of ``gone``, flagged ``_gone``."""
    n = gone.num_rows
    columns = {f.name: gone[f.name] if f.name in gone.column_names else pa.nulls(n, f.type)
               for f in schema}
    return pa.table({**columns, "_gone": pa.array([True] * n, pa.bool_())},
                    schema=schema.append(pa.field("_gone", pa.bool_())))
