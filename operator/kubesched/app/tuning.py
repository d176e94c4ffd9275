"""How the interpreter runs the scheduler process: how often threads hand the GIL over, when the
garbage collector runs, and where the C heap puts large blocks. Standard library only: `kubesched
run` applies them before it imports anything else (cli.py)."""

from __future__ import annotations

import ctypes
import gc
import sys

# The collector's defaults (700, 10, 10) run a full collection every few seconds under a watch
# stream's churn, and each one scans every tracked object with every thread stopped. Young
# collections of 10,000 objects stay short and full ones come ten times rarer; what was listed at
# start-up is frozen out of them altogether.
GC_THRESHOLDS = (10_000, 10, 100)


# How long a thread may hold the GIL while another waits for it; Python's default is 5 ms. The
# algorithm thread gives the GIL up inside every numpy operation on a few thousand nodes' arrays
# (dozens per pod) and, while the loop thread is busy, waits a whole interval to take it back each
# time: at 5,000 nodes the start-up's first batch of 4 pods, 15 ms of its own CPU, took 0.3 s while the
# loop fed the pending pods. The loop, in turn, waits out the interval whenever the algorithm holds it.
GIL_SWITCH_INTERVAL = 0.0005


def share_gil() -> None:
    """Hand the GIL between threads every GIL_SWITCH_INTERVAL rather than every 5 ms."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)


def hold_gc() -> None:
    """Start-up: no collections until the initial sync is done (`release_gc`).

    Decoding and feeding a large cluster's listings allocates millions of objects that live on; at
    the defaults the collector would run every 700 of them, rescanning all those before, and take
    much of the decoding's time. Without cycles among them (JSON, the cache's views), nothing is
    left for it to free meanwhile."""
    gc.disable()


def release_gc() -> None:
    """After the initial sync: what exists now (modules, the cache as listed) lives on, so it leaves
    the collector's generations and no later collection scans it again; then collections resume, at
    GC_THRESHOLDS. No collection first: one over the whole start-up state would itself be a long
    pause of the loop, to free little."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()


# glibc serves a block of at least this many bytes with a mapping of its own, unmapped when freed.
# Left to itself it raises the threshold to the size of every such block freed (up to 32 MiB), and
# from then on serves the watch's JSON, its decoding and the snapshot's arrays from the heap, whose
# free holes between live blocks it never returns: in soaks those free bytes grew fastest of all.
# Fixed at its default, they stay flat and the RSS grows half as fast (bench/soak.py: 44 against
# 20 MiB per 100,000 pods churned).
MMAP_THRESHOLD = 128 * 1024
M_MMAP_THRESHOLD = -3  # mallopt's parameter, from glibc's malloc.h


def fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at MMAP_THRESHOLD (nothing under another C library)."""
    # The C library the process has loaded (find_library would spawn ldconfig: 3 ms at start-up).
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
