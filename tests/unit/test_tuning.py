"""The interpreter's settings for the scheduler process: the GIL's switch interval, the collector."""

from __future__ import annotations

import gc
import sys

import pytest

from kubesched.app.tuning import GC_THRESHOLDS, GIL_SWITCH_INTERVAL, hold_gc, release_gc, share_gil


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
