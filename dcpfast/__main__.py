"""``python -m dcpfast`` and the ``dcpfast`` command: an interrupt while the command is
still starting ends it quietly by SIGINT, as one later does (the command's own
handling of signals takes over once it is loaded)."""

import signal


def main():
    """Run the dcpfast command."""
    before = signal.signal(signal.SIGINT, signal.SIG_DFL)
    from .cli import main as command
    signal.signal(signal.SIGINT, before)
    return command()


if __name__ == "__main__":
    main()
