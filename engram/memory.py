"""Process memory: keep the heap returnable to the system, and say how much a process holds.

``bound_heap`` is called once at the start of every long-running process (serve, worker, beat),
before its threads start.

Why ``bound_heap``: glibc's malloc raises its mmap threshold each time a large block is freed, so
after a few embedding batches (tens of MB of short-lived activations each) every large block
comes from the main heap, which fragments and never shrinks. Measured with the int8 MiniLM, one
process, 64 texts of 128 tokens in batches of 8: peak RSS 305 MB and 161 MB after, against
206 MB and 115 MB with the thresholds fixed at 128 KiB (batches of 4 at 256 tokens: 449 -> 205
MB peak). Large blocks then come from mmap and go back to the system when freed. The cost is an
mmap per large allocation, not measurable next to the model's own work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
HEAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's own initial threshold; fixing it stops the dynamic raise described above."""
ARENA_MAX = 2
"""glibc gives threads their own heaps (up to 8 per core), each keeping what it freed: a server
with a dozen threads (requests, workers, the derived lane) holds several partly empty heaps."""

_bounded = False
_lock = threading.Lock()


def bound_heap() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (once). False where the C library
    is not glibc (musl, macOS): nothing to do there, and nothing is changed."""
    global _bounded
    with _lock:
        if _bounded:
            return True
        if not sys.platform.startswith("linux"):
            return False
        name = ctypes.util.find_library("c") or "libc.so.6"
        try:
            libc = ctypes.CDLL(name)
            mallopt = libc.mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        ok = (
            bool(mallopt(M_MMAP_THRESHOLD, HEAP_THRESHOLD_BYTES))
            and bool(mallopt(M_TRIM_THRESHOLD, HEAP_THRESHOLD_BYTES))
            and bool(mallopt(M_ARENA_MAX, ARENA_MAX))
        )
        _bounded = ok
        return ok


def process_memory(pid: int | str = "self") -> dict[str, float] | None:
    """Resident memory of a process in MB: ``rssMb`` now and ``peakRssMb`` (the high-water mark),
    from /proc; None where there is no /proc (not Linux) or the process is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            lines = status.read().splitlines()
    except OSError:
        return None
    found: dict[str, float] = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024.0
    if "VmRSS" not in found:
        return None
    return {
        "rssMb": round(found["VmRSS"], 1),
        "peakRssMb": round(found.get("VmHWM", found["VmRSS"]), 1),
    }
