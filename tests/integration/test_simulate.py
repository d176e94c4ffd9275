"""`kubesched snapshot save`, `simulate` and `explain --snapshot` against a real API server, and
simulate's placements checked against a live kubesched's binds; PodGroups carried through all three."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.policy.store import policy_manifest
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod

from .kubeapi import pods_by_name, wait_bound
from .kubesched_process import KubeschedProcess
from .podgroups import create_object, delete_namespace, member, pod_group

SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"
MOST = {"kind": "Policy", "apiVersion": "v1", "priorities": [{"name": "MostRequestedPriority", "weight": 1}]}
SEED = 7


async def kubesched_cli(*args: str, stdin: str | None = None) -> str:
    """`kubesched ARGS` as a user runs it; its standard output (fails the test on a non-zero exit)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubesched", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    assert proc.returncode == 0, f"kubesched {' '.join(args)}: {err.decode()[-3000:]}"
    return out.decode()


async def test_simulate_on_a_saved_snapshot_places_pods_as_the_live_scheduler_then_does(
    api: ApiClient, control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    name = f"ks-{namespace}"
    kubeconfig = str(control_plane.kubeconfig)
    # Four identical nodes, so that ties (and the seed that breaks them) decide most placements.
    await create_nodes(api, [make_node(f"twin-{i}", cpu="4", memory="8Gi") for i in range(4)])
    pods = [make_pod(f"web-{i:02d}", namespace, name, cpu="500m", memory="256Mi") for i in range(10)]
    pods += [make_pod(f"urgent-{i}", namespace, name, cpu="1", memory="1Gi", priority=100) for i in range(2)]
    pods.append(make_pod("huge", namespace, name, cpu="64"))
    await create_pods(api, pods)

    snapshot = tmp_path / "cluster.json"
    await kubesched_cli("snapshot", "save", str(snapshot), "--kubeconfig", kubeconfig)
    saved = json.loads(snapshot.read_text())
    assert saved["kind"] == "ClusterSnapshot" and saved["version"] == 1
    assert len(saved["nodes"]) == 4
    assert len([p for p in saved["pods"] if p["metadata"]["namespace"] == namespace]) == 13

    # The candidate as a SchedulerPolicy manifest on standard input; the current policy, the same
    # one as a legacy file: nothing moves between the two.
    manifest = policy_manifest(json.loads(SEED_POLICY.read_text()), "candidate", name)
    output = await kubesched_cli(
        "simulate", "--policy", "-", "--nodes-from", str(snapshot), "--seed", str(SEED),
        "--policy-config-file", str(SEED_POLICY), "--namespace", namespace, "-o", "json",
        stdin=yaml.safe_dump(manifest),
    )  # fmt: skip
    simulated = json.loads(output)
    assert simulated["schedulerName"] == name and simulated["pods"] == 13
    assert simulated["moved"] == 0 and simulated["newlyUnschedulable"] == []
    assert simulated["unschedulableInBoth"] == [f"{namespace}/huge"]
    placements = {p["pod"].split("/")[1]: p["candidate"] for p in simulated["placements"]}
    # The queue's order: higher priority first.
    assert [p["pod"].split("/")[1] for p in simulated["placements"][:2]] == ["urgent-0", "urgent-1"]

    # The live cluster, read directly, gives the same answer as the file.
    output = await kubesched_cli(
        "simulate", "--policy", str(SEED_POLICY), "--scheduler-name", name, "--seed", str(SEED),
        "--kubeconfig", kubeconfig, "--namespace", namespace, "-o", "json",
    )  # fmt: skip
    from_live = {p["pod"].split("/")[1]: p["candidate"] for p in json.loads(output)["placements"]}
    assert from_live == placements

    args = ["--leader-elect=false", "--seed", str(SEED), "--policy-config-file", str(SEED_POLICY)]
    with KubeschedProcess(kubeconfig, name, tmp_path, args) as kubesched:
        kubesched.wait_for_log("cache_synced")
        live = await wait_bound(api, namespace, 12)
    bound = {n: p["spec"].get("nodeName") for n, p in live.items()}
    assert bound == placements

    # Replay the bound pods under MostRequested: they pack, so the spread of cpu use grows.
    after = tmp_path / "after.json"
    await kubesched_cli("snapshot", "save", str(after), "--kubeconfig", kubeconfig)
    policy = tmp_path / "most.json"
    policy.write_text(json.dumps(MOST))
    output = await kubesched_cli(
        "simulate", "--policy", str(policy), "--nodes-from", str(after), "--replay",
        "--scheduler-name", name, "--pods", "!nonexistent", "-o", "json",
    )  # fmt: skip
    replayed = json.loads(output)
    assert replayed["mode"] == "replay" and replayed["pods"] == 12 and replayed["moved"] > 0
    before, packed = replayed["utilisation"]["before"]["cpu"], replayed["utilisation"]["after"]["cpu"]
    assert packed["mean"] == before["mean"] and packed["stdev"] > before["stdev"]
    table = await kubesched_cli(
        "simulate", "--policy", str(policy), "--nodes-from", str(after), "--replay", "--scheduler-name", name
    )
    assert f"moved: {replayed['moved']} of 12" in table

    # explain reads the same file, offline: the pending pod's reasons, node by node.
    explained = json.loads(
        await kubesched_cli("explain", f"{namespace}/huge", "--snapshot", str(after), "-o", "json")
    )
    assert explained["nodes"] == 4 and not explained["feasible"]
    assert explained["message"] == "0/4 nodes are available: 4 Insufficient cpu."
    pods_now = await pods_by_name(api, namespace)
    assert not pods_now["huge"]["spec"].get("nodeName")


async def test_snapshots_carry_pod_groups_and_simulate_and_explain_decide_them_all_or_nothing(
    api: ApiClient, control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    """Three 3-cpu members of a group of minMember 3, two 4-cpu nodes: two would fit, so none is
    placed, and explain and simulate say so as the scheduler's FailedScheduling message would."""
    name = f"ks-{namespace}"
    kubeconfig = str(control_plane.kubeconfig)
    try:
        await create_nodes(api, [make_node(f"gang-{i}", cpu="4", memory="8Gi") for i in range(2)])
        await create_object(api, pod_group("train", namespace, 3))
        for i in range(3):
            await create_object(api, member(f"t-{i}", namespace, "train", name, cpu="3"))
        snapshot = tmp_path / "cluster.json"
        await kubesched_cli("snapshot", "save", str(snapshot), "--kubeconfig", kubeconfig)
        saved = json.loads(snapshot.read_text())
        groups = [g for g in saved["objects"].get("PodGroup", []) if g["metadata"]["namespace"] == namespace]
        assert [g["metadata"]["name"] for g in groups] == ["train"], saved["objects"].keys()

        short = (
            f"pod group {namespace}/train: only 2 of 3 members can be placed: "
            "0/2 nodes are available: 2 Insufficient cpu."
        )
        for source in (["--snapshot", str(snapshot)], ["--kubeconfig", kubeconfig]):
            explained = json.loads(await kubesched_cli("explain", f"{namespace}/t-0", *source, "-o", "json"))
            assert explained["message"] == short, source
            group = explained["group"]
            assert (group["min_member"], group["exist"], group["bound"], group["placeable"]) == (3, 3, 0, 2)

        output = await kubesched_cli(
            "simulate", "--policy", str(SEED_POLICY), "--nodes-from", str(snapshot),
            "--scheduler-name", name, "--namespace", namespace, "-o", "json",
        )  # fmt: skip
        simulated = json.loads(output)
        assert [p["candidate"] for p in simulated["placements"]] == [None, None, None]
        (placed,) = simulated["podGroups"]
        assert placed["group"] == f"{namespace}/train" and placed["members"] == 3
        assert placed["candidate"] == {"placed": False, "membersPlaced": 0, "reason": short}
    finally:
        await delete_namespace(api, namespace)
