"""The Delta table of ``write_delta``: what may be at the table's place before a job, the
one transaction that commits every task's files, and what a failed job leaves.

Tasks write their Parquet files straight into the table's partition folders
(``TABLE/vbucket=12/part-<partition>-<job>-<attempt>-<n>.parquet``; the frames without a
partition value in ``vbucket=__HIVE_DEFAULT_PARTITION__``, null in the table). A file
no commit names is not part of the table: readers go by the log (``_delta_log``), never
by listing. The commit, in the driver's process once every task has succeeded, adds the
files of the attempts whose results Spark returned in one transaction (``deltalake``,
delta-rs: no JVM, no catalog), with the job's summary in the commit's metadata and,
with an ``app_id``, Delta's application transaction version, so that a re-run commits
nothing new. A commit is made for the log's next version and fails where another took it
(put-if-absent of the version's file, a table's creation included); the loser reads the
log again and commits nothing where its load is there, else commits on the new version,
so that two runs of one load racing commit it once. Files of attempts that failed or
lost, and of a job that failed, are deleted (``sweep``). While the job runs, a marker
file in the table's folder says so (``running``, hidden from readers by its leading
underscore): the driver deletes it before it sweeps, and an attempt that finds it gone
once its files are written deletes them itself, so that an attempt Spark abandoned and
that wrote after the sweep leaves nothing either. The marker names the job's process
(``output.owner``): a first load killed before its commit (SIGKILL, an OOM kill, a lost
driver) leaves its marker and files in a folder without a table, which the next job
takes over (``check`` accepts such leftovers of dcpfast and nothing else, ``recover``
deletes those of jobs whose process is gone).
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import time

import pyarrow as pa
from pyarrow import fs

from ..errors import optional, text
from .output import abandoned, located, summary
from .source import filesystem

#: The folder value of frames without a partition value (null in the table), as Spark
#: and Hive name it.
NULL_FOLDER = "__HIVE_DEFAULT_PARTITION__"
LOG = "_delta_log"
#: The key of the commit metadata that holds the job's summary.
SUMMARY_KEY = "dcpfast"
#: How many commits of others a commit may lose to before the job gives up.
RACES = 20
#: The names of what a job leaves in the table's folder: its ``running`` marker, its
#: Parquet files (``part-<partition>-<job>-<attempt>-<id>-<n>.parquet``) and, in the log,
#: the temporary of a first commit that was not made.
_MARKER = re.compile(r"_dcpfast-running-([0-9a-f]{16})")
_PART = re.compile(r"part-\d{5}-([0-9a-f]{16})-\d+-\d+-\d+\.parquet")
_UNMADE = re.compile(r"_commit_[0-9a-f-]+\.json\.tmp")


def _deltalake():
    return optional("deltalake", "delta", "write_delta")


def table_uri(out: str) -> str:
    """The table's location as ``deltalake`` takes it (a local path made absolute)."""
    return out if "://" in out else filesystem(out)[1]


def check(out: str, mode: str, schema, partition_by, app_id: str | None,
          app_version: int) -> tuple[bool, int | None]:
    """Before a job: whether the table exists, and its version when ``app_id`` has
    already committed ``app_version`` (or a later one) there, else None (whatever the
    mode: a load committed once is not committed again, nor refused). Raises where
    ``mode`` does not allow what is at ``out``: a Delta table for ``"error"``, anything
    but a Delta table or a folder holding nothing but what jobs of dcpfast leave before
    their first commit (``recover`` deletes it) for every mode, a table of other columns
    or partitions for ``"append"``."""
    store, root, info = located(out, mode)
    if info.type == fs.FileType.NotFound:
        return False, None
    if info.type != fs.FileType.Directory:
        raise FileExistsError(text("delta_not_table", out=out, name=info.base_name))
    table = _table(out)
    if table is None:
        for entry in store.get_file_info(fs.FileSelector(root, recursive=True)):
            inside = posixpath.relpath(entry.path, root)
            if _job_of(inside, entry.type == fs.FileType.Directory) is None:
                raise FileExistsError(text("delta_not_table", out=out, name=inside))
        return False, None
    if app_id is not None:          # the load committed already: a rerun in any mode
        done = table.transaction_version(app_id)
        if done is not None and done >= app_version:
            return True, table.version()
    if mode.startswith("error"):
        raise FileExistsError(text("delta_exists", out=out))
    if mode == "append":
        have = [(f.name, str(f.type)) for f in table.schema().to_arrow()]
        want = [(f.name, str(f.type)) for f in table_schema(schema)]
        if {n for n, _ in have} != {n for n, _ in want} or \
                list(table.metadata().partition_columns) != list(partition_by):
            raise ValueError(f"{out}: the table has the columns {[n for n, _ in have]} "
                             f"partitioned by {list(table.metadata().partition_columns)}, "
                             f"not {[n for n, _ in want]} by {list(partition_by)}: write "
                             f"elsewhere, or replace it (mode=\"overwrite\")")
    return True, None


def _table(out: str):
    """The Delta table at ``out``, or None where its log holds no commit."""
    deltalake = _deltalake()
    try:
        return deltalake.DeltaTable(table_uri(out))
    except deltalake.exceptions.TableNotFoundError:
        return None


def _job_of(inside: str, folder: bool) -> str | None:
    """For a path in a folder that holds no table yet: the job that left it ("" for a
    partition folder or the log's), or None for what no job of dcpfast leaves there."""
    parts = inside.split("/")
    if parts[0] == LOG:
        return "" if folder and len(parts) == 1 or len(parts) == 2 and \
            _UNMADE.fullmatch(parts[1]) else None
    if folder:
        return "" if all("=" in part for part in parts) else None
    found = _MARKER.fullmatch(inside) or (_PART.fullmatch(parts[-1]) if all(
        "=" in part for part in parts[:-1]) else None)
    return found.group(1) if found else None


def recover(out: str) -> None:
    """Before a job at ``out``, where no table is: delete what earlier jobs killed before
    their commit left (their markers and files): jobs whose marker is gone (killed as
    they deleted their files) or whose process is (``output.abandoned``)."""
    store, root = filesystem(out)
    if store.get_file_info(root).type != fs.FileType.Directory:
        return
    markers: dict[str, str | None] = {}
    for entry in store.get_file_info(fs.FileSelector(root, recursive=True)):
        inside = posixpath.relpath(entry.path, root)
        job = _job_of(inside, entry.type == fs.FileType.Directory)
        if job and _MARKER.fullmatch(inside):
            markers[job] = entry.path
        elif job:
            markers.setdefault(job, None)
    if _table(out) is not None:      # a job committed since: its files may be the table's
        return
    for job, marker in markers.items():
        if marker is None or abandoned(store, marker):
            sweep(out, job, keep=())


def table_schema(schema):
    """The table's schema: the rows' Arrow schema with every dictionary as its values."""
    return pa.schema([pa.field(f.name, f.type.value_type, f.nullable)
                      if pa.types.is_dictionary(f.type) else f for f in schema])


def _partition_values(folder: str) -> dict[str, str | None]:
    values = {}
    for part in folder.split("/"):
        column, _, value = part.partition("=")
        values[column] = None if value == NULL_FOLDER else value
    return values


def commit(out: str, job: str, mode: str, schema, partition_by, results, *,
           app_id: str | None, app_version: int) -> dict | None:
    """One Delta transaction adding every committed attempt's files (``results``: the
    ``TaskWriter.result`` of each), with the job's summary in the commit's metadata; the
    summary with the table's new ``version``, or None (nothing committed) when ``app_id``
    has already committed ``app_version``. The files of other attempts of the job are
    deleted."""
    deltalake = _deltalake()
    from deltalake.transaction import (
        AddAction,
        CommitProperties,
        Transaction,
        create_table_with_add_actions,
    )

    now = int(time.time() * 1000)
    results = list(results)
    actions = [AddAction(relative, size, _partition_values(posixpath.dirname(relative))
                         if partition_by else {}, now, True, json.dumps({"numRecords": rows}))
               for r in results for relative, rows, size in r["files"]]
    account = summary(results)
    account["rows"] = {k.replace(NULL_FOLDER, "null"): n for k, n in account["rows"].items()}
    properties = CommitProperties(
        custom_metadata={SUMMARY_KEY: json.dumps(dict(account, job=job))},
        max_commit_retries=0,
        app_transactions=[Transaction(app_id, app_version)] if app_id is not None else None)
    uri = table_uri(out)
    kept = {relative for r in results for relative, _, _ in r["files"]}
    for _ in range(RACES):
        table = _table(out)
        if table is not None and app_id is not None:
            done = table.transaction_version(app_id)
            if done is not None and done >= app_version:  # a concurrent run committed it
                sweep(out, job, keep=())
                return None
        try:
            if table is None:
                create_table_with_add_actions(uri, deltalake.Schema.from_arrow(
                    table_schema(schema)), actions, mode="error",
                    partition_by=list(partition_by), commit_properties=properties)
            else:
                table.create_write_transaction(actions, "overwrite" if mode == "overwrite"
                                               else "append", table_schema(schema),
                                               list(partition_by),
                                               commit_properties=properties)
            break
        except deltalake.exceptions.DeltaError:
            if not _lost_race(uri, table):
                raise
    else:
        raise RuntimeError(f"{out}: {RACES} other commits came first: nothing committed")
    sweep(out, job, keep=kept)
    account["version"] = version(out)
    return account


def _lost_race(uri: str, table) -> bool:
    """After a commit failed: whether another commit took the version it was made for
    (the log's put-if-absent of that version's file decides), so that it must be made
    again on what the log holds now (where a commit of the same ``app_id`` may be)."""
    deltalake = _deltalake()
    try:
        now = deltalake.DeltaTable(uri).version()
    except deltalake.exceptions.TableNotFoundError:
        return False
    return table is None or now > table.version()


def running(out: str, job: str) -> str:
    """The marker file that says job ``job`` runs (a path of ``out``'s filesystem)."""
    return f"{filesystem(out)[1]}/_dcpfast-running-{job}"


def settle(out: str, job: str, files) -> bool:
    """In a task, once its ``files`` (paths in the table) are written: whether job
    ``job`` still runs; where it no longer does, the files are deleted."""
    store, root = filesystem(out)
    if store.get_file_info(running(out, job)).type == fs.FileType.File:
        return True
    for path in files:
        with contextlib.suppress(FileNotFoundError, OSError):
            store.delete_file(f"{root}/{path}")
    return False


def sweep(out: str, job: str, keep) -> None:
    """Delete the job's files that the table does not name (``keep``: those it does),
    and the partition folders left empty, once its ``running`` marker is gone."""
    store, root = filesystem(out)
    with contextlib.suppress(FileNotFoundError, OSError):
        store.delete_file(running(out, job))
    if store.get_file_info(root).type != fs.FileType.Directory:
        return
    marker = f"-{job}-"
    folders = set()
    for entry in store.get_file_info(fs.FileSelector(root, recursive=True)):
        relative = posixpath.relpath(entry.path, root)
        if relative.split("/")[0] == LOG or entry.type != fs.FileType.File:
            continue
        if marker in entry.base_name and relative not in keep:
            store.delete_file(entry.path)
            folders.add(posixpath.dirname(entry.path))
    for folder in sorted(folders, key=len, reverse=True):
        while folder != root and not store.get_file_info(fs.FileSelector(folder)):
            store.delete_dir(folder)
            folder = posixpath.dirname(folder)


def version(out: str) -> int:
    """The table's version."""
    return _deltalake().DeltaTable(table_uri(out)).version()
