"""The benchmark's command line (bench/kubebench/cli.py): which runs may replace results/latest.*."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from kubebench.cli import is_full_run, parse_args
from kubebench.runner import scheduler_figures
from kubebench.schedulers import ALL


@pytest.mark.parametrize(
    ("argv", "schedulers", "repeats", "full"),
    [
        ([], list(ALL), 3, True),
        ([], list(ALL), 5, True),
        ([], list(ALL), 2, False),
        ([], ["kubesched"], 3, False),
        (["--batch", "5000x5000"], list(ALL), 3, False),
        (["--steady", "1000x50x30"], list(ALL), 3, False),
        (["--no-steady"], list(ALL), 3, False),
        (["--no-batch"], list(ALL), 3, False),
    ],
)
def test_only_the_default_sizes_with_every_binder_and_three_repeats_replace_latest(
    argv: list[str], schedulers: list[str], repeats: int, full: bool
) -> None:
    assert is_full_run(parse_args(argv), schedulers, repeats) is full


def test_the_recorder_figures_come_from_kubescheds_metrics() -> None:
    exposition = "\n".join(
        [
            "# TYPE kubesched_event_loop_lag_max_seconds gauge",
            "kubesched_event_loop_lag_max_seconds 0.0425",
            'kubesched_thread_cpu_seconds{thread="event-loop"} 20.0',
            'kubesched_thread_cpu_seconds{thread="algorithm"} 15.0',
            'kubesched_thread_cpu_seconds{thread="event-recorder"} 5.0',
            'kubesched_event_handoff_seconds{scheduler="bench-kubesched-001"} 0.05',
        ]
    )
    assert scheduler_figures(exposition) == {
        "loop_lag_max_ms": 42.5,
        "recorder_loop_share_pct": 0.25,
        "recorder_thread_cpu_pct": 12.5,
    }
    assert scheduler_figures("") == {}
