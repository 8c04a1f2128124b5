"""What the index reads of a Markdown answer: its links' words, not their URLs.

Answers are Markdown (imported documents keep their links, images, bold and code), but a URL is not
what a question asks about: ``[benefits website](http://www.microsoft.com)`` put "http", "www",
"microsoft" and "com" into BM25 and into the embedder's 256-token window, where they match questions
about Microsoft rather than about benefits.  The embedder and the analyzer read the link's text and
an image's alt text instead; the answer itself is returned as written.  A regular expression over
links only, not a Markdown parser: the index reads every answer of a knowledge base.
"""

from __future__ import annotations

import re

# [text](destination "title") and ![alt](src), the destination without spaces or with balanced parentheses
# The link text is bounded (1,000 characters, 2,000 of destination): unbounded, an answer of 25,000 unclosed
# "[" made each search scan to the end from every one of them.
_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]{0,1000}\]){0,1000})\]\((?:[^()\s]|\([^()\s]{0,2000}\)){0,2000}"
                   r"(?:\s+\"[^\"]{0,1000}\")?\)")


def without_urls(markdown: str) -> str:
    """``markdown`` with each link reduced to its text and each image to its alt text.  Emphasis and code marks
    stay: the analyzer drops them, and the embedder has always read them (a topic heading's answer starts with
    it in bold), so the calibrated confidences were fitted on them."""
    if "](" not in markdown:
        return markdown
    text = markdown
    previous = None
    while previous != text:  # an image inside a link: [![logo](logo.png) Home](https://...)
        previous, text = text, _LINK.sub(r"\1", text)
    return text
