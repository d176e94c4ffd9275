"""The interpreter's settings for the scheduler process: the GIL's switch interval, the collector,
glibc's mmap threshold."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys

import pytest

from kubesched.app.tuning import (
    GC_THRESHOLDS,
    GIL_SWITCH_INTERVAL,
    hold_gc,
    release_gc,
    share_gil,
)


def test_no_collection_during_start_up_then_rarer_ones_with_the_listed_state_frozen_out() -> None:
    before = gc.get_threshold()
    try:
        hold_gc()
        assert not gc.isenabled()
        release_gc()
        assert gc.isenabled() and gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*before)


def test_threads_hand_the_gil_over_well_before_pythons_default_5_ms() -> None:
    before = sys.getswitchinterval()
    try:
        share_gil()
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL)
        assert GIL_SWITCH_INTERVAL < 0.005  # Python's default
    finally:
        sys.setswitchinterval(before)


# In a fresh interpreter: the test run's own heap may already hold more free bytes than the block asked for.
MMAP_CHECK = """
import ctypes, sys
from kubesched.app.tuning import fix_mmap_threshold
from kubesched.telemetry.sizes import _MallInfo2
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = _MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    fix_mmap_threshold()
# Left to itself, glibc raises its threshold to 30 MiB on this free, and serves the next block below
# that from its heap.
libc.free(libc.malloc(30 << 20))
info = libc.mallinfo2()
size = info.fordblks + (1 << 20)
assert size < 30 << 20, info.fordblks
block = libc.malloc(size)
print(libc.mallinfo2().hblks - info.hblks)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_large_block_freed_leaves_the_next_ones_to_mappings_of_their_own() -> None:
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("not glibc")

    def mapped(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", MMAP_CHECK, mode], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    assert mapped("fixed") == 1
    assert mapped("default") == 0  # the check can fail: without the fix the block comes from the heap
