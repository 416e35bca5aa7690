"""``python -m dcpfast``: the dcpfast command."""

from .cli import main

main()
