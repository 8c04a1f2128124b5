"""What the index reads of a Markdown answer: its words, not its markup.

Answers are Markdown (imported documents keep their links, images, bold and code), but a URL is not
what a question asks about: ``[benefits website](http://www.microsoft.com)`` put "http", "www",
"microsoft" and "com" into BM25 and into the embedder's 256-token window, where they match questions
about Microsoft rather than about benefits.  The embedder and the analyzer read the link's text and
an image's alt text instead, without emphasis or code delimiters; the answer itself is returned as
written.  Regular expressions over inline markup only, not a Markdown parser: the index reads every
answer of a knowledge base, and a stray ``*`` left in costs nothing (the analyzer drops punctuation).
"""

from __future__ import annotations

import re

# [text](destination "title") and ![alt](src), the destination without spaces or with balanced parentheses
# The link text is bounded (1,000 characters, 2,000 of destination): unbounded, an answer of 25,000 unclosed
# "[" made each search scan to the end from every one of them.
_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]{0,1000}\]){0,1000})\]\((?:[^()\s]|\([^()\s]{0,2000}\)){0,2000}"
                   r"(?:\s+\"[^\"]{0,1000}\")?\)")
# Emphasis and code delimiters: "*" and "_" against a word's edge ("**Save**", "_i_", not "5 * 3" or
# "snake_case"), and every backtick.  Removed alone, not matched in pairs: pairs cost a scan per opening
# delimiter, and a lone one left over is as harmless as a removed one.
_DELIMITERS = re.compile(r"`+|\*+(?=\S)|(?<=\S)\*+|(?<!\w)_+(?=\S)|(?<=\S)_+(?!\w)")


def plain_text(markdown: str) -> str:
    """``markdown``'s inline markup reduced to the words a reader sees: link texts, alt texts, emphasised and
    code text without their delimiters.  Text without such markup comes back unchanged."""
    if not any(mark in markdown for mark in "[*_`"):
        return markdown
    text = markdown
    previous = None
    while previous != text:  # an image inside a link: [![logo](logo.png) Home](https://...)
        previous, text = text, _LINK.sub(r"\1", text)
    return _DELIMITERS.sub("", text)
