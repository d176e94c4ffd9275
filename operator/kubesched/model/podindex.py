"""Indexes of the placed pods that let a selector or a pod look only at what it can match.

NodeUsage (model/table.py) keeps them pod by pod, as it keeps its counts, and copies them on write
the same way, so that the cache carries them from one snapshot to the next and a batch's snapshot
chain derives each from the one before it:

- label sets (and the placed pods' terms) are filed under the labels they need (`Anchors`): a
  selector that requires `app=web` looks only at the label sets carrying it, and an incoming pod
  only at the terms whose selector requires one of its labels;
- each placed pod's inter-pod (anti-)affinity terms are counted per node under the term itself
  (`TermKey`), so the pods that share a term (the replicas of one Deployment) are matched against
  an incoming pod once, not once each.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Final, Generic, TypeVar

from kubesched.model.affinity import AffinityTerm, PodAffinity, has_pod_affinity, parse_pod_affinity
from kubesched.model.objects import Pod
from kubesched.model.selectors import EQUALS, IN, LabelSelector

K = TypeVar("K", bound=Hashable)
Anchor = tuple[str, str]  # a label (key, value)

# The part a placed pod's term plays for an incoming pod, as InterPodAffinity reads it.
REQUIRED_AFFINITY: Final = "requiredAffinity"
REQUIRED_ANTI_AFFINITY: Final = "requiredAntiAffinity"
PREFERRED_AFFINITY: Final = "preferredAffinity"
PREFERRED_ANTI_AFFINITY: Final = "preferredAntiAffinity"

TermKey = tuple[str, int, AffinityTerm]  # (role, weight (0 for a required term), term)


def selector_anchors(selector: LabelSelector) -> tuple[Anchor, ...] | None:
    """Labels one of which every label set `selector` matches carries (those of its In or equality
    requirement with the fewest values); () when it matches nothing; None when no requirement
    narrows it down."""
    if selector.nothing:
        return ()
    best = None
    for requirement in selector.requirements:
        if requirement.operator in (IN, EQUALS) and (
            best is None or len(requirement.values) < len(best.values)
        ):
            best = requirement
    return None if best is None else tuple((best.key, value) for value in sorted(best.values))


def term_anchors(key: TermKey) -> tuple[Anchor | None, ...]:
    """Where a term is filed: under its selector's anchors, or under None (looked at for every pod)."""
    anchors = selector_anchors(key[2].selector)
    return (None,) if anchors is None else anchors


def term_keys(pod: Pod, parsed: PodAffinity | None = None) -> list[TermKey]:
    """The pod's inter-pod (anti-)affinity terms (`parsed` when given) as the index counts them: a
    term given twice counts twice, as every walk over a pod's terms does. Parsed as NodeInfo
    parses them."""
    if not has_pod_affinity(pod):
        return []
    info = parsed or parse_pod_affinity(pod)
    keys: list[TermKey] = [(REQUIRED_AFFINITY, 0, t) for t in info.required_affinity]
    keys += [(REQUIRED_ANTI_AFFINITY, 0, t) for t in info.required_anti_affinity]
    keys += [(PREFERRED_AFFINITY, w.weight, w.term) for w in info.preferred_affinity]
    keys += [(PREFERRED_ANTI_AFFINITY, w.weight, w.term) for w in info.preferred_anti_affinity]
    return keys


class Anchors(Generic[K]):
    """Items filed under anchors, copied on write: after `view`, neither side changes what the
    other reads (each copies the table, then a bucket, before it first changes them)."""

    __slots__ = ("_buckets", "_own_buckets", "_own_table")

    def __init__(self, buckets: dict[Anchor | None, list[K]] | None = None) -> None:
        self._buckets: dict[Anchor | None, list[K]] = {} if buckets is None else buckets
        self._own_table = buckets is None
        self._own_buckets: set[Anchor | None] = set()

    def view(self) -> Anchors[K]:
        """A copy sharing everything until either side changes."""
        self._own_table = False
        self._own_buckets = set()
        return Anchors(self._buckets)

    def get(self, anchor: Anchor | None) -> Iterable[K]:
        return self._buckets.get(anchor, ())

    def file(self, item: K, anchors: Iterable[Anchor | None]) -> None:
        for anchor in anchors:
            self._bucket(anchor).append(item)

    def unfile(self, item: K, anchors: Iterable[Anchor | None]) -> None:
        for anchor in anchors:
            bucket = self._bucket(anchor)
            bucket.remove(item)
            if not bucket:
                del self._buckets[anchor]
                self._own_buckets.discard(anchor)

    def _bucket(self, anchor: Anchor | None) -> list[K]:
        if not self._own_table:
            self._buckets = dict(self._buckets)
            self._own_table = True
        bucket = self._buckets.get(anchor)
        if bucket is None:
            bucket = self._buckets[anchor] = []
            self._own_buckets.add(anchor)
        elif anchor not in self._own_buckets:
            bucket = self._buckets[anchor] = list(bucket)
            self._own_buckets.add(anchor)
        return bucket


__all__ = [
    "PREFERRED_AFFINITY",
    "PREFERRED_ANTI_AFFINITY",
    "REQUIRED_AFFINITY",
    "REQUIRED_ANTI_AFFINITY",
    "Anchor",
    "Anchors",
    "TermKey",
    "selector_anchors",
    "term_anchors",
    "term_keys",
]
