"""The one backoff and the one token bucket (kube/retry.py)."""

from __future__ import annotations

import random

import pytest

from kubesched.kube.retry import TokenBucket, backoff_delay


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.25), (1, 0.5), (2, 1.0), (3, 2.0), (5, 5.0), (60, 5.0), (-1, 0.25)],
)
def test_the_delay_doubles_per_failure_up_to_its_cap(failures: int, expected: float) -> None:
    assert backoff_delay(failures, 0.25, 5.0) == expected


@pytest.mark.parametrize(("jitter", "low", "high"), [(0.1, 2.0, 2.2), (-0.5, 1.0, 2.0)])
def test_jitter_adds_or_takes_off_at_most_its_fraction(jitter: float, low: float, high: float) -> None:
    rng = random.Random(7)
    delays = [backoff_delay(3, 0.25, 5.0, jitter, rng) for _ in range(200)]
    assert all(low <= d <= high for d in delays)
    assert len(set(delays)) == 200


def test_a_bucket_gives_its_burst_then_a_token_per_1_over_qps() -> None:
    now = [100.0]
    bucket = TokenBucket(2.0, 3, lambda: now[0])
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5
    assert [bucket.try_acquire() for _ in range(2)] == [True, False]
    now[0] += 60
    assert sum(bucket.try_acquire() for _ in range(5)) == 3
