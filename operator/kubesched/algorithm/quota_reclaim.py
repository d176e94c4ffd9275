"""Reclaim by preemption: which pods a preemptor may evict when ElasticQuotas are in force, and
the quota checks a node must pass after the evictions (scheduler-plugins'
pkg/capacityscheduling/capacity_scheduling.go, SelectVictimsOnNode and PodEligibleToPreemptOthers).

- A preemptor whose quota stays within its `min` (used + its nominated pods + request <= min)
  reclaims: its victims are pods of other quotas over their `min`, of any priority. While the
  victims of a node are gathered (least important first), a quota stops giving pods as soon as
  it is no longer over its `min`.
- A preemptor over its `min` (borrowing) may evict only lower-priority pods of its own quota.
- A preemptor without a quota may evict only lower-priority pods without a quota.
- After the evictions its quota must not pass its `max`, nor all quotas the sum of the `min`s;
  a pod reprieved that breaks these checks is a victim after all.

`ReclaimSettings` holds what goes beyond upstream, each off by default; with the defaults the
decisions are upstream's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kubesched.model.nodeinfo import Snapshot
from kubesched.model.objects import Pod
from kubesched.model.quota import Amounts, ElasticQuota, QuotaState, add, request, total

ERR_REASON_QUOTA = "ElasticQuota exceeded even after preemption"
# The rule a victim was evicted by (events, kubesched_quota_reclaim_evictions_total).
RECLAIM = "reclaim"
OWN_QUOTA = "own_quota"


@dataclass(frozen=True, slots=True)
class ReclaimSettings:
    """Quota preemption beyond upstream's capacity scheduling (SchedulerPolicy `spec.quotas`).

    `protect_min` (`protectMin`): a pod of another quota is reclaimed only when its quota keeps
    its `min` without it, in every resource the pod asks for (Volcano's reclaim rule); upstream
    takes pods from a quota while it is over its `min`, and the last one may leave it below.
    """

    protect_min: bool = False


UPSTREAM = ReclaimSettings()


@dataclass(frozen=True, slots=True)
class Reclaim:
    """One preemptor's view of the quotas.

    `quotas`: the use of the placed pods, the nominated pods the snapshot holds left out (upstream
    counts assigned pods only); `in_quota` and `everywhere`: the preemptor's request plus those
    nominated pods, of its own quota (nominatedPodsReqInEQWithPodReq) and of every quota within
    its `min` (nominatedPodsReqWithPodReq).
    """

    pod: Pod
    quotas: QuotaState
    own: ElasticQuota | None
    request: Amounts
    in_quota: Amounts
    everywhere: Amounts
    within_min: bool  # the preemptor reclaims from other quotas
    nominated: Collection[str]
    settings: ReclaimSettings

    @classmethod
    def of(
        cls,
        pod: Pod,
        snapshot: Snapshot,
        settings: ReclaimSettings = UPSTREAM,
        nominated: Collection[str] = (),
    ) -> Reclaim | None:
        """None when no quota is in force: preemption is then kube-scheduler's.

        `nominated`: the uids of the pods the snapshot holds on nodes only because they are
        nominated there (they take room, but are neither victims nor used)."""
        quotas = snapshot.quotas
        if not quotas:
            return None
        held = (
            [p for info in snapshot.nodes for p in info.pods.values() if p.uid in nominated]
            if nominated
            else []
        )
        for other in held:
            quotas = quotas.without_pod(other)
        asked = request(pod)
        mine = [p for p in held if p.namespace == pod.namespace and p.priority >= pod.priority]
        in_quota = add(total(request(p) for p in mine), asked)
        lent = (
            p
            for p in held
            if p.namespace != pod.namespace
            and quotas.of(p.namespace) is not None
            and not quotas.over_min(p.namespace)
        )
        everywhere = add(in_quota, total(request(p) for p in lent))
        own = quotas.of(pod.namespace)
        within = own is not None and not quotas.over_min(pod.namespace, in_quota)
        return cls(pod, quotas, own, asked, in_quota, everywhere, within, frozenset(nominated), settings)

    def candidate(self, victim: Pod) -> bool:
        """Whether the preemptor may evict `victim` at all, whatever the quotas' use."""
        if victim.uid in self.nominated:
            return False
        victim_quota = self.quotas.of(victim.namespace)
        if self.own is None:
            return victim_quota is None and victim.priority < self.pod.priority
        if victim_quota is None:
            return False
        if self.within_min:
            return victim.namespace != self.pod.namespace
        return victim.namespace == self.pod.namespace and victim.priority < self.pod.priority

    def reclaimable(self, pods: Iterable[Pod], quotas: QuotaState) -> bool:
        """Whether a candidate (a pod, or a gang's members) is a victim, given the use the
        evictions chosen so far leave: another quota gives pods only while over its `min`."""
        if not self.within_min:
            return True
        pods = list(pods)
        namespace = pods[0].namespace
        if not quotas.over_min(namespace):
            return False
        if not self.settings.protect_min:
            return True
        quota = quotas.of(namespace)
        assert quota is not None
        used = quotas.used_by(namespace)
        taken = total(request(p) for p in pods)
        return all(used.get(name, 0) - amount >= quota.min.get(name, 0) for name, amount in taken.items())

    def admits(self, quotas: QuotaState, *, with_nominated: bool) -> bool:
        """The preemptor passes its quota's `max` and the sum of the `min`s on `quotas`: with its
        request alone after every candidate is removed, with the nominated pods too while
        reprieving, as upstream checks each."""
        if self.own is None:
            return True
        mine, everyone = (self.in_quota, self.everywhere) if with_nominated else (self.request, self.request)
        return not quotas.over_max(self.pod.namespace, mine) and not quotas.aggregated_over_min(everyone)

    def terminating(self, pods: Iterable[Pod]) -> bool:
        """PodEligibleToPreemptOthers with quotas: whether one of `pods` (on the nominated node)
        is terminating and is a pod this preemptor could have evicted."""
        for other in pods:
            if not other.deleting or other.uid in self.nominated:
                continue
            other_quota = self.quotas.of(other.namespace)
            if self.own is None:
                if other_quota is None and other.priority < self.pod.priority:
                    return True
            elif other_quota is None:
                continue
            elif other.namespace == self.pod.namespace:
                if other.priority < self.pod.priority:
                    return True
            elif self.within_min and self.quotas.over_min(other.namespace):
                return True
        return False


def victim_rule(preemptor: Pod, victim: Pod, quotas: QuotaState) -> tuple[str, str]:
    """(rule, why) a victim chosen under quotas was evicted by; ("", "") when preemption was
    kube-scheduler's. A preemptor within its min evicts only pods of other quotas, one over its min
    only pods of its own (Reclaim.candidate): the namespaces tell which."""
    own, theirs = quotas.of(preemptor.namespace), quotas.of(victim.namespace)
    if own is None or theirs is None:
        return "", ""
    if own.key != theirs.key:
        return RECLAIM, f"ElasticQuota {theirs.key} over its min, reclaimed by {own.key} within its min"
    return OWN_QUOTA, f"lower priority in ElasticQuota {own.key}, which borrows beyond its min"


__all__ = [
    "ERR_REASON_QUOTA",
    "OWN_QUOTA",
    "RECLAIM",
    "UPSTREAM",
    "Reclaim",
    "ReclaimSettings",
    "victim_rule",
]
