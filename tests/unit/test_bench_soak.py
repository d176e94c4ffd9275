"""The soak's arithmetic and batches (bench/soak.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak import anonymous_mib, batch_pods, differences, own, parse_args, slope_per_100k


def test_the_growth_is_fitted_after_the_warmup_only() -> None:
    samples = [{"pods": 0, "rss_mib": 60.0}] + [
        {"pods": pods, "rss_mib": 80.0 + pods / 100_000 * 0.5} for pods in range(10_000, 110_000, 10_000)
    ]
    slope = slope_per_100k(samples, warmup=10_000)
    assert slope is not None and abs(slope - 0.5) < 1e-9
    assert slope_per_100k(samples, warmup=200_000) is None


def test_the_anonymous_growth_leaves_out_the_file_backed_pages() -> None:
    # Libraries paged in as rarer paths run: the RSS grows, the process's own memory does not.
    samples = [
        {"pods": pods, "rss_mib": 90.0 + pods / 100_000 * 2.0, "rss_file_mib": 20.0 + pods / 100_000 * 2.0}
        for pods in range(10_000, 110_000, 10_000)
    ]
    assert abs((slope_per_100k(samples, 10_000) or 0.0) - 2.0) < 1e-9
    assert abs(slope_per_100k(samples, 10_000, anonymous_mib) or 0.0) < 1e-9
    assert anonymous_mib({"pods": 0, "rss_mib": 90.0}) is None  # an older result: no file figure


def test_a_size_not_reported_counts_as_empty() -> None:
    start = {"queue._pods": 0, "cache._pods": 3}
    assert differences({"cache._pods": 3, "gangs._records": 0}, start) == {}
    assert differences({"cache._pods": 4}, start) == {"cache._pods": [3, 4]}


def test_connections_kept_open_and_process_figures_are_not_the_scheduler_s_own() -> None:
    sizes = {"scheduler._binder._api._pool._idle": 17, "gc.objects": 5, "scheduler.queue._pods": 0}
    assert own(sizes) == {"scheduler.queue._pods": 0}


def test_a_batch_holds_every_kind_of_pod_and_no_more_than_its_size() -> None:
    args = parse_args(["--batch", "200", "--gangs", "2", "--gang-size", "8", "--late", "4"])
    kinds = batch_pods(7, args)
    assert {kind: len(pods) for kind, pods in kinds.items()} == {
        "plain": 178, "gang": 16, "late": 4, "victim": 1, "preemptor": 1,
    }  # fmt: skip
    names = [pod["metadata"]["name"] for pods in kinds.values() for pod in pods]
    assert len(set(names)) == 200
    assert all(
        pod["metadata"]["labels"]["soak-batch"] == "b0000007" for pods in kinds.values() for pod in pods
    )
