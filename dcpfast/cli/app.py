"""The ``dcpfast`` command group and what every command shares: input options, opening an
input (a dump, a compressed dump or a capture, or ``-``), outputs, signals, and one-line
errors.

Every command reads raw dumps, gzip/zstd/lz4-compressed dumps and packet captures (told
apart by their magic numbers), or ``-`` for standard input. User errors (missing or
unreadable files, a closed standard input, malformed input in strict mode, bad options,
too little memory, an output that cannot be written) end with a one-line message and a
non-zero exit status, never a traceback. SIGINT (Ctrl-C), SIGTERM and SIGHUP end a
command by that signal (status 130, 143 and 129 in a shell) once it has removed what it
was writing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import threading

import click
import pyarrow as pa

from ..errors import MODES, DcpFormatError
from ..io import DEFAULT_BATCH_BYTES, open_stream
from ..io.dumps import iter_batches
from ..io.kinds import classify
from ..pcap import read_pcap
from ..testing import SAMPLE

#: An input argument: a file, or ``-`` for standard input. A file that is not there is
#: the command's error (``check_inputs``, ``reported``: status 1), not a usage error.
INPUT = click.Path(dir_okay=False, allow_dash=True)


#: What a command says when an allocation fails.
OUT_OF_MEMORY = "not enough memory"


class _Group(click.Group):
    """The command group: a command that runs out of memory, or whose standard output
    cannot be written, ends with a one-line error too, not a traceback; signals end it
    as ``ended_by_signals`` says."""

    def invoke(self, ctx):
        with ended_by_signals():
            try:
                result = super().invoke(ctx)
                flush_output()
                return result
            except MemoryError:
                raise click.ClickException(OUT_OF_MEMORY) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Examples: dcpfast info --sample; dcpfast head dump.dcp -n 5; "
                    "dcpfast convert dump.dcp -o frames.parquet. Every command's options: "
                    "dcpfast COMMAND --help. The guide: "
                    "https://github.com/dcpfast/dcpfast/tree/main/docs")
@click.version_option(package_name="dcpfast")
def main():
    """Decode Couchbase DCP frame dumps and captures."""


class _Ended(KeyboardInterrupt):
    """The process was asked to end (SIGINT, SIGTERM, SIGHUP) while a command ran: unwound
    as an interrupt is."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def ended_by_signals():
    """While a command runs, SIGTERM and SIGHUP (unless ignored, as under nohup) unwind
    it as an interrupt (Ctrl-C) does, so that what it was writing is removed on the way
    out; then the process ends by that signal, as it would have without dcpfast (an
    interrupt too: status 130 in a shell, not click's "Aborted!"). A signal that comes
    while a module is being imported waits for the import's end: an exception raised in
    a compiled module's initialisation is printed and lost, not unwound. The handlers
    before are back afterwards; outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def end(signum, frame):
        if caught:                                # a second signal waits for the cleanup
            return
        if _importing(frame):
            _send_later(signum)
            return
        caught.append(signum)
        raise _Ended(signum)

    ours = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    # a signal ignored (SIGHUP under nohup) stays ignored; Ctrl-C is taken over only from
    # Python's own handler
    before = {s: signal.signal(s, end) for s in ours if signal.getsignal(s) != signal.SIG_IGN}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        before[signal.SIGINT] = signal.signal(signal.SIGINT, end)
    try:
        yield
    except _Ended as e:
        _restore(before)
        before = {}
        _end_by(e.signum)
    except KeyboardInterrupt:                     # raised elsewhere than by ``end``
        _restore(before)
        before = {}
        _end_by(signal.SIGINT)
    finally:
        _restore(before)


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (under importlib's frames)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


#: How long a signal that came during an import waits before it is sent again.
_RESEND_S = 0.01


def _send_later(signum: int) -> None:
    timer = threading.Timer(_RESEND_S, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()


def _restore(handlers: dict) -> None:
    for s, handler in handlers.items():
        signal.signal(s, signal.SIG_DFL if handler is None else handler)


def _end_by(signum: int):
    """End the process by ``signum``, its default action (what was printed flushed
    first)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    raise SystemExit(128 + signum)         # where the signal does not end the process


def say(line: str = "", *, err: bool = False) -> None:
    """``click.echo``, an output that cannot be written (a full disk, a closed pipe)
    being the command's one-line error, not the input's."""
    try:
        click.echo(line, err=err)
    except BrokenPipeError:
        raise
    except OSError as e:
        raise click.ClickException(f"<stdout>: {e.strerror or e}") from None


def flush_output() -> None:
    """Flush standard output, as ``say`` reports a failure."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise click.ClickException(f"<stdout>: {e.strerror or e}") from None


#: The table formats ``convert`` and ``state`` write, by the output's extension.
TABLE_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "ipc", ".feather": "ipc",
                 ".ipc": "ipc", ".csv": "csv"}


def output_format(output: str, formats: dict[str, str], given: str | None = None, *,
                  option: str = "'-o' / '--output'") -> str:
    """The format ``output`` (given to ``option``) is written in: ``given``
    (``--format``; standard output, ``-``, needs it), else its extension's among
    ``formats``; else a usage error that lists them."""
    if given is not None:
        return given
    if output == "-":
        raise click.UsageError("writing to standard output (-o -) needs --format")
    found = formats.get(os.path.splitext(output)[1].lower())
    if found is None:
        raise click.BadParameter(f"{click.format_filename(output)}: unknown extension; use "
                                 f"one of {', '.join(formats)}", param_hint=option)
    return found


def check_output(output: str, files, *, force: bool = False, replaceable: bool = True) -> None:
    """Refuse, before anything is read or written, an output that is one of the inputs
    (the same file by device and inode: through a symbolic or hard link too, or as
    standard input): writing it would destroy it; and a file or directory that exists
    already, unless ``force`` (a device or a pipe, such as /dev/null, is written as it
    is); ``replaceable``: whether --force could replace it."""
    if output == "-":
        return
    try:
        out = os.stat(output)
    except OSError:
        return                                    # not there yet: no input is it
    for name in files:
        try:
            got = os.fstat(sys.stdin.fileno()) if name == "-" else os.stat(name)
        except (OSError, AttributeError, ValueError):
            continue
        if (got.st_dev, got.st_ino) == (out.st_dev, out.st_ino):
            raise click.ClickException(
                f"{click.format_filename(output)}: the output is also an input "
                f"({shown(name)}); writing it would destroy it: choose another output")
    if not force and (stat.S_ISREG(out.st_mode) or stat.S_ISDIR(out.st_mode)):
        how = ", or replace it with --force" if replaceable else ""
        raise click.ClickException(f"{click.format_filename(output)} already exists: "
                                   f"choose another output{how}")


def write_table(table, output: str, fmt: str) -> None:
    """``table`` to the file ``output`` as one Arrow IPC file (``fmt`` "ipc") or Parquet."""
    import pyarrow.parquet as pq

    if fmt == "ipc":
        with pa.OSFile(output, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, output)


@contextlib.contextmanager
def writing(output: str, *, remove: bool = True):
    """Write ``output`` inside: an error names it (not the input being read), and when the
    command does not finish (an error, an interrupt, SIGTERM or SIGHUP), a partial output
    it made (a regular file) is removed (unless not ``remove``: an inner write whose
    outer ``writing`` removes it once the file is closed)."""
    done = False
    try:
        yield
        done = True
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        reason = os.strerror(e.errno) if e.errno else (e.strerror or str(e))
        raise click.ClickException(f"{click.format_filename(output)}: {reason}") from None
    finally:
        if not done and remove and output != "-":
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.stat(output).st_mode):
                    os.unlink(output)


def threads_option(command):
    """The --threads option of the commands that decode."""
    return click.option(
        "--threads", type=click.IntRange(min=1), default=None,
        help="Threads that read and decode (default: the cores idle now, at most 8; no "
             "more than the cores this process may use).")(command)


def scan_options(command):
    """The --collections and --errors options every reading command takes."""
    command = click.option(
        "--errors", type=click.Choice(MODES), default="strict",
        show_default=True, help="Stop at the first malformed frame, or skip damage.")(command)
    return click.option(
        "--collections/--no-collections", default=None,
        help="Whether keys carry a collection id (default: infer from the stream).")(command)


def sample_option(command):
    """The --sample flag of the reading commands: the dump bundled with dcpfast."""
    return click.option("--sample", is_flag=True, help="Read the dump bundled with dcpfast "
                        "(the server's side of a small DCP conversation).")(command)


def inputs(files, sample: bool, *, check: bool = True, one: bool = False) -> list[str]:
    """The inputs named, then the bundled sample when asked for: at least one (exactly one
    with ``one``), and with ``check`` each one there (else a one-line error and status 1,
    before any output)."""
    names = list(files) + ([str(SAMPLE)] if sample else [])
    if one and len(names) != 1:
        raise click.UsageError("give a FILE, or --sample" if not names else
                               "give one FILE or --sample, not both")
    if not names:
        raise click.UsageError("give one or more FILEs, or --sample")
    if check:
        check_inputs(names)
    return names


def check_inputs(names) -> None:
    """A one-line error (status 1) for the first input that cannot be opened."""
    for name in names:
        if name != "-":
            try:
                os.stat(name)
            except OSError as e:
                raise click.ClickException(f"{name}: {e.strerror or e}") from None


def shown(name: str) -> str:
    """How an input is named in messages (bytes of a name that are not UTF-8 replaced)."""
    return "<stdin>" if name == "-" else click.format_filename(name)


class Input:
    """One input opened for reading: its (decompressed) stream and what it holds."""

    def __init__(self, stream):
        self.stream = stream
        #: Whether the input is a packet capture (else DCP frames).
        self.capture = classify(stream).kind.capture
        #: The codec the input was compressed with, or None.
        self.compression = stream.codec

    def batches(self, *, collections, columns, errors, batch_bytes=DEFAULT_BATCH_BYTES,
                threads=None):
        if self.capture:
            return read_pcap(self.stream, collections=collections, columns=columns,
                             errors=errors, batch_bytes=batch_bytes)
        return iter_batches(self.stream, batch_bytes, collections=collections,
                            columns=columns, errors=errors, threads=threads)


@contextlib.contextmanager
def opened(name: str, errors: str):
    """The input ``name`` (``-``: standard input) as an ``Input``."""
    if name == "-" and sys.stdin is None:
        raise click.ClickException(f"{shown(name)}: standard input is closed")
    # standard input unbuffered: one read per call, so that a signal that comes between
    # two reads is handled before the next one (a buffered reader loops in C)
    raw = getattr(sys.stdin.buffer, "raw", sys.stdin.buffer) if name == "-" else name
    with open_stream(raw, errors=errors) as stream:
        yield Input(stream)


#: What a strict command adds to the error of damaged input.
SKIP_HINT = " (--errors skip keeps every intact frame)"
#: How the library's errors name skip mode, and how the command line names it.
_LIBRARY_SKIP, _COMMAND_SKIP = 'errors="skip"', "--errors skip"


@contextlib.contextmanager
def reported(name: str, errors: str | None = None):
    """Turn malformed input and I/O failures into a clean message and exit status 1; in
    strict mode (``errors``) the message says how to keep going."""
    try:
        yield
    except DcpFormatError as e:
        message = str(e)
        hint = SKIP_HINT if errors == "strict" and _LIBRARY_SKIP not in message else ""
        message = message.replace(_LIBRARY_SKIP, _COMMAND_SKIP)
        raise click.ClickException(f"{shown(name)}: {message}{hint}") from None
    except BrokenPipeError:
        raise
    except OSError as e:
        raise click.ClickException(f"{shown(name)}: {e.strerror or e}") from None
    except MemoryError:
        raise click.ClickException(f"{shown(name)}: {OUT_OF_MEMORY}") from None


def at_seqno(ctx, param, value):
    """``N`` (every vbucket) or ``VB:N[,VB:N...]``."""
    if value is None:
        return None
    try:
        if ":" not in value:
            return int(value)
        pairs = (part.split(":") for part in value.split(",") if part.strip())
        return {int(vb): int(seqno) for vb, seqno in pairs}
    except ValueError:
        raise click.BadParameter("expected N or VB:N[,VB:N...]") from None
