"""The ``dcpfast`` command group and what every command shares: input options, opening an
input (a dump, a compressed dump or a capture, or ``-``), and one-line errors.

Every command reads raw dumps, gzip/zstd/lz4-compressed dumps and packet captures (told
apart by their magic numbers), or ``-`` for standard input. User errors (missing or
unreadable files, a closed standard input, malformed input in strict mode, bad options,
too little memory) end with a one-line message and a non-zero exit status, never a
traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from ..errors import MODES, DcpFormatError
from ..io import DEFAULT_BATCH_BYTES, is_capture, open_stream
from ..io.dumps import iter_batches
from ..pcap import read_pcap
from ..testing import SAMPLE

#: An input argument: a file, or ``-`` for standard input. A file that is not there is
#: the command's error (``check_inputs``, ``reported``: status 1), not a usage error.
INPUT = click.Path(dir_okay=False, allow_dash=True)


#: What a command says when an allocation fails.
OUT_OF_MEMORY = "not enough memory"


class _Group(click.Group):
    """The command group: a command that runs out of memory ends with a one-line error
    too, not a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MemoryError:
            raise click.ClickException(OUT_OF_MEMORY) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dcpfast")
def main():
    """Decode Couchbase DCP frame dumps and captures."""


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


def inputs(files, sample: bool, *, check: bool = True) -> list[str]:
    """The inputs named, then the bundled sample when asked for: at least one, and with
    ``check`` each one there (else a one-line error and status 1, before any output)."""
    names = list(files) + ([str(SAMPLE)] if sample else [])
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
        self.capture = bool(is_capture(stream.head))
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


@contextlib.contextmanager
def reported(name: str):
    """Turn malformed input and I/O failures into a clean message and exit status 1."""
    try:
        yield
    except DcpFormatError as e:
        raise click.ClickException(f"{shown(name)}: {e}") from None
    except BrokenPipeError:
        raise
    except OSError as e:
        raise click.ClickException(f"{shown(name)}: {e.strerror or e}") from None
    except MemoryError:
        raise click.ClickException(f"{shown(name)}: {OUT_OF_MEMORY}") from None
