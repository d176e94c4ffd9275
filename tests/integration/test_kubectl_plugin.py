"""`kubectl kubesched` against the real API server: the installed `kubectl-kubesched` run as a user
runs it, with kubectl's flags, and through kubectl itself (which finds it on PATH)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import STRATEGIC_MERGE_PATCH, request
from kubesched.policy.compile import compile_policy
from kubesched.policy.files import load_policy_file
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod

from .kubeapi import wait_bound
from .kubesched_process import KubeschedProcess
from .test_readme import block, commands, shop  # noqa: F401  # shop: the README's pod, a fixture

VENV_BIN = Path(sys.executable).parent
PLUGIN = VENV_BIN / "kubectl-kubesched"
UNFIT = {"node": "", "reasons": [{"by": "PodFitsResources", "reason": "Insufficient cpu"}]}
SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"


def run(argv: list[str], kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` with the venv's bin first on PATH (where kubectl looks for plugins), and no other
    kubeconfig than `kubeconfig`."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env["PATH"] = os.pathsep.join([str(VENV_BIN), "/usr/bin", "/bin"])
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


async def plugin(*args: str, kubeconfig: Path | None = None) -> str:
    """`kubectl-kubesched ARGS`' standard output; fails the test on a non-zero exit."""
    assert PLUGIN.exists(), f"{PLUGIN} is missing: install the package (pip install -e .)"
    result = await asyncio.to_thread(run, [str(PLUGIN), *args], kubeconfig)
    assert result.returncode == 0, f"kubectl-kubesched {' '.join(args)}: {result.stderr}"
    return result.stdout


def kubeconfig_with_contexts(
    control_plane: LocalControlPlane, path: Path, namespaces: dict[str, str]
) -> Path:
    """The control plane's kubeconfig with one context per (name: namespace), the first current."""
    document = yaml.safe_load(control_plane.kubeconfig.read_text())
    (context,) = document["contexts"]
    document["contexts"] = [
        {"name": name, "context": {**context["context"], "namespace": namespace}}
        for name, namespace in namespaces.items()
    ]
    document["current-context"] = next(iter(namespaces))
    path.write_text(yaml.safe_dump(document))
    return path


@pytest_asyncio.fixture
async def big(api: ApiClient, namespace: str) -> str:
    """A pod `big` in `namespace` that fits neither node; its scheduler name is its own, so that no
    SchedulerPolicy drives it and the built-in default runs."""
    name = f"ks-{namespace}"
    await create_nodes(api, [make_node("small-a", cpu="1"), make_node("small-b", cpu="2")])
    await create_pods(api, [make_pod("big", namespace, name, cpu="4", memory="1Gi")])
    return name


async def explain_json(*args: str, kubeconfig: Path) -> Any:
    return json.loads(await plugin("explain", *args, "-o", "json", kubeconfig=kubeconfig))


async def test_explain_finds_the_pod_in_the_namespace_of_n_or_of_the_context(
    control_plane: LocalControlPlane, namespace: str, big: str, tmp_path: Path
) -> None:
    admin = control_plane.kubeconfig  # its context's namespace is default
    explained = await explain_json("big", "-n", namespace, kubeconfig=admin)
    assert explained["pod"] == f"{namespace}/big" and explained["scheduler_name"] == big
    assert explained["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert explained["rejected"] == [{**UNFIT, "node": "small-a"}, {**UNFIT, "node": "small-b"}]
    assert explained["feasible"] == [] and explained["best"] == []
    as_yaml = await plugin("explain", "big", "-n", namespace, "-o", "yaml", "--kubeconfig", str(admin))
    assert yaml.safe_load(as_yaml) == explained
    assert await explain_json(f"{namespace}/big", kubeconfig=admin) == explained

    # No -n: the namespace of the current context, or of the one --context names.
    ours = kubeconfig_with_contexts(control_plane, tmp_path / "ours", {"test": namespace, "plain": "default"})
    assert await explain_json("big", kubeconfig=ours) == explained
    theirs = kubeconfig_with_contexts(
        control_plane, tmp_path / "theirs", {"plain": "default", "test": namespace}
    )
    assert await explain_json("big", "--context", "test", kubeconfig=theirs) == explained
    missing = await asyncio.to_thread(run, [str(PLUGIN), "explain", "big"], theirs)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == "error: pod default/big not found\n"

    table = await plugin("explain", "big", kubeconfig=ours)
    assert "\x1b[" not in table  # a pipe, not a terminal: no colour
    assert table.splitlines()[1] == explained["message"]
    assert "small-a  PodFitsResources  Insufficient cpu" in table


async def test_snapshot_and_simulate_take_kubectls_flags_too(
    control_plane: LocalControlPlane, namespace: str, big: str, tmp_path: Path
) -> None:
    ours = kubeconfig_with_contexts(control_plane, tmp_path / "ours", {"plain": "default", "test": namespace})
    snapshot = tmp_path / "cluster.json"
    saved = await asyncio.to_thread(
        run, [str(PLUGIN), "snapshot", "save", str(snapshot), "--context", "test"], ours
    )
    assert saved.returncode == 0 and saved.stderr.startswith("saved 2 node(s), 1 pod(s) (1 pending)"), (
        saved.stderr
    )
    offline = await explain_json("big", "--snapshot", str(snapshot), "-n", namespace, kubeconfig=ours)
    assert offline["message"] == "0/2 nodes are available: 2 Insufficient cpu."

    policy = tmp_path / "candidate.json"
    policy.write_text(json.dumps({"kind": "Policy", "apiVersion": "v1", "priorities": []}))
    simulate = ["simulate", "--policy", str(policy), "--scheduler-name", big, "-o", "json"]
    # The context's namespace (default) holds none of the pods; --context test's does.
    assert json.loads(await plugin(*simulate, kubeconfig=ours))["pods"] == 0
    simulated = json.loads(await plugin(*simulate, "--context", "test", kubeconfig=ours))
    assert simulated["unschedulableInBoth"] == [f"{namespace}/big"]
    assert json.loads(await plugin(*simulate, "-A", kubeconfig=ours)) == simulated


async def test_kubectl_finds_the_plugin_on_path(
    control_plane: LocalControlPlane, namespace: str, big: str, tmp_path: Path
) -> None:
    kubectl = control_plane.bin_dir / "kubectl"
    if not kubectl.exists():
        pytest.skip(f"{kubectl} is not built")
    ours = kubeconfig_with_contexts(control_plane, tmp_path / "ours", {"test": namespace})
    listed = await asyncio.to_thread(run, [str(kubectl), "plugin", "list"], ours)
    assert str(PLUGIN) in listed.stdout, listed.stdout + listed.stderr
    for args in (["explain", "big", "-n", namespace, "-o", "json"], ["explain", "big"], ["version"]):
        through_kubectl = await asyncio.to_thread(run, [str(kubectl), "kubesched", *args], ours)
        assert through_kubectl.returncode == 0, through_kubectl.stderr
        assert through_kubectl.stdout == await plugin(*args, kubeconfig=ours)
    failed = await asyncio.to_thread(run, [str(kubectl), "kubesched", "explain", "nothere"], ours)
    assert (failed.returncode, failed.stderr) == (1, f"error: pod {namespace}/nothere not found\n")


@pytest.mark.usefixtures("shop")
async def test_kubectl_kubesched_explain_prints_what_the_readme_shows(
    control_plane: LocalControlPlane,
) -> None:
    (command,) = commands("kubectl-kubesched")
    assert command[:3] == ["kubectl", "kubesched", "explain"]
    kubectl = control_plane.bin_dir / "kubectl"
    argv = [str(kubectl), *command[1:]] if kubectl.exists() else [str(PLUGIN), *command[2:]]
    result = await asyncio.to_thread(run, argv, control_plane.kubeconfig)
    assert result.returncode == 0, result.stderr
    assert result.stdout == block("explain-output") + "\n"


async def test_explain_judges_with_the_policy_file_the_running_scheduler_publishes(
    api: ApiClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    """`make run`'s case: the scheduler runs a policy file and no SchedulerPolicy names it. Its
    leader publishes the file on its Lease, and explain, given nothing, judges with it."""
    name = f"ks-{namespace}"
    await create_nodes(api, [make_node("pa", cpu="4"), make_node("pb", cpu="8")])
    args = ["--policy-config-file", str(SEED_POLICY)]
    with KubeschedProcess(control_plane.kubeconfig, name, tmp_path, args) as scheduler:
        scheduler.wait_for_log("leader_elected")
        await create_pods(api, [make_pod("web", namespace, name, cpu="1")])
        await wait_bound(api, namespace, 1)
        explained = await explain_json(f"{namespace}/web", kubeconfig=control_plane.kubeconfig)
    runs = compile_policy(load_policy_file(SEED_POLICY))
    assert explained["policy"] == f"{SEED_POLICY}, published on Lease kube-system/{name}"
    assert "warnings" in explained and explained["warnings"] == []
    assert explained["message"].startswith("bound to pb; judged as if it were pending now: ")
    for node in explained["feasible"]:
        ran = [(w.label, w.weight) for w in runs.priorities]
        assert [(p["priority"], p["weight"]) for p in node["priorities"]] == ran
    # Released on shutdown, the Lease still tells which policy its last leader ran.
    table = await plugin("explain", f"{namespace}/web", kubeconfig=control_plane.kubeconfig)
    assert table.splitlines()[0].endswith(
        f"policy {SEED_POLICY}, published on Lease kube-system/{name}, released   2 node(s)"
    )
    assert "WARNING" not in table
    await request(api, "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")


async def test_explain_says_loudly_when_no_scheduler_publishes_its_policy(
    control_plane: LocalControlPlane, namespace: str, big: str
) -> None:
    table = await plugin("explain", f"{namespace}/big", kubeconfig=control_plane.kubeconfig)
    lines = table.splitlines()
    assert lines[0].startswith(
        f"Pod {namespace}/big   scheduler {big}   policy built-in default (kube-scheduler 1.20)"
    )
    assert lines[2] == (
        f"WARNING: the scheduler's policy is unknown: no Lease publishes the policy of scheduler {big} "
        "(it is not running, runs without leader election, or is older than this explain); judged with "
        "the built-in default (kube-scheduler 1.20) instead"
    )


async def test_quota_lists_the_elastic_quotas_their_use_and_the_pods_waiting_on_them(
    api: ApiClient, control_plane: LocalControlPlane, namespace: str
) -> None:
    quotas = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/elasticquotas"
    # A min in a resource nobody else uses: the sum of the mins other tests' quotas see is theirs.
    spec = {"min": {"example.com/widget": "2"}, "max": {"cpu": "2", "example.com/widget": "4"}}
    manifest = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "eq", "namespace": namespace},
        "spec": spec,
    }
    status, reply = await request(api, "POST", quotas, manifest)
    assert status == 201, reply
    try:
        await create_nodes(api, [make_node("quota-node", cpu="8")])
        running = make_pod("running", namespace, "kubesched", cpu="1500m", node_name="quota-node")
        await create_pods(api, [running, make_pod("waiting", namespace, "kubesched", cpu="1")])
        message = f"0/1 nodes are available: ElasticQuota {namespace}/eq: over max: cpu 2500m > 2000m."
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        status, reply = await request(
            api,
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/waiting/status",
            {"status": {"conditions": [condition]}},
            content_type=STRATEGIC_MERGE_PATCH,
        )
        assert status == 200, reply
        admin = control_plane.kubeconfig
        found = json.loads(await plugin("quota", "-n", namespace, "-o", "json", kubeconfig=admin))
        assert found == {
            "quotas": [
                {
                    "namespace": namespace,
                    "name": "eq",
                    "inForce": True,
                    "problem": "",
                    "resources": [
                        {"resource": "cpu", "used": "1500m", "min": "0m", "max": "2000m"},
                        {"resource": "example.com/widget", "used": "0", "min": "2", "max": "4"},
                    ],
                    "waiting": ["waiting"],
                }
            ]
        }
        table = await plugin("quota", "-n", namespace, kubeconfig=admin)
        assert table.splitlines()[1].split() == [namespace, "eq", "cpu", "1500m", "0m", "2000m", "1"]
    finally:
        status, reply = await request(api, "DELETE", f"{quotas}/eq")
        assert status in (200, 404), reply
