"""Keeping freed memory for reuse during a large vectorized computation (a sweep of a million configurations).

A sweep evaluates its product block by block; each block allocates tens of temporary arrays of ~0.5 MB and frees
them all at its end. glibc's malloc returns the top of its heap to the system once more than M_TRIM_THRESHOLD is
free there (about 1 MB after its dynamic adjustment), so the next block asks the kernel for the same pages again:
a page fault and a zeroed page for every 4 KiB: a quarter of a 1M-row sweep's CPU time on a 2-core Xeon VM
(perf: clear_page_erms and the fault path). `kept_heap()` raises the thresholds for the duration of the call (the
temporaries and the output columns are then carved from the heap and reused), then hands the free memory back to
the system (malloc_trim). Elsewhere than glibc it does nothing. Results never depend on it: only where the bytes
come from.

Setting either threshold switches off glibc's own adjustment for the rest of the process, so afterwards they are
left where that adjustment ends up in a numpy program that frees large arrays (mallopt(3): the mmap threshold rises
to each freed mmapped chunk's size, up to 32 MiB on 64-bit systems, and the trim threshold to twice that), not at
the 128 KiB start: every later array over 128 KiB would otherwise be a fresh, zeroed mapping.
"""
from __future__ import annotations

from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # mallopt parameters (glibc malloc.h)
KEEP_BYTES = 1 << 30          # free heap kept during the call (bounded by what the call itself allocates)
MMAP_BYTES = 1 << 26          # allocations up to 64 MiB come from the heap during the call (output columns included)
AFTER_MMAP = 32 << 20         # afterwards: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
AFTER_TRIM = 2 * AFTER_MMAP   # and the trim threshold its adjustment pairs with it

_libc = None


def _glibc():
    """The C library when it is glibc (mallopt and malloc_trim present), else False."""
    global _libc
    if _libc is None:
        _libc = False
        try:
            import os
            if os.confstr("CS_GNU_LIBC_VERSION"):     # "glibc 2.x" on glibc; absent (ValueError) elsewhere
                import ctypes
                lib = ctypes.CDLL(None)
                if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim"):
                    _libc = lib
        except (OSError, ValueError, AttributeError, ImportError):
            _libc = False
    return _libc


@contextmanager
def kept_heap():
    """Within the block, freed memory stays in the heap for the next allocation (glibc only; see the module)."""
    lib = _glibc()
    if not lib:
        yield
        return
    lib.mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)
    lib.mallopt(M_TRIM_THRESHOLD, KEEP_BYTES)
    try:
        yield
    finally:
        lib.mallopt(M_MMAP_THRESHOLD, AFTER_MMAP)
        lib.mallopt(M_TRIM_THRESHOLD, AFTER_TRIM)
        lib.malloc_trim(0)
