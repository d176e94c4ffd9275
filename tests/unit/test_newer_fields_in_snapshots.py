"""Sidecars and 1.32's topology spread fields through snapshot files: `kubesched explain --snapshot`
and `simulate` read pods shaped as a 1.32 API server sends them (the local 1.20 API server would
drop these fields), and a SchedulerPolicy's podTopologySpreadDefaultConstraints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kubesched.cli import main
from kubesched.policy.compile import compile_policy
from kubesched.tools.simulate import simulate
from kubesched.tools.snapshot import ClusterState, load, save
from kubesched_dev.fixtures import make_node, make_pod

OWN = "kubesched"
ZONE = "topology.kubernetes.io/zone"


def sidecar_pod(name: str, *, node_name: str | None = None) -> dict[str, Any]:
    """A 1-cpu pod with a 1-cpu restartable init container, as a 1.32 API server returns it."""
    pod = make_pod(name, cpu="1", node_name=node_name)
    pod["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "proxy:1",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "1"}},
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
    ]
    return pod


def spread_pod(name: str, **fields: Any) -> dict[str, Any]:
    pod = make_pod(name, cpu="100m", labels={"app": "web"})
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            **fields,
        }
    ]
    return pod


def zoned_nodes() -> list[dict[str, Any]]:
    return [
        make_node(n, cpu="3", memory="8Gi", labels={ZONE: z})
        for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"))
    ]


def explain_json(path: Path, pod: str) -> dict[str, Any]:
    outcome = CliRunner().invoke(main, ["explain", pod, "--snapshot", str(path), "-o", "json"])
    assert outcome.exit_code == 0, outcome.output
    document: dict[str, Any] = json.loads(outcome.output)
    return document


def test_explain_counts_a_bound_pods_sidecar_and_the_pending_pods_own(tmp_path: Path) -> None:
    """a1 runs a sidecar pod (2 cpus of 3): the pending one (2 cpus) fits a2 and b1 only."""
    state = ClusterState(zoned_nodes(), [sidecar_pod("running", node_name="a1"), sidecar_pod("new")], {}, [])
    path = tmp_path / "snap.json"
    save(state, str(path))
    assert load(str(path)).pods[1]["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    document = explain_json(path, "default/new")
    assert [r["node"] for r in document["rejected"]] == ["a1"]
    assert document["rejected"][0]["reasons"] == [{"by": "PodFitsResources", "reason": "Insufficient cpu"}]


def test_explain_applies_min_domains_from_a_snapshot(tmp_path: Path) -> None:
    """Zones a and b run one web pod each: the global minimum is 1 and every node fits, unless
    minDomains 3 exceeds the 2 domains, which makes it 0 (1 + 1 - 0 > maxSkew 1 everywhere)."""
    running = [
        make_pod(f"web-{node}", cpu="100m", labels={"app": "web"}, node_name=node) for node in ("a1", "b1")
    ]
    pods = [*running, spread_pod("plain"), spread_pod("min", minDomains=3, nodeAffinityPolicy="Ignore")]
    path = tmp_path / "snap.json"
    save(ClusterState(zoned_nodes(), pods, {}, []), str(path))
    assert explain_json(path, "default/plain")["rejected"] == []
    rejected = explain_json(path, "default/min")["rejected"]
    assert {r["node"] for r in rejected} == {"a1", "a2", "b1"}
    assert rejected[0]["reasons"] == [
        {"by": "EvenPodsSpread", "reason": "node(s) didn't match pod topology spread constraints"}
    ]


def test_simulate_spreads_a_services_pods_by_the_policys_default_constraints() -> None:
    """podTopologySpreadDefaultConstraints (DoNotSchedule on the zone): pending web pods without
    constraints of their own stay within one pod of each other per zone."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}}
    service["spec"] = {"selector": {"app": "web"}}
    pending = [make_pod(f"web-{i}", cpu="100m", labels={"app": "web"}) for i in range(4)]
    state = ClusterState(zoned_nodes(), pending, {"Service": [service]}, [])
    base = {
        "predicates": [{"name": "EvenPodsSpread"}],
        "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
    }
    plain = compile_policy(base)
    spread = compile_policy(
        {
            **base,
            "podTopologySpreadDefaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
            ],
        }
    )
    result = simulate(state, spread, plain, scheduler_name=OWN, seed=0)
    zone = {"a1": "a", "a2": "a", "b1": "b"}
    assert sorted(zone[p.candidate or ""] for p in result.placements) == ["a", "a", "b", "b"]
    # Without it the least requested nodes win: zone a has two of the three.
    assert sorted(zone[p.current or ""] for p in result.placements) == ["a", "a", "a", "b"]
