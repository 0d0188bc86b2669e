"""The served process keeps the memory a request frees for the next one (``app.core.heap``):
measured in a process of its own, as the thresholds are the whole process's."""

from __future__ import annotations

import subprocess
import sys

# A handler thread's work at 10,000 teams, in small: 30 arrays of 10,000 floats (80 KiB
# each) made and let go, 50 times; the page faults of each time on that thread.
PROGRAM = """
import resource, sys, threading
import numpy as np
from app.core import heap
if sys.argv[1] == "kept":
    assert heap.keep_freed_memory()
faults = []
def work():
    for _ in range(5):
        arrays = [np.ones(10_000) * i for i in range(30)]
        del arrays
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(50):
        arrays = [np.ones(10_000) * i for i in range(30)]
        del arrays
    faults.append((resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / 50)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(faults[0])
"""


def _faults_per_pass(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


def test_freed_memory_is_kept_for_the_next_request() -> None:
    """Without the thresholds every pass faults its arrays' pages in again (the heap's
    top is handed back each time); with them, none after the first passes."""
    assert _faults_per_pass("default") > 200
    assert _faults_per_pass("kept") < 5
