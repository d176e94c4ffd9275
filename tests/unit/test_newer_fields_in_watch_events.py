"""A pod of Kubernetes 1.32, as its API server sends it on a watch, read by the pod Informer: sidecars,
1.32's topology spread and pod affinity fields, scheduling gates, and a field kubesched refuses.

The local 1.20 API server prunes these fields, so the raw event line is replayed through
`Informer._watch` here, and the parsed pod checked the way the scheduler uses it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any, cast

import pytest
from kubernetes_asyncio import client

from kubesched.algorithm.generic import FitError
from kubesched.kube.informer import Informer
from kubesched.model.affinity import parse_pod_affinity
from kubesched.model.nodeinfo import NodeInfo, Snapshot
from kubesched.model.objects import Pod, node_from_dict, pod_from_dict
from kubesched.model.quantity import parse_quantity
from kubesched.plugins.pod_topology_spread.filtering import DO_NOT_SCHEDULE, pod_constraints
from kubesched.policy.compile import default_algorithm
from kubesched_dev.fixtures import WatchApi, make_node

ZONE = "topology.kubernetes.io/zone"
HASH = "pod-template-hash"


def container(name: str, cpu: str, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    return {
        "name": name,
        "image": f"example.com/{name}:1",
        "resources": {"requests": requests},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        **extra,
    }


def pod_132(gates: tuple[str, ...] = ("example.com/quota",)) -> dict[str, Any]:
    """web-0 as kube-apiserver 1.32 serves it: the API server has merged the affinity term's
    matchLabelKeys and mismatchLabelKeys into its labelSelector (1.31+), not the spread's."""
    labels = {"app": "web", HASH: "5d8f", "tenant": "blue"}
    spec: dict[str, Any] = {
        "initContainers": [
            container("proxy", "500m", "128Mi", restartPolicy="Always"),  # a sidecar
            container("migrate", "2"),  # runs beside the proxy: 2500m
        ],
        "containers": [container("web", "1", "256Mi")],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": [HASH],
                "minDomains": 3,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            }
        ],
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchLabels": {"app": "cache"},
                            "matchExpressions": [
                                {"key": HASH, "operator": "In", "values": ["5d8f"]},
                                {"key": "tenant", "operator": "NotIn", "values": ["blue"]},
                            ],
                        },
                        "namespaceSelector": {"matchLabels": {"team": "a"}},
                        "topologyKey": ZONE,
                        "matchLabelKeys": [HASH],
                        "mismatchLabelKeys": ["tenant"],
                    }
                ]
            }
        },
        "schedulingGates": [{"name": gate} for gate in gates],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "web-0-gpu"}],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "kubesched",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "web-0",
            "namespace": "default",
            "uid": "7f3a9c2e-web-0",
            "resourceVersion": "2001",
            "creationTimestamp": "2024-12-04T11:16:41Z",
            "labels": labels,
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


async def watched(raw: dict[str, Any]) -> Pod:
    """The pod the Informer hands on for one ADDED event line, parsed as the scheduler parses it
    (watched lean, as app/startup.py watches pods)."""
    seen: list[Pod] = []

    def handle(kind: str | None, obj: Mapping[str, Any]) -> None:
        assert kind == "ADDED"
        seen.append(pod_from_dict(obj))

    line = json.dumps({"type": "ADDED", "object": raw}).encode() + b"\n"
    informer = Informer(cast(client.ApiClient, WatchApi([line])), "/api/v1/pods", handle, lean=True)
    await informer._watch()
    assert informer.resource_version == "2001"
    (pod,) = seen
    return pod


async def test_a_raw_1_32_event_gives_the_requests_constraints_and_refusal() -> None:
    pod = await watched(pod_132())
    assert pod.parse_error is None
    # resource.PodRequests: web 1 + proxy 500m beside it; migrate needs 2 + the proxy's 500m.
    assert (pod.requests.milli_cpu, pod.requests.memory) == (2500, int(parse_quantity("384Mi")))
    assert pod.scheduling_gates == ("example.com/quota",)
    assert pod.unsupported == ("spec.resourceClaims (dynamic resource allocation)",)

    (spread,) = pod_constraints(pod, DO_NOT_SCHEDULE)
    policies = (spread.node_affinity_policy, spread.node_taints_policy)
    assert (spread.min_domains, policies) == (3, ("Ignore", "Honor"))
    # matchLabelKeys: only pods of the same template hash count.
    assert spread.selector.matches({"app": "web", HASH: "5d8f"})
    assert not spread.selector.matches({"app": "web", HASH: "0000"})

    affinity = parse_pod_affinity(pod)
    assert affinity.parse_error is None
    (term,) = affinity.required_affinity
    assert term.namespaces == frozenset()  # a namespaceSelector alone: not the pod's own namespace
    assert term.matches_labels("shop", {"app": "cache", HASH: "5d8f", "tenant": "red"}, {"team": "a"})
    assert not term.matches_labels("shop", {"app": "cache", HASH: "5d8f", "tenant": "red"}, {"team": "b"})
    assert not term.matches_labels("shop", {"app": "cache", HASH: "5d8f", "tenant": "blue"}, {"team": "a"})
    assert not term.matches_labels("shop", {"app": "cache", HASH: "0000", "tenant": "red"}, {"team": "a"})
    # The keys the API server merged are not merged twice.
    assert len(term.selector.requirements) == 3


async def test_once_ungated_the_refused_field_keeps_it_off_every_node() -> None:
    pod = await watched(pod_132(gates=()))
    assert pod.scheduling_gates == ()
    snapshot = Snapshot.of([NodeInfo(node_from_dict(make_node("n1", cpu="8")))])
    with pytest.raises(FitError) as caught:
        default_algorithm().schedule(pod, snapshot, random.Random(0))
    assert caught.value.summary() == (
        "0/1 nodes are available: pod has spec.resourceClaims (dynamic resource allocation), "
        "which kubesched does not implement."
    )
