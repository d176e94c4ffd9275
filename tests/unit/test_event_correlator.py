"""The event correlator on a fake clock: client-go's rules for counting, combining and filtering events.

The first two tables are ported from client-go's `tools/record/events_cache_test.go`
(TestEventCorrelator, TestEventSpamFilter). There an `IntervalClock` moves on at every reading,
several times per event; here the clock moves once per event, by the row's interval.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from kubesched.kube.event_correlator import (
    AGGREGATE_INTERVAL,
    AGGREGATE_MAX_EVENTS,
    COMBINED_PREFIX,
    LRU,
    SPAM_BURST,
    Action,
    Correlation,
    Event,
    EventCorrelator,
    ObjectReference,
    aggregate_keys,
    combined_message,
    spam_key,
    spam_key_by_reason,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reference(kind: str, name: str, namespace: str) -> ObjectReference:
    return ObjectReference(
        kind, namespace, name, "C934D34AFB20242", "version", "spec.containers{mycontainer}"
    )


def make_event(reason: str, message: str, involved: ObjectReference) -> Event:
    return Event(involved, "Normal", reason, message, component="kubelet", host="kublet.node1")


def unique_events(count: int) -> list[Event]:
    return [
        make_event(f"reason-{i}", f"message-{i}", reference("Pod", f"pod-{i}", f"ns-{i}"))
        for i in range(count)
    ]


def similar_events(count: int, template: Event, prefix: str) -> list[Event]:
    return [replace(template, message=f"{prefix}-{i}-{template.message}") for i in range(count)]


def numbered() -> Callable[[Event], str]:
    """Event names that say in which order they were made."""
    made = itertools.count(1)
    return lambda event: f"{event.involved.name}.{next(made)}"


FIRST = make_event("first", "i am first", reference("Pod", "my-pod", "my-ns"))
DUPLICATE = make_event("duplicate", "me again", reference("Pod", "my-pod", "my-ns"))
UNIQUE = make_event("unique", "snowflake", reference("Pod", "my-pod", "my-ns"))
SIMILAR = make_event(
    "similar",
    "similar message",
    replace(reference("Pod", "my-pod", "my-ns"), field_path="spec.containers{container1}"),
)
AGGREGATE = replace(SIMILAR, message=combined_message(SIMILAR))
SIMILAR_OTHER_CONTAINER = replace(
    SIMILAR, involved=replace(SIMILAR.involved, field_path="spec.containers{container2}")
)


@dataclass(frozen=True)
class Row:
    previous: list[Event]
    new: Event
    interval: float
    expected: Event | None  # None: skipped by the spam filter
    count: int = 1


CORRELATOR_ROWS = {
    "create-a-single-event": Row([], FIRST, 5, FIRST),
    "the-same-event-should-just-count": Row([DUPLICATE], DUPLICATE, 5, DUPLICATE, 2),
    "the-same-event-should-just-count-even-if-more-than-aggregate": Row(
        [DUPLICATE] * AGGREGATE_MAX_EVENTS, DUPLICATE, 30, DUPLICATE, AGGREGATE_MAX_EVENTS + 1
    ),
    "the-same-event-is-spam-if-happens-too-frequently": Row(
        [DUPLICATE] * (SPAM_BURST + 1), DUPLICATE, 1, None
    ),
    "create-many-unique-events": Row(unique_events(30), UNIQUE, 5, UNIQUE),
    "similar-events-should-aggregate-event": Row(
        similar_events(AGGREGATE_MAX_EVENTS - 1, SIMILAR, SIMILAR.message), SIMILAR, 5, AGGREGATE
    ),
    "similar-events-many-times-should-count-the-aggregate": Row(
        similar_events(AGGREGATE_MAX_EVENTS, SIMILAR, SIMILAR.message), SIMILAR, 5, AGGREGATE, 2
    ),
    "events-from-different-containers-do-not-aggregate": Row([SIMILAR_OTHER_CONTAINER], SIMILAR, 5, SIMILAR),
    # client-go's row uses exactly the interval; its clock moves on several times per event.
    "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate": Row(
        similar_events(AGGREGATE_MAX_EVENTS - 1, SIMILAR, SIMILAR.message),
        SIMILAR,
        AGGREGATE_INTERVAL + 1,
        SIMILAR,
    ),
}


def play(
    correlator: EventCorrelator, clock: Clock, events: list[Event], interval: float
) -> list[Correlation]:
    """Each event `interval` seconds after the last, each written as the API server would accept it."""
    results = []
    for event in events:
        clock.now += interval
        result = correlator.correlate(replace(event, timestamp=clock.now))
        if result.action is not Action.SKIP:
            correlator.written(result.key, result.name, result.count, result.first_timestamp)
        results.append(result)
    return results


@pytest.mark.parametrize("row", CORRELATOR_ROWS.values(), ids=CORRELATOR_ROWS.keys())
def test_event_correlator(row: Row) -> None:
    clock = Clock()
    correlator = EventCorrelator(clock)
    play(correlator, clock, row.previous, row.interval)
    (result,) = play(correlator, clock, [row.new], row.interval)
    if row.expected is None:
        assert result.action is Action.SKIP
        return
    assert result.action is (Action.UPDATE if row.count > 1 else Action.CREATE)
    assert replace(result.event, timestamp=0.0) == row.expected
    assert result.count == row.count
    # One occurrence: first and last are the same moment; a counted one began earlier.
    assert (result.first_timestamp == result.event.timestamp) == (row.count == 1)
    assert result.aggregated == (row.expected.message.startswith(COMBINED_PREFIX))


SPAM_ROWS = {
    "reported as spam if object reference is the same for default spam filter": (
        make_event("duplicate", "me again", reference("Pod", "my-pod", "my-ns")),
        spam_key,
        True,
    ),
    "not spam if object reference is the same, but reason is different for custom spam filter": (
        make_event("duplicate", "me again", reference("Pod", "my-pod", "my-ns")),
        spam_key_by_reason,
        False,
    ),
    "spam if object reference and reason is the same, but message is different for custom spam filter": (
        make_event("original", "me again", reference("Pod", "my-pod", "my-ns")),
        spam_key_by_reason,
        True,
    ),
}


@pytest.mark.parametrize(("new", "key", "skipped"), SPAM_ROWS.values(), ids=SPAM_ROWS.keys())
def test_event_spam_filter(new: Event, key: Callable[[Event], str], skipped: bool) -> None:
    clock = Clock()
    correlator = EventCorrelator(clock, burst=1, spam_key=key)
    original = make_event("original", "i am first", reference("Pod", "my-pod", "my-ns"))
    play(correlator, clock, [original], 1)
    (result,) = play(correlator, clock, [new], 1)
    assert (result.action is Action.SKIP) == skipped


def test_similar_events_are_grouped_by_reason_and_told_apart_by_message() -> None:
    # client-go's TestEventAggregatorByReasonFunc and TestEventAggregatorByReasonMessageFunc.
    fun = make_event("end-of-world", "it was fun", reference("Pod", "pod1", "other"))
    awful = make_event("end-of-world", "it was awful", reference("Pod", "pod1", "other"))
    bug = make_event("nevermind", "it was a bug", reference("Pod", "pod1", "other"))
    assert aggregate_keys(fun)[0] == aggregate_keys(awful)[0]
    assert aggregate_keys(fun)[1] != aggregate_keys(awful)[1]
    assert aggregate_keys(fun)[0] != aggregate_keys(bug)[0]
    assert combined_message(fun) == "(combined from similar events): it was fun"


def test_repeats_count_into_one_event_with_its_first_name_and_first_timestamp() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock, name=numbered())
    results = play(correlator, clock, [DUPLICATE] * 5, 2)
    assert [r.action for r in results] == [Action.CREATE] + [Action.UPDATE] * 4
    assert [r.count for r in results] == [1, 2, 3, 4, 5]
    assert {r.name for r in results} == {"my-pod.1"}
    assert {r.first_timestamp for r in results} == {1002.0}
    assert results[-1].event.timestamp == 1010.0


def test_the_tenth_distinct_message_starts_one_combined_event_and_the_next_ones_count_into_it() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock)
    results = play(correlator, clock, similar_events(12, SIMILAR, "m"), 1)
    assert [r.aggregated for r in results] == [False] * 9 + [True] * 3
    assert [r.action for r in results[9:]] == [Action.CREATE, Action.UPDATE, Action.UPDATE]
    assert [r.count for r in results[9:]] == [1, 2, 3]
    assert len({r.name for r in results}) == 10
    # The combined Event carries the latest message.
    assert results[-1].event.message == f"{COMBINED_PREFIX}m-11-similar message"


def test_similar_events_start_counting_afresh_after_ten_quiet_minutes() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock)
    play(correlator, clock, similar_events(9, SIMILAR, "a"), 1)
    clock.now += AGGREGATE_INTERVAL + 1
    results = play(correlator, clock, similar_events(9, SIMILAR, "b"), 1)
    assert not any(r.aggregated for r in results)
    (tenth,) = play(correlator, clock, similar_events(1, SIMILAR, "c"), 1)
    assert tenth.aggregated


def test_the_spam_filter_lets_a_burst_through_then_one_event_every_five_minutes() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock)
    # One object, a different reason each: neither combined nor counted, only filtered.
    events = [make_event(f"reason-{i}", "m", UNIQUE.involved) for i in range(SPAM_BURST + 5)]
    results = play(correlator, clock, events, 0.0)
    assert [r.action is Action.SKIP for r in results] == [False] * SPAM_BURST + [True] * 5
    clock.now += 300  # one token back
    assert [r.action is Action.SKIP for r in play(correlator, clock, events[:2], 0.0)] == [False, True]
    clock.now += 299
    assert play(correlator, clock, events[:1], 0.0)[0].action is Action.SKIP
    clock.now += 2
    assert play(correlator, clock, events[:1], 0.0)[0].action is not Action.SKIP


def test_events_the_spam_filter_skipped_still_count() -> None:
    # As in client-go: the occurrence is recorded before the filter decides.
    clock = Clock()
    correlator = EventCorrelator(clock, burst=2)
    results = play(correlator, clock, [DUPLICATE] * 4, 1)
    assert [r.action for r in results] == [Action.CREATE, Action.UPDATE, Action.SKIP, Action.SKIP]
    clock.now += 300
    (later,) = play(correlator, clock, [DUPLICATE], 0)
    assert (later.action, later.count) == (Action.UPDATE, 5)


def test_per_reason_buckets_keep_a_scheduled_event_after_a_flood_of_failures() -> None:
    clock = Clock()
    ref = reference("Pod", "p", "ns")
    failures = [make_event("FailedScheduling", f"0/{i} nodes are available", ref) for i in range(40)]
    scheduled = make_event("Scheduled", "Successfully assigned ns/p to n1", ref)
    by_object, by_reason = EventCorrelator(clock), EventCorrelator(clock, spam_key=spam_key_by_reason)
    assert play(by_object, clock, [*failures, scheduled], 1)[-1].action is Action.SKIP
    assert play(by_reason, clock, [*failures, scheduled], 1)[-1].action is Action.CREATE


def test_the_caches_forget_the_least_recently_used_key() -> None:
    cache: LRU[int] = LRU(2)
    cache.add("a", 1)
    cache.add("b", 2)
    assert cache.get("a") == 1  # now the most recent
    cache.add("c", 3)
    assert ("a" in cache, "b" in cache, "c" in cache) == (True, False, True)
    assert len(cache) == 2
    with pytest.raises(ValueError, match="at least one"):
        LRU[int](0)


def test_a_correlator_remembers_at_most_its_cache_size_of_events() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock, size=2)
    one, two, three = unique_events(3)
    play(correlator, clock, [one, two, three], 1)
    assert len(correlator) == 2
    # `one` was forgotten: written again as a new Event; `three` is still counted.
    assert [(r.action, r.count) for r in play(correlator, clock, [one, three], 1)] == [
        (Action.CREATE, 1),
        (Action.UPDATE, 2),
    ]


def test_the_server_state_after_a_write_is_what_the_next_repeat_builds_on() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock)
    (first,) = play(correlator, clock, [DUPLICATE], 1)
    correlator.written(first.key, "renamed", 7, 123.0)  # e.g. written again after a 404
    (second,) = play(correlator, clock, [DUPLICATE], 1)
    assert (second.action, second.name, second.count, second.first_timestamp) == (
        Action.UPDATE,
        "renamed",
        8,
        123.0,
    )
