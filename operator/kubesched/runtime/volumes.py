"""Volume binding Reserve and Unreserve in the cache: the PVs and claims a pod's volumes take, held
there (on the event loop) until the watch brings the objects as written."""

from __future__ import annotations

from kubesched.algorithm.volume_reserve import PodVolumes, object_key
from kubesched.runtime.cache import SchedulerCache


def assume_in_cache(cache: SchedulerCache, volumes: PodVolumes) -> None:
    """Record the assumed PVs and claims until the watch brings the written ones. One the watch
    changed since the batch's snapshot is left as it is: its write will meet a conflict."""
    _swap(cache, volumes, assume=True)


def forget_in_cache(cache: SchedulerCache, volumes: PodVolumes) -> None:
    """RevertAssumedPodVolumes: put back what the cache had, unless the watch replaced it since."""
    _swap(cache, volumes, assume=False)


def _swap(cache: SchedulerCache, volumes: PodVolumes, *, assume: bool) -> None:
    """Replace each changed object by its other version, where the cache still holds that very one."""
    for kind, cached, assumed in volumes.changes():
        old, new = (cached, assumed) if assume else (assumed, cached)
        key = object_key(cached)
        if cache.get_object(kind, key) is old:
            cache.set_object(kind, key, new)


__all__ = ["assume_in_cache", "forget_in_cache"]
