"""Which Events to create, to count into an existing one, or to drop: client-go's EventCorrelator.

The same rules as `EventCorrelator` in client-go's `tools/record/events_cache.go`, which the legacy
recorder applies before every write, in the same order:

1. Aggregation. Events that differ only in their message ("similar": same source, object, type,
   reason and reporting controller) are counted by distinct message; from the 10th distinct message
   within 10 minutes of the previous similar event on, they become one Event whose message is
   "(combined from similar events): <latest message>".
2. De-duplication. An event identical to one already written (message included, or the same
   combined Event) updates that Event's `count` and `lastTimestamp` (a PATCH) instead of creating
   another one.
3. Spam filter. A token bucket per source and object (burst 25, one more every 5 minutes): an event
   that finds it empty is not written at all. It runs last, so skipped events still count.

Each of the three keeps its state in an LRU cache of 4,096 keys. Pure logic: the clock is injected
(monotonic seconds, for the windows and the buckets); event timestamps are the caller's.
"""

from __future__ import annotations

import enum
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from kubesched.kube.retry import TokenBucket

MAX_LRU_ENTRIES = 4096
# More than this many distinct messages of similar events within the interval: combine them.
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
# A source may send 25 events about an object, then one more every 5 minutes.
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "

V = TypeVar("V")
# Seeded once from the system's entropy; uuid4 would read it (a system call) for every name.
_suffixes = random.Random()


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """The `involvedObject` of an Event."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = "v1"
    field_path: str = ""
    resource_version: str = ""  # written into the Event, not part of any key (as in client-go)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Event:
    """One occurrence to record: what client-go's recorder builds before it correlates."""

    involved: ObjectReference
    type: str
    reason: str
    message: str
    component: str  # source.component
    host: str = ""  # source.host
    reporting_controller: str = ""
    reporting_instance: str = ""
    timestamp: float = 0.0  # when it happened, wall-clock seconds


class Action(enum.Enum):
    CREATE = "create"  # POST a new Event
    UPDATE = "update"  # PATCH `count`, `lastTimestamp` and `message` of the Event named in the result
    SKIP = "skip"  # the spam filter said no: write nothing


@dataclass(frozen=True, slots=True)
class Correlation:
    """What to write for one event: client-go's EventCorrelateResult."""

    action: Action
    event: Event  # the event as it should be written (a combined message when aggregated)
    key: str  # the de-duplication key, for `EventCorrelator.written`
    name: str  # the Event object's name: a new one to create, or the one to patch
    count: int
    first_timestamp: float
    aggregated: bool = False  # the message was combined from similar events


def event_key(event: Event) -> str:
    """client-go's getEventKey: identical events share it (the message included)."""
    ref = event.involved
    return "\x00".join(
        (
            event.component,
            event.host,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.field_path,
            ref.uid,
            ref.api_version,
            event.type,
            event.reason,
            event.message,
        )
    )


def spam_key(event: Event) -> str:
    """client-go's getSpamKey: one token bucket per source and object."""
    ref = event.involved
    return "\x00".join(
        (event.component, event.host, ref.kind, ref.namespace, ref.name, ref.uid, ref.api_version)
    )


def spam_key_by_reason(event: Event) -> str:
    """One bucket per source, object and reason (client-go's CorrelatorOptions.SpamKeyFunc allows it)."""
    return f"{spam_key(event)}\x00{event.reason}"


def aggregate_keys(event: Event) -> tuple[str, str]:
    """client-go's EventAggregatorByReasonFunc: (key of the similar group, key within it: the message)."""
    ref = event.involved
    group = "\x00".join(
        (
            event.component,
            event.host,
            ref.kind,
            ref.namespace,
            ref.name,
            ref.uid,
            ref.api_version,
            event.type,
            event.reason,
            event.reporting_controller,
            event.reporting_instance,
        )
    )
    return group, event.message


def combined_message(event: Event) -> str:
    """client-go's EventAggregatorByReasonMessageFunc."""
    return COMBINED_PREFIX + event.message


def random_name(event: Event) -> str:
    """A new Event's name: the object's name and a random suffix, unique across replicas and restarts."""
    return f"{event.involved.name}.{_suffixes.getrandbits(64):016x}"


class LRU(Generic[V]):
    """A bounded mapping that forgets the least recently used key, like groupcache's `lru.Cache`;
    keys added for an owner (the event's object) can also be forgotten all at once, with it."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an LRU cache needs room for at least one entry, got {size}")
        self.size = size
        self._items: OrderedDict[str, tuple[str, V]] = OrderedDict()  # key -> (owner, value)
        self._owned: dict[str, set[str]] = {}  # owner -> its keys

    def get(self, key: str) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[1]

    def add(self, key: str, value: V, owner: str = "") -> None:
        old = self._items.get(key)
        if old is not None and old[0] != owner:
            self._disown(old[0], key)
        self._items[key] = (owner, value)
        self._items.move_to_end(key)
        if owner:
            self._owned.setdefault(owner, set()).add(key)
        if len(self._items) > self.size:
            evicted, (was, _) = self._items.popitem(last=False)
            self._disown(was, evicted)

    def forget(self, owner: str) -> None:
        """Drop every key added for `owner`."""
        for key in self._owned.pop(owner, ()):
            del self._items[key]

    def _disown(self, owner: str, key: str) -> None:
        keys = self._owned.get(owner)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._owned[owner]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items


class SpamFilter:
    """client-go's EventSourceObjectSpamFilter: a token bucket per key, `burst` full at first."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        size: int = MAX_LRU_ENTRIES,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
        key: Callable[[Event], str] = spam_key,
    ) -> None:
        self._clock = clock
        self._cache: LRU[TokenBucket] = LRU(size)
        self._burst = burst
        self._qps = qps
        self._key = key

    def forget(self, uid: str) -> None:
        self._cache.forget(uid)

    def filter(self, event: Event) -> bool:
        """True when `event` should be dropped."""
        key = self._key(event)
        bucket = self._cache.get(key)
        if bucket is None:
            bucket = TokenBucket(self._qps, self._burst, self._clock)
        accepted = bucket.try_acquire()
        self._cache.add(key, bucket, event.involved.uid)
        return not accepted


@dataclass(slots=True)
class _Similar:
    # Distinct messages seen, oldest first (a dict as an ordered set).
    messages: dict[str, None] = field(default_factory=dict)
    last_seen: float = 0.0


class Aggregator:
    """client-go's EventAggregator: similar events with many distinct messages become one combined Event."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        size: int = MAX_LRU_ENTRIES,
        max_events: int = AGGREGATE_MAX_EVENTS,
        interval: float = AGGREGATE_INTERVAL,
    ) -> None:
        self._clock = clock
        self._cache: LRU[_Similar] = LRU(size)
        self._max_events = max_events
        self._interval = interval

    def forget(self, uid: str) -> None:
        self._cache.forget(uid)

    def aggregate(self, event: Event) -> tuple[Event, str, bool]:
        """(the event to write, its de-duplication key, whether it was combined)."""
        now = self._clock()
        group, local = aggregate_keys(event)
        record = self._cache.get(group)
        # Too long since the last similar event (or none seen): start counting afresh.
        if record is None or now - record.last_seen > self._interval:
            record = _Similar()
        record.messages[local] = None
        record.last_seen = now
        self._cache.add(group, record, event.involved.uid)
        if len(record.messages) < self._max_events:
            return event, event_key(event), False
        # Keep the set below the threshold, so that each further distinct message is combined too.
        # client-go drops an arbitrary one; the oldest here, so that runs are reproducible.
        del record.messages[next(iter(record.messages))]
        return replace(event, message=combined_message(event)), group, True


@dataclass(frozen=True, slots=True)
class _Observation:
    count: int
    first_timestamp: float
    name: str


class EventCorrelator:
    """Filters, aggregates, counts and de-duplicates events before they are written (client-go's rules)."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        size: int = MAX_LRU_ENTRIES,
        max_events: int = AGGREGATE_MAX_EVENTS,
        interval: float = AGGREGATE_INTERVAL,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
        spam_key: Callable[[Event], str] = spam_key,
        name: Callable[[Event], str] = random_name,
    ) -> None:
        self.aggregator = Aggregator(clock, size=size, max_events=max_events, interval=interval)
        self.spam_filter = SpamFilter(clock, size=size, burst=burst, qps=qps, key=spam_key)
        self._observed: LRU[_Observation] = LRU(size)
        self._name = name

    def correlate(self, event: Event) -> Correlation:
        """What to write for `event`; its occurrence is recorded whatever the spam filter decides."""
        written, key, aggregated = self.aggregator.aggregate(event)
        last = self._observed.get(key)
        if last is not None and last.count > 0:
            action = Action.UPDATE
            observed = _Observation(last.count + 1, last.first_timestamp, last.name)
        else:
            action = Action.CREATE
            observed = _Observation(1, written.timestamp, self._name(written))
        self._observed.add(key, observed, event.involved.uid)
        if self.spam_filter.filter(written):
            action = Action.SKIP
        return Correlation(
            action, written, key, observed.name, observed.count, observed.first_timestamp, aggregated
        )

    def written(self, key: str, name: str, count: int, first_timestamp: float, uid: str = "") -> None:
        """The API server's state after a successful write (client-go's UpdateState); `uid`: the
        involved object's."""
        self._observed.add(key, _Observation(count, first_timestamp, name), uid)

    def forget(self, uid: str) -> None:
        """Drop what is kept about the object `uid` (gone: its events will never be written again).
        client-go keeps it until it is the least recently used of 4,096 keys, each LRU full of dead
        pods' keys (megabytes) once a few thousand have come and gone."""
        self.aggregator.forget(uid)
        self.spam_filter.forget(uid)
        self._observed.forget(uid)

    def __len__(self) -> int:
        """Events whose counts are remembered."""
        return len(self._observed)
