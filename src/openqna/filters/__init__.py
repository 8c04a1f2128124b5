"""The filter language: one AST, ``where_str`` parsing, its reference semantics, numpy masks and SQL."""
