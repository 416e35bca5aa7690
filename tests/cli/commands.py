"""What the command's tests share: the command run in this process, a clean ending, the
codecs every input may come in, and the bundled sample's frame count as the command
prints it."""

from __future__ import annotations

import gzip

from click.testing import CliRunner

import dcpfast
from dcpfast.cli import main
from dcpfast.testing import SAMPLE


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def clean(result, code):
    """The command ended with ``code``, with no traceback and no exception but its exit."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _zstd(data):
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return zstd.compress(data[:3000]) + zstd.compress(data[3000:])


def _lz4(data):
    import lz4.frame
    return lz4.frame.compress(data[:3000]) + lz4.frame.compress(data[3000:])


#: Each codec, by extension: the data in two compressed frames.
PACK = {"gz": lambda d: gzip.compress(d[:3000]) + gzip.compress(d[3000:]), "zst": _zstd,
        "lz4": _lz4}
#: The frames of the bundled sample, as the command counts them.
SAMPLE_FRAMES = f"{len(dcpfast.read(SAMPLE)):,}"
