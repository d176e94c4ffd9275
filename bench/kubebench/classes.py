"""Workload classes with pod-to-pod and node constraints, run by kube-scheduler and kubesched alike.

Each class is a pending batch of apps of APP_SIZE pods, as Deployments make them: one label per
app, one Service per app (so that the default spreading has its selectors), and every pod of an
app carrying the same constraints. Requests are drawn as `workload.make_pods` draws them, with
no nodeSelector; `mix` is `workload.make_pods` itself, the pods of the batch runs.
Everything is drawn from the seed, so every scheduler meets the same pods in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubebench import workload
from kubesched_dev.fixtures import make_pod

APP_SIZE = 20
HOSTNAME = "kubernetes.io/hostname"
ZONE = workload.ZONE_LABELS[0]
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

ANTI_AFFINITY = "anti-affinity"
AFFINITY = "affinity"
PREFERRED = "preferred"
SPREAD = "spread"
NODE_AFFINITY = "node-affinity"
MIX = "mix"

# The goal on makespan pods/s, kubesched (default sampling) / kube-scheduler, per class.
MAKESPAN_GOAL = 1.5
MIX_MAKESPAN_GOAL = 2.0

Spec = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    """A class: its name (in scenario names and --classes), what it asks, and the spec fields
    (affinity, topologySpreadConstraints) every pod of an app gets."""

    name: str
    title: str
    constraints: Callable[[str, random.Random], Spec]
    makespan_goal: float = MAKESPAN_GOAL


def app_name(index: int) -> str:
    return f"app-{index:04d}"


def own_app(app: str) -> dict[str, Any]:
    return {"matchLabels": {"app": app}}


def _anti_affinity(app: str, rng: random.Random) -> Spec:
    term = {"labelSelector": own_app(app), "topologyKey": HOSTNAME}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _affinity(app: str, rng: random.Random) -> Spec:
    # To the app's own pods: the first pod of an app is let through (no pod matches yet, and it
    # matches its own term), the rest follow it into its zone.
    term = {"labelSelector": own_app(app), "topologyKey": ZONE}
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _preferred(app: str, rng: random.Random) -> Spec:
    near = {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [app]}]},
        "topologyKey": ZONE,
    }
    apart = {"labelSelector": own_app(app), "topologyKey": HOSTNAME}
    return {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": near}]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": apart}]
            },
        }
    }


def _spread(app: str, rng: random.Random) -> Spec:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": own_app(app),
            },
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": own_app(app),
            },
        ]
    }


def _node_affinity(app: str, rng: random.Random) -> Spec:
    """Half the apps: 3 of the 5 zones and no 4-core node; the other half: an SSD node, or (a second,
    ORed term) a 16-core node in one zone. All prefer one zone, and then larger machines."""
    zones = sorted(rng.sample(workload.ZONES, 3))
    if int(app.rsplit("-", 1)[1]) % 2 == 0:
        terms = [
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": zones},
                    {"key": INSTANCE_TYPE, "operator": "NotIn", "values": ["standard-4"]},
                ]
            }
        ]
    else:
        terms = [
            {"matchExpressions": [{"key": workload.SSD_LABEL, "operator": "Exists"}]},
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": zones[:1]},
                    {"key": INSTANCE_TYPE, "operator": "In", "values": ["standard-16"]},
                ]
            },
        ]
    one_zone = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones[:1]}]}
    preferred = [
        {"weight": 60, "preference": one_zone},
        {
            "weight": 30,
            "preference": {
                "matchExpressions": [
                    {"key": INSTANCE_TYPE, "operator": "In", "values": ["highmem-8", "standard-16"]}
                ]
            },
        },
    ]
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
                "preferredDuringSchedulingIgnoredDuringExecution": preferred,
            }
        }
    }


def _none(app: str, rng: random.Random) -> Spec:
    return {}


CLASSES: dict[str, WorkloadClass] = {
    c.name: c
    for c in (
        WorkloadClass(ANTI_AFFINITY, "required anti-affinity (hostname) within each app", _anti_affinity),
        WorkloadClass(AFFINITY, "required affinity (zone) to the app's pods", _affinity),
        WorkloadClass(PREFERRED, "preferred affinity (zone) and anti-affinity (hostname)", _preferred),
        WorkloadClass(SPREAD, "spread: zone DoNotSchedule maxSkew 1 + host ScheduleAnyway", _spread),
        WorkloadClass(NODE_AFFINITY, "node affinity, required and preferred", _node_affinity),
        WorkloadClass(MIX, "the batch mix, no pod-to-pod terms", _none, MIX_MAKESPAN_GOAL),
    )
}


def make_class_pods(
    name: str, count: int, namespace: str, scheduler_name: str, seed: int
) -> list[dict[str, Any]]:
    """`count` pending pods of class `name`: apps of APP_SIZE pods in order, each app's constraints
    drawn once from `seed`."""
    if name == MIX:
        return workload.make_pods(count, namespace, scheduler_name, seed)
    constraints = CLASSES[name].constraints
    rng = random.Random(f"{name}-pods-{seed}")
    requests = [r for r, _ in workload.POD_REQUESTS]
    weights = [w for _, w in workload.POD_REQUESTS]
    specs: dict[str, Spec] = {}
    pods = []
    for i in range(count):
        app = app_name(i // APP_SIZE)
        if app not in specs:
            specs[app] = constraints(app, random.Random(f"{name}-{app}-{seed}"))
        shape = rng.choices(requests, weights=weights)[0]
        cpu, memory = shape if shape else (None, None)
        pod = make_pod(
            workload.pod_name(i),
            namespace,
            scheduler_name,
            cpu=cpu,
            memory=memory,
            labels={"app": app, "bench": "true"},
        )
        pod["spec"].update(specs[app])
        pods.append(pod)
    return pods


def make_class_services(name: str, pods: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """A Service per app (the mix: the batch runs' two Services). Headless: 500 apps would exhaust the
    control plane's /24 of service IPs, and spreading reads only a Service's selector."""
    if name == MIX:
        return workload.make_services(namespace)
    apps = dict.fromkeys(p["metadata"]["labels"]["app"] for p in pods)
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"svc-{app}", "namespace": namespace},
            "spec": {
                "clusterIP": "None",
                "selector": {"app": app},
                "ports": [{"port": 80, "protocol": "TCP"}],
            },
        }
        for app in apps
    ]
