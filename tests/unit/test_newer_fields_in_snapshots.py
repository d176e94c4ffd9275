"""Sidecars and 1.32's topology spread fields through snapshot files: `kubesched explain --snapshot`
and `simulate` read pods shaped as a 1.32 API server sends them (the local 1.20 API server would
drop these fields), a SchedulerPolicy's podTopologySpreadDefaultConstraints, and storage capacity
(CSIDriver and CSIStorageCapacity, which the local 1.20 API server does not serve).

The expected decisions are kube-scheduler 1.32's: requests with sidecars as
staging/src/k8s.io/component-helpers/resource/helpers.go (PodRequests) sums them, spread as
pkg/scheduler/framework/plugins/podtopologyspread/filtering.go and scoring.go count it, capacity
as pkg/scheduler/framework/plugins/volumebinding/binder.go (hasEnoughCapacity) checks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kubesched.cli import main
from kubesched.policy.compile import compile_policy, default_algorithm
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


def capacity_state() -> ClusterState:
    """A CSI driver tracking capacity, with 5Gi free on a1, none on a2 and 50Gi for zone b; two
    pending pods, each with a 10Gi claim of its WaitForFirstConsumer class."""
    driver = "csi.example.com"
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local"},
        "provisioner": driver,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    csi_driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": driver},
        "spec": {"attachRequired": False, "storageCapacity": True},
    }

    def capacity(name: str, topology: dict[str, str], size: str) -> dict[str, Any]:
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": name, "namespace": "kube-system"},
            "storageClassName": "local",
            "nodeTopology": {"matchLabels": topology},
            "capacity": size,
        }

    capacities = [
        capacity("a1", {"kubernetes.io/hostname": "a1"}, "5Gi"),
        capacity("zone-b", {ZONE: "b"}, "50Gi"),
    ]
    claims = []
    pods = []
    for name in ("db-0", "db-1"):
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                "spec": {
                    "storageClassName": "local",
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            }
        )
        pod = make_pod(name, cpu="100m")
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": name}}]
        pods.append(pod)
    objects = {
        "StorageClass": [storage_class],
        "PersistentVolumeClaim": claims,
        "CSIDriver": [csi_driver],
        "CSIStorageCapacity": capacities,
    }
    return ClusterState(zoned_nodes(), pods, objects, [])


def test_explain_and_simulate_check_storage_capacity_from_a_snapshot(tmp_path: Path) -> None:
    """kube-scheduler 1.32's VolumeBinding: a 10Gi claim is provisioned only on a node a capacity of
    its class reaches with 10Gi free, so only b1; the kinds keep their names in the file."""
    path = tmp_path / "snap.json"
    save(capacity_state(), str(path))
    saved = json.loads(path.read_text(encoding="utf-8"))["objects"]
    assert [c["metadata"]["name"] for c in saved["CSIStorageCapacity"]] == ["a1", "zone-b"]
    assert saved["CSIDriver"][0]["spec"]["storageCapacity"] is True
    rejected = explain_json(path, "default/db-0")["rejected"]
    assert {r["node"] for r in rejected} == {"a1", "a2"}
    assert rejected[0]["reasons"] == [
        {"by": "CheckVolumeBinding", "reason": "node(s) did not have enough free storage"}
    ]
    algorithm = default_algorithm()
    result = simulate(load(str(path)), algorithm, algorithm, scheduler_name=OWN, seed=0)
    assert [p.candidate for p in result.placements] == ["b1", "b1"]


def test_without_an_opted_in_driver_capacity_is_not_checked(tmp_path: Path) -> None:
    """As on Kubernetes 1.20 (and a driver without storageCapacity): every node may provision."""
    state = capacity_state()
    path = tmp_path / "snap.json"
    save(ClusterState(state.nodes, state.pods, {**state.objects, "CSIDriver": []}, []), str(path))
    assert explain_json(path, "default/db-0")["rejected"] == []


def test_simulate_from_a_snapshot_file_leaves_out_gated_pods_refuses_claims_and_counts_sidecars(
    tmp_path: Path,
) -> None:
    """`kubesched simulate --nodes-from FILE` on 1.32-shaped pods. a1 runs a sidecar pod (2 of its 3
    cpus): the pending sidecar pod (2 cpus) fits only a2, though the candidate packs (a1 would win
    were either pod's sidecar left out). A gated pod is left out with a note; a pod with
    spec.resourceClaims is placed by neither policy."""
    gated = make_pod("gated", cpu="100m")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    claims = make_pod("claims", cpu="100m")
    claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claims-gpu"}]
    nodes = [make_node(n, cpu="3", memory="8Gi", labels={ZONE: "a"}) for n in ("a1", "a2")]
    pods = [sidecar_pod("running", node_name="a1"), sidecar_pod("new"), gated, claims]
    path = tmp_path / "snap.json"
    save(ClusterState(nodes, pods, {}, []), str(path))
    policy = tmp_path / "pack.json"
    pack = {
        "kind": "Policy",
        "apiVersion": "v1",
        "priorities": [{"name": "MostRequestedPriority", "weight": 1}],
    }
    policy.write_text(json.dumps(pack))
    outcome = CliRunner().invoke(
        main, ["simulate", "--policy", str(policy), "--nodes-from", str(path), "-o", "json"]
    )
    assert outcome.exit_code == 0, outcome.output
    result = json.loads(outcome.output)
    placed = {p["pod"]: p for p in result["placements"]}
    assert sorted(placed) == ["default/claims", "default/new"]
    assert (placed["default/new"]["current"], placed["default/new"]["candidate"]) == ("a2", "a2")
    refused = placed["default/claims"]
    assert refused["current"] is None and refused["candidate"] is None
    assert "spec.resourceClaims (dynamic resource allocation)" in refused["candidateReason"]
    assert result["unschedulableInBoth"] == ["default/claims"]
    assert result["notes"] == ["1 pending pod(s) left out, waiting for scheduling gates: default/gated"]
