"""The ``openqna`` command."""
