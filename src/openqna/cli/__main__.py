"""``python -m openqna.cli``: the ``openqna`` command."""

from openqna.cli.main import main

main()
