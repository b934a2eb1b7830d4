import os

# One BLAS thread per process: the graph rank's solves are small, and OpenBLAS's
# default of a thread per core made them about 20x slower on two busy cores (the
# support step at 10k facts: 58 ms against 2.7 ms, bench/graph.py --stages).
# Set before numpy loads; an operator's own value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .celery import app as celery_app

__all__ = ["celery_app"]
