"""ElasticQuota (scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`): per namespace a guarantee (`min`),
a cap (`max`), and what its pods use. Pure: amounts in, verdicts out.

Amounts are mappings of resource names to integers in the scheduler's units (`cpu` in millicores,
the others in their base units), holding only what is not zero. A resource a quota's `max` does not
name is unlimited, one its `min` does not name is zero: the KEP's intent (kep/9-capacity-scheduling).
scheduler-plugins' code differs where `max` is given but lacks cpu, memory or ephemeral-storage: it
then caps that resource at zero. `pods` is not counted, as upstream counts no pod slots.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kubesched.model.objects import Pod, parse_time
from kubesched.model.quantity import QuantityError
from kubesched.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resource, resource_from_list

KIND: Final = "ElasticQuota"
# How far a quota may borrow beyond its min (algorithm/admission.py): only from the other quotas'
# unused mins (upstream's rule), or from whatever the cluster has free.
GUARANTEES: Final = "Guarantees"
CLUSTER: Final = "Cluster"
BORROWING: Final = (GUARANTEES, CLUSTER)

Amounts = Mapping[str, int]
FINISHED: Final = ("Succeeded", "Failed")


def amounts(resource: Resource) -> dict[str, int]:
    """A Resource as amounts by name, zeros left out (pod slots are not counted)."""
    out = {name: amount for name, amount in resource.scalar.items() if amount}
    for name, amount in ((CPU, resource.milli_cpu), (MEMORY, resource.memory)):
        if amount:
            out[name] = amount
    if resource.ephemeral_storage:
        out[EPHEMERAL_STORAGE] = resource.ephemeral_storage
    return out


def request(pod: Pod) -> dict[str, int]:
    """What a pod counts against its quota: its requests as the resource predicates count them
    (sidecars, init containers, overhead)."""
    return amounts(pod.requests)


def add(a: Amounts, b: Amounts, sign: int = 1) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        total = out.get(name, 0) + sign * amount
        if total:
            out[name] = total
        else:
            out.pop(name, None)
    return out


def total(parts: Iterable[Amounts]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        out = add(out, part)
    return out


Units = tuple[tuple[str, int], ...]

# (suffix, size) from the largest; cpu is counted in millicores, memory and storage in bytes.
_CPU_UNITS: Final[Units] = (("", 1000), ("m", 1))
_BYTE_UNITS: Final[Units] = (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))
_UNITS: Final[Mapping[str, Units]] = {CPU: _CPU_UNITS, MEMORY: _BYTE_UNITS, EPHEMERAL_STORAGE: _BYTE_UNITS}


def in_one_unit(name: str, *values: int) -> tuple[str, ...]:
    """`values` of resource `name` written in the largest unit that writes them all exactly:
    cpu 100 and 14900 (millicores) read "100m", "14900m"; memory 2Gi and 1Gi "2Gi", "1Gi"; zeros
    alone "0" (any unit writes them, and "0Ti" would read oddly in a status)."""
    units = _UNITS.get(name, ()) if any(values) else ()
    suffix, size = next(((u, n) for u, n in units if all(v % n == 0 for v in values)), ("", 1))
    return tuple(f"{v // size}{suffix}" for v in values)


# Judged whatever a pod asks for, as upstream's cmp2 does; extended resources only where asked.
_ALWAYS: Final = (CPU, MEMORY, EPHEMERAL_STORAGE)


def over(
    used: Amounts,
    extra: Amounts,
    limit: Amounts,
    *,
    unnamed_unlimited: bool = False,
    every_used: bool = False,
) -> list[str]:
    """The resources in which used + extra exceeds `limit`, sorted (upstream's cmp2).

    cpu, memory and ephemeral-storage are always judged; an extended resource when `extra` asks for
    it, or with `every_used` when `used` holds some. A resource `limit` does not name is unlimited
    with `unnamed_unlimited` (a max), else zero (a min)."""
    names = set(_ALWAYS)
    names.update(name for name, amount in extra.items() if amount > 0)
    if every_used:
        names.update(used)
    found = []
    for name in names:
        if name not in limit and unnamed_unlimited:
            continue
        if used.get(name, 0) + extra.get(name, 0) > limit.get(name, 0):
            found.append(name)
    return sorted(found)


@dataclass(frozen=True, slots=True)
class ElasticQuota:
    """One ElasticQuota's spec; `error` says what is wrong with one that cannot be used as written."""

    namespace: str
    name: str
    uid: str = ""
    created: datetime = field(default_factory=lambda: parse_time(None))
    min: Amounts = field(default_factory=dict)
    max: Amounts = field(default_factory=dict)
    error: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def elastic_quota_from_dict(obj: Mapping[str, Any]) -> ElasticQuota:
    """Parse an ElasticQuota; what cannot be used goes into `error`, never an exception."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errors: list[str] = []
    bounds: dict[str, dict[str, int]] = {}
    for bound in ("min", "max"):
        raw = spec.get(bound) or {}
        bounds[bound] = {}
        if not isinstance(raw, Mapping):
            errors.append(f"spec.{bound} must be a map of resource names to quantities")
            continue
        try:
            bounds[bound] = _limits(raw)
        except (QuantityError, TypeError, ValueError) as exc:
            errors.append(f"spec.{bound}: {exc}")
    created = meta.get("creationTimestamp")
    return ElasticQuota(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        created=parse_time(created if isinstance(created, str) else None),
        min=bounds["min"],
        max=bounds["max"],
        error="; ".join(errors),
    )


def _limits(raw: Mapping[str, Any]) -> dict[str, int]:
    """A ResourceList as limits: unlike amounts, a named zero stays (a max of 0 forbids)."""
    out: dict[str, int] = {}
    for name, quantity in raw.items():
        if name == PODS:
            continue
        named = amounts(resource_from_list({name: quantity}))
        out[name] = named.get(name, 0)
    return out


def effective(quotas: Iterable[ElasticQuota]) -> dict[str, ElasticQuota]:
    """The quota in force in each namespace: with more than one, the oldest (then the first by name)."""
    chosen: dict[str, ElasticQuota] = {}
    for quota in sorted(quotas, key=lambda q: (q.created, q.name)):
        if not quota.error:
            chosen.setdefault(quota.namespace, quota)
    return chosen


@dataclass(frozen=True, slots=True)
class QuotaState:
    """The quotas in force, by namespace, and what each one's pods use: the pods placed (bound or
    assumed) and not finished. Immutable, so a batch's snapshots share it as they share nodes."""

    quotas: Mapping[str, ElasticQuota] = field(default_factory=dict)
    used: Mapping[str, Amounts] = field(default_factory=dict)

    @classmethod
    def build(cls, quotas: Iterable[ElasticQuota], pods: Iterable[Pod]) -> QuotaState:
        """From every ElasticQuota and every placed pod (the cache's, or a snapshot's)."""
        chosen = effective(quotas)
        used: dict[str, dict[str, int]] = {}
        for pod in pods:
            if pod.namespace in chosen and counts(pod):
                used[pod.namespace] = add(used.get(pod.namespace, {}), request(pod))
        return cls(chosen, used)

    def __bool__(self) -> bool:
        return bool(self.quotas)

    def of(self, namespace: str) -> ElasticQuota | None:
        return self.quotas.get(namespace)

    def used_by(self, namespace: str) -> Amounts:
        return self.used.get(namespace, {})

    def with_pod(self, pod: Pod, sign: int = 1) -> QuotaState:
        """After placing `pod` on a node (sign 1) or removing it (-1); itself when no quota covers it."""
        if pod.namespace not in self.quotas or pod.phase in FINISHED:
            return self
        used = dict(self.used)
        used[pod.namespace] = add(used.get(pod.namespace, {}), request(pod), sign)
        return QuotaState(self.quotas, used)

    def without_pod(self, pod: Pod) -> QuotaState:
        return self.with_pod(pod, -1)

    def share(self, namespace: str) -> float:
        """Dominant share: the largest used/min over the resources the quota's pods use (one its min
        does not name: infinite); 0 for a namespace without a quota."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return 0.0
        ratios = [
            used / quota.min[name] if quota.min.get(name) else math.inf
            for name, used in self.used_by(namespace).items()
            if used > 0
        ]
        return max(ratios, default=0.0)

    def over_max(self, namespace: str, extra: Amounts) -> list[str]:
        """usedOverMaxWith: the resources in which the quota would pass its max with `extra`."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return []
        return over(self.used_by(namespace), extra, quota.max, unnamed_unlimited=True)

    def over_min(self, namespace: str, extra: Amounts | None = None) -> list[str]:
        """usedOverMin(With): the resources in which the quota is (or would be, with `extra`) over min."""
        quota = self.quotas.get(namespace)
        if quota is None:
            return []
        return over(self.used_by(namespace), extra or {}, quota.min, every_used=extra is None)

    def aggregated_over_min(self, extra: Amounts) -> list[str]:
        """aggregatedUsedOverMinWith: whether all quotas' use with `extra` would pass the sum of the mins."""
        used = total(self.used.values())
        mins = total(quota.min for quota in self.quotas.values())
        return over(used, extra, mins, every_used=True)


EMPTY: Final = QuotaState()


def counts(pod: Pod) -> bool:
    """Whether a pod's requests count against its quota: placed and not finished (a terminating
    pod holds its resources until it is gone, as upstream counts it)."""
    return bool(pod.node_name) and pod.phase not in FINISHED


__all__ = [
    "BORROWING",
    "CLUSTER",
    "EMPTY",
    "GUARANTEES",
    "KIND",
    "Amounts",
    "ElasticQuota",
    "QuotaState",
    "add",
    "amounts",
    "counts",
    "effective",
    "elastic_quota_from_dict",
    "in_one_unit",
    "over",
    "request",
    "total",
]
