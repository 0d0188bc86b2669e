"""The served process's C heap: memory a request frees is kept for the next one.

glibc hands the free top of each thread's heap back to the system once it passes a trim
threshold (128 KiB until its first large freed block raises it, at a time of its own
choosing), and the next request's allocations fault those pages in again, zeroed. At
10,000 teams a what-if keystroke allocates and frees some 2 MiB of arrays on its handler
thread (the division of every team): 495 page faults per keystroke, 1.3-1.6 ms of the
kernel's time against 0.3-0.4 ms with these thresholds (one admin typing, measured).
Peak memory does not grow: what is kept was in use a moment before."""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# mallopt's parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap, not a mapping of their own made and undone
# for each one (an array of 50,000 teams is 400 KiB).
MMAP_THRESHOLD = 4 << 20
# Free memory at the top of a heap is handed back only beyond this.
TRIM_THRESHOLD = 16 << 20


def keep_freed_memory() -> bool:
    """Set the thresholds; False where the C library has no ``mallopt`` (not glibc) or
    refuses them (the process then runs with the library's defaults)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    accepted = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not accepted:
        log.warning("the C library refused the heap thresholds; running with its defaults")
    return accepted
