"""openqna: self-hosted knowledge-base question answering."""

__version__ = "0.1.0"
