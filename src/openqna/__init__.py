"""openqna: self-hosted knowledge-base question answering."""

import os

# Query-time linear algebra is matrix-vector products, which are memory-bound: OpenBLAS's extra
# threads buy nothing there and, on a busy 2-core machine, waking them cost 20 ms for a product
# that takes 0.1 ms on one thread (measured on a 3,000 x 384 matrix).  Set before numpy loads;
# an explicit OPENBLAS_NUM_THREADS wins.  The embedding model has its own threads (OPENQNA_THREADS).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
