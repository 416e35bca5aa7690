"""The ``dcpfast`` command group and what every command shares: input options, opening an
input (a dump, a compressed dump or a capture, or ``-``), outputs, signals, text from a
dump shown safely, and one-line errors.

Every command reads raw dumps, gzip/zstd/lz4-compressed dumps and packet captures (told
apart by their magic numbers), or ``-`` for standard input; a directory is one dump cut
into pieces, its files joined in name order, and so are the FILES of a command given
``--pieces`` (``pieces_option``, ``inputs``: one input, opened as one stream). User
errors (missing or unreadable files, a closed standard input, malformed input in strict
mode, bad options, too little memory, an output that cannot be written) end with a
one-line message and a non-zero exit status, never a traceback. SIGINT (Ctrl-C), SIGTERM
and SIGHUP end a command by that signal (status 130, 143 and 129 in a shell) once it has
removed what it was writing; a standard output whose reader is gone ends it by SIGPIPE
(141), silently. Every file a command writes is written beside it and renamed into place
once whole (``atomic_output``): the previous output stays as it was until then, whatever
ends the command. Keys and names from a dump, and file names, are printed escaped (``printable``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import NoReturn

import click
import pyarrow as pa

from ..errors import MODES, DcpFormatError, names_other_format, text
from ..formats import other_format
from ..io import DEFAULT_BATCH_BYTES
from ..io.dumps import iter_batches
from ..io.opening import Input as OpenedInput
from ..io.opening import open_input
from ..pcap import read_pcap
from ..testing import SAMPLE
from ..threads import process_runs

#: An input argument: a file, or ``-`` for standard input. A file that is not there is
#: the command's error (``check_inputs``, ``reported``: status 1), not a usage error.
INPUT = click.Path(allow_dash=True)


#: What a command says when an allocation fails.
OUT_OF_MEMORY = "not enough memory"


class _Group(click.Group):
    """The command group: a command that runs out of memory, or whose standard output
    cannot be written, ends with a one-line error too, not a traceback; one whose standard
    output's reader is gone ends by SIGPIPE (``_reader_gone``); signals end it as
    ``ended_by_signals`` says; an error's message is shown as ``terminal_safe`` makes it."""

    def invoke(self, ctx):
        with ended_by_signals():
            try:
                try:
                    result = super().invoke(ctx)
                except click.exceptions.Exit:     # a status of its own (diff's 1)
                    flush_output()
                    raise
                except click.ClickException as e:
                    e.message = terminal_safe(e.message, lines=False)
                    raise
                flush_output()
                return result
            except MemoryError:
                raise click.ClickException(OUT_OF_MEMORY) from None
            except BrokenPipeError:
                _reader_gone()


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
        if _held is not None:                     # outputs being renamed into place
            _held.append(signum)
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


#: The signals that came while ``_signals_held`` held them (None: not holding).
_held: list[int] | None = None


@contextlib.contextmanager
def _signals_held():
    """The signals ``ended_by_signals`` handles wait for the block's end (outputs renamed
    into place, all of them or none), then the first of them ends the command."""
    global _held
    _held = []
    try:
        yield
    finally:
        came, _held = _held, None
        if came:
            signal.raise_signal(came[0])


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


def _end_by(signum: int) -> NoReturn:
    """End the process by ``signum``, its default action (what was printed flushed
    first)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    while _HELD:                             # what standard error holds aside, written
        _give_back(drop_panics=False)
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)
    raise SystemExit(128 + signum)         # where the signal does not end the process


#: What a shell shows as the status of a command ended by SIGPIPE (where there is none).
_SIGPIPE_STATUS = 141


def _reader_gone() -> NoReturn:
    """Standard output's reader is gone (``dcpfast diff a b | head -1``): end as the Unix
    tools do, by SIGPIPE (status 141 in a shell), without a word; what is still buffered
    for standard output is dropped."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    signum = getattr(signal, "SIGPIPE", None)
    if signum is None:
        raise SystemExit(_SIGPIPE_STATUS)
    _end_by(signum)


#: The first line of what Rust's panic hook writes to standard error, and its last one.
_PANIC = re.compile(r"thread '[^']*'( \(\d+\))? panicked at ")
_PANIC_END = "note: "


@contextlib.contextmanager
def native_panics_hidden() -> Iterator[None]:
    """Run the block with standard error's file descriptor held aside: where the block
    fails, the panic reports a native library wrote there are dropped (deltalake's
    writer panics in a thread of its own after a write that failed, which it also raises,
    and which the command says in its one line); everything else is written back."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as held:
        _HELD.append((os.dup(2), held))
        os.dup2(held.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            if _HELD and _HELD[-1][1] is held:     # not given back by a signal meanwhile
                _give_back(drop_panics=failed)


#: Standard error's descriptor as it was, and what was written meanwhile, for each
#: ``native_panics_hidden`` under way (innermost last).
_HELD: list = []


def _give_back(*, drop_panics: bool) -> None:
    """Standard error's descriptor back as the innermost ``native_panics_hidden`` found
    it, and what was written meanwhile written there (``drop_panics``: less the panic
    reports)."""
    saved, held = _HELD.pop()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    held.seek(0)
    said = held.read().decode(errors="replace")
    kept = _without_panics(said) if drop_panics else said
    if kept:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(kept)
            sys.stderr.flush()


def _without_panics(said: str) -> str:
    """``said`` without the panic reports in it (from a ``_PANIC`` line to the first
    ``_PANIC_END`` line after it, or to the end), nor the blank lines before them."""
    kept: list[str] = []
    inside = False
    for line in said.splitlines(keepends=True):
        if inside:
            inside = not line.startswith(_PANIC_END)
        elif _PANIC.match(line):
            inside = True
            while kept and not kept[-1].strip():
                kept.pop()
        else:
            kept.append(line)
    return "".join(kept)


class Failed(click.ClickException):
    """An error of a command whose exit status 1 means it found something (``diff``,
    ``audit``): one line, exit status 2."""

    exit_code = 2


@contextlib.contextmanager
def failing_with_status_2():
    """Inside, every error but a usage error or a closed pipe ends the command as
    ``Failed``: one line and status 2, never 1 (which says the command found
    something), whatever raised it."""
    try:
        yield
    except (click.UsageError, BrokenPipeError):
        raise
    except click.ClickException as e:
        raise Failed(e.format_message()) from None
    except (DcpFormatError, OSError, ValueError, TypeError) as e:
        raise Failed(str(e)) from None
    except MemoryError:
        raise Failed(OUT_OF_MEMORY) from None
    except Exception as e:
        raise Failed(f"{type(e).__name__}: {e}") from None


def say(line: str = "", *, err: bool = False) -> None:
    """``click.echo`` of ``line`` made safe for a terminal (``terminal_safe``), an output
    that cannot be written (a full disk) being the command's one-line error, not the
    input's; a closed pipe is ``_reader_gone``'s."""
    try:
        click.echo(terminal_safe(line), err=err)
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


#: The formats of a table file (``state``, ``diff``, ``audit``), by the output's extension.
FILE_TABLES = {".parquet": "parquet", ".pq": "parquet", ".arrow": "ipc", ".feather": "ipc",
               ".ipc": "ipc"}
#: The table formats ``convert`` writes, by the output's extension.
TABLE_FORMATS = {**FILE_TABLES, ".csv": "csv"}


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
        raise click.BadParameter(f"{shown(output, output=True)}: unknown extension; use "
                                 f"one of {', '.join(formats)}", param_hint=option)
    return found


def check_output(output: str | Sequence[str], files, *, force: bool = False,
                 replaceable: bool = True) -> None:
    """Refuse, before anything is read or written, an output (``output``: one, or the
    several a command writes) that is one of the inputs (the same file by device and
    inode: through a symbolic or hard link too, or as standard input): writing it would
    destroy it; two outputs that are one file (a link to the other, dangling or not);
    and a file or directory that exists already, unless ``force`` (a device or a pipe,
    such as /dev/null, is written as it is); ``replaceable``: whether --force could
    replace it."""
    outputs = [output] if isinstance(output, str) else list(output)
    for i, one in enumerate(outputs):
        for other in outputs[:i]:
            if _same_file(one, other):
                raise click.ClickException(f"{shown(one, output=True)}: the same file as "
                                           f"{shown(other, output=True)}: choose two outputs")
        _check_one(one, files, force=force, replaceable=replaceable)


def _same_file(a: str, b: str) -> bool:
    """Whether the outputs ``a`` and ``b`` name one file (that may not exist yet)."""
    if "-" in (a, b):
        return a == b
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        one, other = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def _check_one(output: str, files, *, force: bool, replaceable: bool) -> None:
    if output == "-":
        return
    try:
        out = os.stat(output)
    except OSError:
        return                                    # not there yet: no input is it
    for name in paths_of(files):
        try:
            got = os.fstat(sys.stdin.fileno()) if name == "-" else os.stat(name)
        except (OSError, AttributeError, ValueError):
            continue
        if (got.st_dev, got.st_ino) == (out.st_dev, out.st_ino):
            raise click.ClickException(
                f"{shown(output, output=True)}: the output is also an input "
                f"({shown(name)}); writing it would destroy it: choose another output")
    if not force and (stat.S_ISREG(out.st_mode) or stat.S_ISDIR(out.st_mode)):
        how = ", or replace it with --force" if replaceable else ""
        raise click.ClickException(f"{shown(output, output=True)} already exists: "
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
def writing(output: str):
    """Write ``output`` inside: an error (a full disk, a file too large) is the output's,
    named by it, not the input's being read."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else (e.strerror or str(e))
        raise click.ClickException(f"{shown(output, output=True)}: {reason}") from None


#: The temporary an output is written to, beside the file it will replace:
#: ``.NAME.dcpfast-PID-XXXXXXXX.tmp`` (PID: the process writing it).
_TEMPORARY = ".{name}.dcpfast-{pid}-{token}.tmp"
_TEMPORARY_OF = r"\.{name}\.dcpfast-(\d+)-[0-9a-f]{{8}}\.tmp"
#: The bytes of an output's name its temporary's name keeps (within a name's 255).
_NAME_BYTES = 200


@contextlib.contextmanager
def atomic_output(*outputs: str) -> Iterator[list[str]]:
    """The one way a command writes files: ``outputs``, all of them or none. Inside, each
    is written to the path yielded for it: a new temporary file beside it (where a
    symbolic link points), made at once, so that an output that cannot be written fails
    the command before its work. Once the block ends, each temporary is flushed to disk
    and renamed over its output (keeping the mode of the file it replaces; a signal that
    comes during the renames waits for their end). Until then every output is as it
    was: an error, an interrupt or a signal removes the temporaries instead; a SIGKILL
    leaves them, and the next command that writes that output removes them once their
    process is gone. Standard output (``-``) and what is not a regular file (a device, a
    pipe, a directory) are written in place: the path yielded is the output's own."""
    made: list[tuple[str, str | None]] = []          # (output, its temporary or None)
    done = False
    try:
        for output in outputs:
            with writing(output):
                made.append((output, _temporary(output)))
        yield [output if temporary is None else temporary for output, temporary in made]
        for output, temporary in made:
            if temporary is not None:
                with writing(output):
                    _flushed(temporary)
        with _signals_held():
            for output, temporary in made:
                if temporary is not None:
                    with writing(output):
                        _renamed(temporary, os.path.realpath(output))
            done = True
    finally:
        if not done:
            for _, temporary in made:
                if temporary is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(temporary)


def _temporary(output: str) -> str | None:
    """A new empty temporary file for ``output``, beside the file it names, its older
    temporaries swept; None where ``output`` is written in place."""
    if output == "-":
        return None
    target = os.path.realpath(output)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.stat(target).st_mode):
            return None
    folder, name = os.path.split(target)
    name = os.fsdecode(os.fsencode(name)[:_NAME_BYTES])
    _sweep(folder, name)
    while True:
        path = os.path.join(folder, _TEMPORARY.format(name=name, pid=os.getpid(),
                                                      token=secrets.token_hex(4)))
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return path


def _sweep(folder: str, name: str) -> None:
    """Remove the temporaries of the output ``name`` in ``folder`` whose process is gone
    (killed while it wrote), never one another command is writing."""
    pattern = re.compile(_TEMPORARY_OF.format(name=re.escape(name)))
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        found = pattern.fullmatch(entry)
        if found is not None and not process_runs(int(found.group(1))):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


def _flushed(path: str) -> None:
    """The file at ``path`` written to disk."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _renamed(temporary: str, target: str) -> None:
    """``temporary`` in place of ``target``, with the mode ``target`` had, the folder's
    entry written to disk."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(temporary, stat.S_IMODE(os.stat(target).st_mode))
    os.replace(temporary, target)
    if os.name == "posix":
        with contextlib.suppress(OSError):
            fd = os.open(os.path.dirname(target), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


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


#: The help of --pieces, the same on every command that reads dumps.
PIECES_HELP = ("FILES are pieces of one dump, joined in the order given as a directory's "
               "files are.")


def pieces_option(command):
    """The --pieces flag of the commands that read dumps: their FILES read as one stream,
    as a directory's files are (``inputs``)."""
    return click.option("--pieces", is_flag=True, help=PIECES_HELP)(command)


#: An input of a command: a FILE (``-``: standard input; a directory: its files as one
#: stream), or the FILES given with --pieces, read as one stream in the order given.
Name = str | tuple[str, ...]


def inputs(files, sample: bool, *, check: bool = True, one: bool = False,
           pieces: bool = False) -> list[Name]:
    """The inputs named, then the bundled sample when asked for: at least one (exactly one
    with ``one``), and with ``check`` each one there (else a one-line error and status 1,
    before any output). With ``pieces`` (--pieces) they are one input: the pieces of one
    dump, joined in the order given (a tuple of their names; one name stays a name)."""
    names = list(files) + ([str(SAMPLE)] if sample else [])
    if pieces and "-" in names:
        raise click.UsageError("--pieces joins files: standard input (-) cannot be a piece")
    found: list[Name] = [tuple(names)] if pieces and len(names) > 1 else list(names)
    if one and len(found) != 1:
        raise click.UsageError("give a FILE, or --sample" if not names else
                               "give one FILE or --sample, not both" if sample else
                               "give one FILE, or the pieces of one dump with --pieces")
    if not names:
        raise click.UsageError("give one or more FILEs, or --sample")
    if check:
        check_inputs(names)
    return found


def paths_of(names: Sequence[Name]) -> list[str]:
    """Every path among ``names``, pieces one by one."""
    return [path for name in names for path in ((name,) if isinstance(name, str) else name)]


def check_inputs(names: Sequence[Name]) -> None:
    """A one-line error (status 1) for the first input that cannot be opened."""
    for name in paths_of(names):
        if name != "-":
            try:
                os.stat(name)
            except OSError as e:
                raise click.ClickException(f"{name}: {e.strerror or e}") from None


#: The pieces named one by one in messages; more are shown as the first and the last.
_SHOWN_PIECES = 4


def shown(name: Name, *, output: bool = False) -> str:
    """How a file is named in messages: ``printable``, the bytes of a name that are not
    UTF-8 replaced; ``-`` is standard input (an ``output``'s: standard output); pieces
    (--pieces) joined by `` + ``."""
    if isinstance(name, tuple):
        if len(name) > _SHOWN_PIECES:
            return f"{shown(name[0])} + ... + {shown(name[-1])} ({len(name):,} pieces)"
        return " + ".join(shown(piece) for piece in name)
    if name == "-":
        return "<stdout>" if output else "<stdin>"
    return printable(click.format_filename(name))


def printable(text: str | bytes) -> str:
    """``text`` (a key, a collection or scope name, a file name: anything a dump or a user
    holds) as one line that a terminal shows and never acts on: every character that is
    not printable (C0 and C1 controls, so ESC and every escape sequence; line and
    paragraph separators, format characters, lone surrogates) and every byte that is not
    UTF-8 written as Python writes it in a string (``\\x1b``, ``\\u2028``, ``\\xff``),
    a backslash doubled so that what is shown reads back one way."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(c if c.isprintable() and c != "\\" else _escaped(c) for c in text)


#: The characters a terminal acts on: C0 controls, DEL and C1 controls, and lone surrogates
#: (a name's bytes that are not UTF-8).
_ACTED_ON = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: What ``terminal_safe`` keeps of them in text of several lines.
_LINES = "\n\t"


def terminal_safe(text: str, *, lines: bool = True) -> str:
    """``text`` (a line or, with ``lines``, several) with the characters a terminal acts
    on escaped as ``printable`` escapes them (but line feeds and tabs of text of several
    lines), so that nothing a dump holds reaches the terminal raw, whatever printed it.
    What ``printable`` made is unchanged."""
    if _ACTED_ON.search(text) is None:
        return text
    keep = _LINES if lines else ""
    return _ACTED_ON.sub(lambda m: m.group() if m.group() in keep else _escaped(m.group()),
                         text)


def _escaped(c: str) -> str:
    """One character as ``printable`` shows it."""
    if c == "\\":
        return "\\\\"
    if 0xDC80 <= ord(c) <= 0xDCFF:                 # a byte that is not UTF-8
        return f"\\x{ord(c) - 0xDC00:02x}"
    return c.encode("unicode_escape").decode("ascii")


class Input:
    """One input opened once (``io.opening``): its (decompressed) stream, what it holds,
    its batches, and (opened with ``again``) the same batches once more."""

    def __init__(self, opened: OpenedInput):
        self._opened = opened
        self.stream = opened.stream
        #: Whether the input is a packet capture (else DCP frames).
        self.capture = opened.capture is not None
        #: The codec the input was compressed with, or None.
        self.compression = opened.codec

    def batches(self, *, collections, columns, errors, batch_bytes=DEFAULT_BATCH_BYTES,
                threads=None, stream=None):
        """The batches of the input (of ``stream``: its bytes read ``again``)."""
        stream = self.stream if stream is None else stream
        if self.capture:
            return read_pcap(stream, collections=collections, columns=columns,
                             errors=errors, batch_bytes=batch_bytes)
        batches = iter_batches(stream, batch_bytes, collections=collections,
                               columns=columns, errors=errors, threads=threads)
        return _some_frames(batches, stream.head) if errors == "skip" else batches

    def done(self) -> None:
        """The first read is over (``io.opening.Input.done``)."""
        self._opened.done()

    def again(self):
        """The input's stream once more, from its start (``io.opening.Input.again``)."""
        return self._opened.again()


def _some_frames(batches, head: bytes):
    """``batches``, then ``DcpFormatError`` where they held no frame but skipped bytes: in
    skip mode an input of no DCP frame at all (text, a table, noise) is an error, not an
    empty answer."""
    frames = skipped = 0
    for batch in batches:
        frames += len(batch)
        skipped += sum(region.length for region in batch.errors)
        yield batch
    if not frames and skipped:
        what = other_format(head)
        raise DcpFormatError(0, text("no_frames", size=skipped, what=text(
            "other_format", what=what) if what else ""))


@contextlib.contextmanager
def opened(name: Name, errors: str, *, again: bool = False):
    """The input ``name`` (``-``: standard input; pieces: one stream, ``io.opening``) as an
    ``Input``, opened once; with ``again``, one that can be read a second time (a pipe's,
    a FIFO's and standard input's bytes are kept in a temporary file as they are read)."""
    if isinstance(name, tuple):
        with open_input(list(name), errors=errors, again=again) as found:
            yield Input(found)
        return
    if name == "-" and sys.stdin is None:
        raise click.ClickException(f"{shown(name)}: standard input is closed")
    # standard input unbuffered: one read per call, so that a signal that comes between
    # two reads is handled before the next one (a buffered reader loops in C)
    raw = getattr(sys.stdin.buffer, "raw", sys.stdin.buffer) if name == "-" else name
    with open_input(raw, errors=errors, again=again) as found:
        yield Input(found)


#: What a strict command adds to the error of damaged input.
SKIP_HINT = " (--errors skip keeps every intact frame)"
#: How the library's errors name skip mode, and how the command line names it.
_LIBRARY_SKIP, _COMMAND_SKIP = 'errors="skip"', "--errors skip"


@contextlib.contextmanager
def reported(name: Name, errors: str | None = None):
    """Turn malformed input and I/O failures into a clean message and exit status 1; in
    strict mode (``errors``) the message says how to keep going."""
    try:
        yield
    except DcpFormatError as e:
        message = str(e)
        hint = SKIP_HINT if errors == "strict" and _LIBRARY_SKIP not in message and \
            not names_other_format(message) else ""
        message = message.replace(_LIBRARY_SKIP, _COMMAND_SKIP)
        raise click.ClickException(f"{shown(name)}: {message}{hint}") from None
    except BrokenPipeError:
        raise
    except OSError as e:
        where = e.filename if isinstance(name, tuple) and isinstance(e.filename, str) \
            else name                                 # the piece that failed
        raise click.ClickException(f"{shown(where)}: {e.strerror or e}") from None
    except MemoryError:
        raise click.ClickException(f"{shown(name)}: {OUT_OF_MEMORY}") from None


def at_seqno(ctx, param, value):
    """``N`` (every vbucket) or ``VB:N[,VB:N...]``, each vbucket once."""
    if value is None:
        return None
    try:
        if ":" not in value:
            return int(value)
        pairs = [tuple(map(int, part.split(":"))) for part in value.split(",") if part.strip()]
        chosen = {vb: seqno for vb, seqno in pairs}
    except ValueError:
        raise click.BadParameter("expected N or VB:N[,VB:N...]") from None
    if len(chosen) < len(pairs):
        twice = next(vb for i, (vb, _) in enumerate(pairs) if vb in dict(pairs[:i]))
        raise click.BadParameter(f"vbucket {twice} is given twice")
    return chosen
