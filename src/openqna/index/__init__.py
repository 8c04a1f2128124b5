"""Derived indexes over a knowledge base's records: vectors, postings, ANN, saved indexes, the cache."""
