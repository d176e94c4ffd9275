"""InterPodAffinity (kube-scheduler 1.20 pkg/scheduler/framework/plugins/interpodaffinity/).

Predicate MatchInterPodAffinity: required pod affinity and anti-affinity, the pod's and the
existing pods'. Priority InterPodAffinityPriority: preferred terms both ways, and the existing
pods' required affinity at hardPodAffinitySymmetricWeight.

Reasons: ERR_REASON_AFFINITY_NOT_MATCH with one of ERR_REASON_AFFINITY_RULES_NOT_MATCH (no
eviction helps), ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.inter_pod_affinity.filtering import (
    ERR_REASON_AFFINITY_NOT_MATCH,
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    MatchInterPodAffinity,
)
from kubesched.plugins.inter_pod_affinity.scoring import InterPodAffinityPriority

register(
    predicate(
        MatchInterPodAffinity,
        order=23,
        framework="InterPodAffinity",
        default=True,
        summary="Required pod affinity and anti-affinity, the placed pods' anti-affinity included.",
    ),
    priority(
        InterPodAffinityPriority,
        framework="InterPodAffinity",
        default_weight=1,
        summary="Preferred pod affinity and anti-affinity, both ways.",
    ),
)

__all__ = [
    "ERR_REASON_AFFINITY_NOT_MATCH",
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "InterPodAffinityPriority",
    "MatchInterPodAffinity",
]
