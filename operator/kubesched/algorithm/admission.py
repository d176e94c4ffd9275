"""ElasticQuota admission: capacity scheduling's PreFilter (kubernetes-sigs/scheduler-plugins,
pkg/capacityscheduling/capacity_scheduling.go), run before the filters on the snapshot's QuotaState.

A pod of a namespace with a quota is refused while
- its quota's use, plus its request, plus the requests of the pods nominated (by preemption) in the
  same namespace with a priority >= its own, would pass the quota's `max`; or
- with borrowing `Guarantees` (upstream's rule, the default): the use of all quotas, plus its request,
  plus those nominated pods, plus the nominated pods of other quotas not over their `min`, would
  pass the sum of all the `min`s: a quota borrows only what the others leave of their guarantees.
  With `Cluster`, this rule is off: a quota borrows whatever the nodes have free, up to its max.
A pod of a namespace without a quota is never refused. A group's members are admitted together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from kubesched.algorithm.generic import FitError
from kubesched.model.objects import Pod
from kubesched.model.quota import GUARANTEES, Amounts, QuotaState, add, in_one_unit, request, total

OVER_MAX: Final = "over max"
OVER_MINS: Final = "the quotas' total use would pass the sum of their mins"


class QuotaError(FitError):
    """No node was tried: the pod's ElasticQuota refuses it (`quota`: ns/name, `message`: the rule
    and the resources)."""

    def __init__(self, pod: Pod, num_all_nodes: int, quota: str, message: str) -> None:
        self.quota = quota
        self.message = message
        super().__init__(pod, num_all_nodes, {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.pod, self.num_all_nodes, self.quota, self.message))

    def summary(self) -> str:
        return f"0/{self.num_all_nodes} nodes are available: ElasticQuota {self.quota}: {self.message}."


def refusal(
    quotas: QuotaState, pods: Sequence[Pod], nominated: Iterable[Pod] = (), borrowing: str = GUARANTEES
) -> tuple[str, str]:
    """(quota key, why) when the quota of `pods` (one namespace's, admitted together) refuses them,
    else ("", ""). `nominated`: the pods nominated to nodes, wherever they are."""
    namespace = pods[0].namespace
    quota = quotas.of(namespace)
    if quota is None:
        return "", ""
    uids = {pod.uid for pod in pods}
    priority = min(pod.priority for pod in pods)
    own = total(request(pod) for pod in pods)
    everyone = own
    for other in nominated:
        if other.uid in uids or quotas.of(other.namespace) is None:
            continue
        if other.namespace == namespace:
            if other.priority >= priority:
                own = add(own, request(other))
                everyone = add(everyone, request(other))
        elif not quotas.over_min(other.namespace):
            everyone = add(everyone, request(other))
    beyond = quotas.over_max(namespace, own)
    if beyond:
        return quota.key, f"{OVER_MAX}: {_excess(beyond, quotas.used_by(namespace), own, quota.max)}"
    if borrowing == GUARANTEES:
        beyond = quotas.aggregated_over_min(everyone)
        if beyond:
            used = total(quotas.used.values())
            mins = total(q.min for q in quotas.quotas.values())
            return quota.key, f"{OVER_MINS}: {_excess(beyond, used, everyone, mins)}"
    return "", ""


def quota_error(
    quotas: QuotaState,
    pods: Sequence[Pod],
    num_nodes: int,
    nominated: Iterable[Pod] = (),
    borrowing: str = GUARANTEES,
) -> QuotaError | None:
    """The QuotaError of the first of `pods` when their quota refuses them."""
    key, why = refusal(quotas, pods, nominated, borrowing)
    return QuotaError(pods[0], num_nodes, key, why) if key else None


def _excess(names: Sequence[str], used: Amounts, extra: Amounts, limit: Amounts) -> str:
    """ "example.com/gpu 8 > 6" per resource: what the use would be, and the limit."""
    parts = []
    for name in names:
        would, bound = in_one_unit(name, used.get(name, 0) + extra.get(name, 0), limit.get(name, 0))
        parts.append(f"{name} {would} > {bound}")
    return ", ".join(parts)


__all__ = ["QuotaError", "quota_error", "refusal"]
