"""Reconciling the cache with a fresh listing: what a watch gap left behind.

When a watch breaks for longer than etcd keeps history (`410 Gone`), Kopf lists again and
replays what exists, but sends no DELETED for objects that vanished during the gap: a deleted
node would keep being chosen and a deleted pod would keep its resources. So the cache is
compared, now and then, with a LIST of nodes and pods.

A listing is a consistent picture at its `resourceVersion`; watch events that overtook it are
newer. An object the cache holds but the listing lacks is stale only if the cache's copy is not
newer than the listing (it may have been created after it): resource versions are etcd
revisions, compared as integers; one that does not parse as one is never called stale.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Listing:
    """The keys (node names, pod uids) a LIST returned, and the resourceVersion it was served at."""

    keys: frozenset[str]
    resource_version: str

    @classmethod
    def of(cls, keys: Iterable[str], resource_version: str) -> Listing:
        return cls(frozenset(keys), resource_version)


def uid_of(obj: Mapping[str, Any]) -> str:
    """A pod's key in a listing."""
    return str((obj.get("metadata") or {}).get("uid") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    """A node's key in a listing."""
    return str((obj.get("metadata") or {}).get("name") or "")


def version(rv: str) -> int | None:
    """A resourceVersion as an etcd revision, or None when it is not one."""
    try:
        value = int(rv)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def not_newer(rv: str, listing: Listing) -> bool:
    """Whether an object last seen at `rv` predates (or equals) the listing."""
    seen, listed = version(rv), version(listing.resource_version)
    return seen is not None and listed is not None and seen <= listed


def stale(cached: Mapping[str, str], listing: Listing, keep: Collection[str] = ()) -> list[str]:
    """The keys of `cached` (key -> last seen resourceVersion) that vanished before the listing.

    `keep`: keys never to drop whatever the listing says (pods assumed and being bound).
    """
    return sorted(
        key
        for key, rv in cached.items()
        if key not in listing.keys and key not in keep and not_newer(rv, listing)
    )
