"""ServiceAffinity (kube-scheduler 1.20 pkg/scheduler/framework/plugins/serviceaffinity/).

Predicate CheckServiceAffinity (custom predicates with a `serviceAffinity` argument): a Service's
pods on nodes that agree on some labels. Priority ServiceAntiAffinity, alias ServiceAffinity
(custom priorities with a `serviceAntiAffinity` argument): a Service's pods spread over a label.

Reason: ERR_REASON_SERVICE_AFFINITY.
"""

from __future__ import annotations

from kubesched.plugins.declare import predicate, priority, register
from kubesched.plugins.service_affinity.filtering import (
    ERR_REASON_SERVICE_AFFINITY,
    CheckServiceAffinity,
)
from kubesched.plugins.service_affinity.scoring import ServiceAntiAffinityPriority

register(
    predicate(
        CheckServiceAffinity,
        order=11,
        argument_key="serviceAffinity",
        summary="The pods of a Service go to nodes that agree on the listed labels.",
    ),
    priority(
        ServiceAntiAffinityPriority,
        aliases=("ServiceAffinity",),
        argument_key="serviceAntiAffinity",
        summary="Spreads a Service's pods over the values of a node label.",
    ),
)

__all__ = [
    "ERR_REASON_SERVICE_AFFINITY",
    "CheckServiceAffinity",
    "ServiceAntiAffinityPriority",
]
