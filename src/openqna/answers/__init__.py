"""Answers inside answers: precise spans, short spans, and the extractive completer."""
