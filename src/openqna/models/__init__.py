"""Embedding models: :mod:`openqna.models.embedder` (runtime embedders and
``get_embedder``) and :mod:`openqna.models.onnx_export` (one-off ONNX export of
the bundled MiniLM).  Nothing is imported here, so that
``python -m openqna.models.onnx_export`` does not load the runtime first."""
