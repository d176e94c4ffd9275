"""The interpreter's settings for the scheduler process: the GIL's switch interval, the collector,
glibc's mmap threshold."""

from __future__ import annotations

import ctypes
import gc
import sys

import pytest

from kubesched.app.tuning import (
    GC_THRESHOLDS,
    GIL_SWITCH_INTERVAL,
    fix_mmap_threshold,
    hold_gc,
    release_gc,
    share_gil,
)
from kubesched.telemetry.sizes import _MallInfo2


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_large_block_freed_leaves_the_next_ones_to_mappings_of_their_own() -> None:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("not glibc")
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    fix_mmap_threshold()
    # Left to itself, glibc would raise its threshold to 30 MiB on this free, and grow its heap for
    # the next block below that which the heap's free bytes cannot hold.
    libc.free(libc.malloc(30 << 20))
    info = libc.mallinfo2()
    size = info.fordblks + (1 << 20)
    assert size < 30 << 20
    block = libc.malloc(size)
    try:
        assert libc.mallinfo2().hblks == info.hblks + 1
    finally:
        libc.free(block)
