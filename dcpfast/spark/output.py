"""The output directory of the Parquet job: what may be there before, where tasks stage
their files, and how a job's files are committed or given up.

Task attempts write under ``OUT/_temporary/<job>/<attempt>/``. The commit (in the
driver's process, once every task has succeeded, with one result per partition: that of
the attempt whose result Spark returned) moves those files into place and writes an empty
``_SUCCESS`` (empty, so that readers that take every file of a directory, polars among
them, pass over it); ``finish`` deletes the staging directory, with the files of every
other attempt. Until the commit nothing of the job is outside ``_temporary``, which every
reader skips. A job's staging directory holds its ``owner`` (host and process): the
staging directory of a job whose process is gone (killed: SIGKILL, an OOM kill, a lost
driver) is removed by the next job at ``out`` (``prepare``), which it never blocks.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import socket
import time
import uuid

from pyarrow import fs

from ..errors import text
from ..threads import process_runs
from .source import filesystem

STAGING = "_temporary"
SUCCESS = "_SUCCESS"
#: The file in a job's staging directory that names the process running the job.
OWNER = "_owner"
MODES = ("error", "errorifexists", "overwrite", "append")


def _entries(store, where: str, recursive: bool = False):
    return store.get_file_info(fs.FileSelector(where, recursive=recursive))


#: The name of a file the job writes: ``part-<partition>-<job>-<n>.parquet``.
OURS = re.compile(r"part-\d{5}-[0-9a-f]{16}-\d+\.parquet")


def _ours(name: str) -> bool:
    """A file the job writes: its Parquet files and ``_SUCCESS``."""
    return name == SUCCESS or OURS.fullmatch(name) is not None


def check(out: str, mode: str) -> bool:
    """Whether ``out`` exists; raises when ``mode`` does not allow what is there.

    ``error``: ``out`` must not exist or be an empty directory. ``overwrite``: what is
    there must be what a job of dcpfast wrote (its Parquet files, named as it names them,
    in ``column=value`` directories, ``_SUCCESS``, staging directories), never anything
    else: a Parquet file of another writer is refused too. ``append``: anything.
    """
    store, root, info = located(out, mode)
    if info.type == fs.FileType.NotFound:
        return False
    if info.type != fs.FileType.Directory:
        raise FileExistsError(text("output_exists", out=out) if mode.startswith("error")
                              else text("output_not_dataset", out=out, name=info.base_name))
    if mode.startswith("error") and [e for e in _entries(store, root) if e.base_name !=
                                     STAGING or _running_jobs(store, root)]:
        raise FileExistsError(text("output_exists", out=out))
    if mode == "overwrite":
        for entry in _entries(store, root, recursive=True):
            inside = posixpath.relpath(entry.path, root).split("/")
            if inside[0] == STAGING:
                continue
            if entry.type == fs.FileType.Directory:
                ok = "=" in entry.base_name
            else:
                ok = all("=" in part for part in inside[:-1]) and _ours(inside[-1])
            if not ok:
                said = "output_not_ours" if inside[-1].endswith(".parquet") else \
                    "output_not_dataset"
                raise FileExistsError(text(said, out=out, name="/".join(inside)))
    return True


def located(out: str, mode: str):
    """``out``'s filesystem, its root there and what is at it (``FileInfo``), once
    ``mode`` is known (one of ``MODES``) and ``out`` is not a dangling link."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    store, root = filesystem(out)
    refuse_dangling(store, root, out)
    return store, root, store.get_file_info(root)


def refuse_dangling(store, root: str, out: str) -> None:
    """An output that is a dangling symbolic link: refused, with the link's target (a
    directory made there would fail with the operating system's bare "File exists")."""
    if store.type_name == "local" and os.path.islink(root) and not os.path.exists(root):
        raise FileExistsError(f"{out}: " + text("dangling_link", target=os.readlink(root)))


def prepare(out: str, mode: str) -> bool:
    """``check`` ``out``, and create it when it does not exist; whether it was created
    (a failed job removes it again). The staging directories of jobs whose process is
    gone are removed."""
    store, root = filesystem(out)
    if check(out, mode):
        stage = f"{root}/{STAGING}"
        if store.get_file_info(stage).type == fs.FileType.Directory:
            running = _running_jobs(store, root)
            for entry in _entries(store, stage):
                if entry.base_name not in running:
                    store.delete_dir(entry.path)
            drop_if_empty(store, stage)
        return False
    store.create_dir(root, recursive=True)
    return True


def _running_jobs(store, root: str) -> set[str]:
    """The names in ``root``'s staging directory of the jobs that may still run: all
    but those whose ``owner`` is gone (``abandoned``) and empty ones (a job killed
    before it wrote its owner)."""
    stage = f"{root}/{STAGING}"
    if store.get_file_info(stage).type != fs.FileType.Directory:
        return set()
    return {e.base_name for e in _entries(store, stage)
            if e.type != fs.FileType.Directory or (_entries(store, e.path) and
                                                   not abandoned(store, f"{e.path}/{OWNER}"))}


def owner() -> bytes:
    """What a job's marker holds: the host and process that run the job (JSON)."""
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode()


def abandoned(store, marker: str) -> bool:
    """Whether the job whose marker (``owner``) is the file ``marker`` was abandoned: its
    process, on this host, is gone. A marker of another host, or one that does not say,
    is a job that may run."""
    try:
        with store.open_input_stream(marker) as f:
            said = json.loads(f.read())
        host, pid = said["host"], int(said["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return host == socket.gethostname() and not process_runs(pid)


def new_job() -> str:
    """A new job's name (16 hex digits), part of every file name it writes."""
    return uuid.uuid4().hex[:16]


def start(out: str) -> str:
    """A new job's name, its staging directory made (task attempts make theirs in it)
    with its ``owner``."""
    job = new_job()
    store, _ = filesystem(out)
    store.create_dir(staging(out, job), recursive=True)
    with store.open_output_stream(f"{staging(out, job)}/{OWNER}") as f:
        f.write(owner())
    return job


def staging(out: str, job: str) -> str:
    """The staging directory of job ``job`` (a path of ``out``'s filesystem)."""
    return f"{filesystem(out)[1]}/{STAGING}/{job}"


def commit(out: str, job: str, mode: str, results) -> None:
    """Put the files of the committed task attempts in place: ``results`` is one
    ``(attempt directory, task result)`` per partition (``parquet.TaskWriter.result``)."""
    store, root = filesystem(out)
    stage = staging(out, job)
    if mode == "overwrite":
        for entry in _entries(store, root):
            if entry.base_name == STAGING:
                continue
            if entry.type.name == "Directory":
                store.delete_dir(entry.path)
            else:
                store.delete_file(entry.path)
    made = set()
    for attempt, result in results:
        for relative, _, _ in result["files"]:
            folder = posixpath.dirname(f"{root}/{relative}")
            if folder not in made:
                store.create_dir(folder, recursive=True)
                made.add(folder)
            store.move(f"{stage}/{attempt}/{relative}", f"{root}/{relative}")
    with store.open_output_stream(f"{root}/{SUCCESS}"):
        pass


def summary(results) -> dict:
    """The job's account, from its tasks' results: frames, input bytes, files, rows per
    partition folder, the damage skip mode stepped over (per piece), the tasks, the
    seconds they spent decoding and writing, and the dcpfast they ran (``workers``)."""
    rows: dict[str, int] = {}
    for r in results:
        for folder, n in r["rows"].items():
            rows[folder] = rows.get(folder, 0) + n
    return {"frames": sum(r["frames"] for r in results),
            "input_bytes": sum(r["input_bytes"] for r in results),
            "files": sum(len(r["files"]) for r in results),
            "output_bytes": sum(size for r in results for _, _, size in r["files"]),
            "rows": dict(sorted(rows.items(), key=lambda kv: _folder_key(kv[0]))),
            "skipped": sorted((s for r in results for s in r["skipped"]),
                              key=lambda s: (s["uri"], s["lo"])),
            "tasks": len(results), "task_seconds": sum(r["seconds"] for r in results),
            "dcpfast": sorted({r["dcpfast"] for r in results if "dcpfast" in r})}


def _folder_key(folder: str):
    """Partition folders in numeric order (``vbucket=-1``, ``vbucket=2``, ``vbucket=10``)."""
    values = [part.split("=", 1)[1] for part in folder.split("/") if "=" in part]
    return [int(v) if v.lstrip("-").isdigit() else -1 for v in values]


#: How long ``abort`` keeps deleting a staging directory that attempts still write into.
ABORT_PATIENCE = 60.0


def abort(out: str, job: str, patience: float = ABORT_PATIENCE) -> None:
    """Delete what the job's task attempts staged, and ``_temporary`` when it is empty.

    A cancelled job's attempts may go on writing for a moment (Spark stops waiting for a
    task before its Python worker stops): a deletion that meets a file made meanwhile is
    tried again, for ``patience`` seconds at most. Once the staging directory is gone an
    attempt cannot stage again, since it makes its directories one level at a time."""
    store, root = filesystem(out)
    stage = staging(out, job)
    deadline = time.monotonic() + patience
    while store.get_file_info(stage).type != fs.FileType.NotFound:
        try:
            store.delete_dir(stage)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    drop_if_empty(store, f"{root}/{STAGING}")


def finish(out: str, job: str, created: bool, committed: bool) -> None:
    """After the job: the staging directory deleted (what attempts that failed or lost
    staged goes with it), and ``out`` too when the job created it and failed."""
    store, root = filesystem(out)
    abort(out, job)
    if created and not committed:
        drop_if_empty(store, root)


def drop_if_empty(store, where: str) -> None:
    """Delete the directory ``where`` if it is empty."""
    info = store.get_file_info(where)
    if info.type == fs.FileType.Directory and not _entries(store, where):
        store.delete_dir(where)
