"""SchedulerPolicies on a real API server: live reload, validation, status, profiles, deletion.

Run with -s to read the reload latency this measures.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched.policy.compile import compile_policy, default_algorithm
from kubesched.policy.controller import PolicyController, PolicyStatusWriter
from kubesched.policy.store import MAX_SPEC_BYTES, PolicyStore
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched_dev.fixtures import (
    create_nodes,
    create_pods,
    label_preference_policy,
    make_node,
    make_pod,
    new_token_client,
    service_account_token,
    wait_for,
)

from .kubeapi import events_for, pods_by_name, wait_bound, wait_events
from .kubesched_process import KubeschedProcess

POLICIES = "/apis/kubesched.io/v1alpha1/schedulerpolicies"
SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"
LEAST = [{"name": "LeastRequestedPriority", "weight": 1}]
MOST = [{"name": "MostRequestedPriority", "weight": 1}]
JSON_PATCH = "application/json-patch+json"


class Policies:
    """SchedulerPolicies made by one test, deleted after it (they are cluster-scoped)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.names: set[str] = set()

    async def create(self, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        return await self.create_manifest(
            {
                "apiVersion": "kubesched.io/v1alpha1",
                "kind": "SchedulerPolicy",
                "metadata": {"name": name},
                "spec": spec,
            }
        )

    async def create_manifest(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        name = manifest["metadata"]["name"]
        self.names.add(name)
        status, body = await request(self.api, "POST", POLICIES, manifest)
        if status == 409:  # left by an interrupted run on a reused control plane
            await self.delete(name)
            await wait_for(lambda: self.absent(name), timeout=10)
            status, body = await request(self.api, "POST", POLICIES, manifest)
        assert status == 201, body
        return dict(body)

    async def absent(self, name: str) -> bool:
        status, _ = await request(self.api, "GET", f"{POLICIES}/{name}")
        return status == 404

    async def replace_spec(self, name: str, spec: Mapping[str, Any]) -> int:
        """Replace the whole spec; returns the new generation."""
        patch = [{"op": "replace", "path": "/spec", "value": spec}]
        status, body = await request(self.api, "PATCH", f"{POLICIES}/{name}", patch, content_type=JSON_PATCH)
        assert status == 200, body
        return int(body["metadata"]["generation"])

    async def delete(self, name: str) -> None:
        status, body = await request(self.api, "DELETE", f"{POLICIES}/{name}")
        assert status in (200, 404), body

    async def get(self, name: str) -> dict[str, Any]:
        status, body = await request(self.api, "GET", f"{POLICIES}/{name}")
        assert status == 200, body
        return dict(body)

    async def wait_status(
        self, name: str, generation: int, accepted: str, active: str, timeout: float = 20
    ) -> dict[str, Any]:
        """The status once it reports `generation` with these Accepted and Active condition statuses."""
        found: dict[str, Any] = {}

        async def reported() -> bool:
            nonlocal found
            found = (await self.get(name)).get("status") or {}
            conditions = {c["type"]: c["status"] for c in found.get("conditions") or []}
            return found.get("observedGeneration") == generation and conditions == {
                "Accepted": accepted,
                "Active": active,
            }

        try:
            await wait_for(reported, timeout=timeout)
        except TimeoutError:
            raise AssertionError(f"status of {name} after {timeout} s: {found}") from None
        return found

    async def cleanup(self) -> None:
        for name in self.names:
            await self.delete(name)


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    """A kubesched process whose own profile falls back to the seed policy file."""
    proc = KubeschedProcess(
        control_plane.kubeconfig, f"ks-{namespace}", tmp_path, ["--policy-config-file", str(SEED_POLICY)]
    )
    with proc:
        proc.wait_for_log("cache_synced")
        yield proc


def condition(status: Mapping[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == kind]
    return dict(found)


def log_records(proc: KubeschedProcess, event: str) -> list[dict[str, Any]]:
    records = []
    for line in proc.log().splitlines():
        if f'"{event}"' not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == event:
            records.append(record)
    return records


def log_time(record: Mapping[str, Any]) -> float:
    return datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()


async def placements(api: ApiClient, namespace: str, names: list[str]) -> list[str]:
    pods = await pods_by_name(api, namespace)
    return [pods[n]["spec"]["nodeName"] for n in names]


def most_requested_available() -> None:
    try:
        compile_policy({"priorities": MOST})
    except ValueError as exc:
        pytest.fail(f"MostRequestedPriority is needed here: {exc}")


# ------------------------------------------------------------------------------------------ tests


async def test_a_weight_change_packs_nodes_and_takes_effect_at_once(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    most_requested_available()
    name = kubesched.scheduler_name
    await policies.create("reload", {"schedulerName": name, "priorities": LEAST})
    await policies.wait_status("reload", 1, "True", "True")
    await create_nodes(api, [make_node(f"reload-{i}", cpu="4", memory="16Gi") for i in range(4)])

    # LeastRequested: three 1-cpu pods on three different nodes, the fourth node stays empty.
    spread = [f"spread-{i}" for i in range(3)]
    await create_pods(api, [make_pod(n, namespace, name, cpu="1", memory="1Gi") for n in spread])
    await wait_bound(api, namespace, 3)
    loaded = await placements(api, namespace, spread)
    assert len(set(loaded)) == 3, loaded
    (empty,) = {f"reload-{i}" for i in range(4)} - set(loaded)

    # The edit. Small probes, one every 50 ms, go to the empty node while LeastRequested holds
    # and to a loaded one as soon as MostRequested does.
    edited = time.time()
    assert await policies.replace_spec("reload", {"schedulerName": name, "priorities": MOST}) == 2
    probes: list[str] = []
    while len(probes) < 100:
        probes.append(f"probe-{len(probes):03d}")
        await create_pods(api, [make_pod(probes[-1], namespace, name, cpu="10m", memory="16Mi")])
        await asyncio.sleep(0.05)
        pods = await pods_by_name(api, namespace)
        if any(pods[p]["spec"].get("nodeName") not in (None, empty) for p in probes):
            break
    await wait_bound(api, namespace, 3 + len(probes))
    on_node = dict(zip(probes, await placements(api, namespace, probes), strict=True))
    first_packed = next(p for p in probes if on_node[p] != empty)
    # Once MostRequested decides, no probe goes to the empty node again.
    assert all(on_node[p] != empty for p in probes[probes.index(first_packed) :]), on_node

    bound = {r["pod"].split("/")[1]: r for r in log_records(kubesched, "pod_bound")}
    applied = [r for r in log_records(kubesched, "profile_policy_applied") if r.get("generation") == 2]
    assert applied, kubesched.log()[-3000:]
    in_force = log_time(applied[0]) - edited
    decided = log_time(bound[first_packed]) - edited
    print(
        f"\nreload latency: edit -> policy in force {in_force * 1000:.0f} ms; "
        f"edit -> first pod bound under the new weights {decided * 1000:.0f} ms "
        f"({probes.index(first_packed)} probe(s) before it went to the empty node)"
    )
    assert decided < 5.0

    # MostRequested packs: three more 1-cpu pods fill loaded nodes and leave the empty one alone.
    packed = [f"packed-{i}" for i in range(3)]
    await create_pods(api, [make_pod(n, namespace, name, cpu="1", memory="1Gi") for n in packed])
    await wait_bound(api, namespace, 6 + len(probes))
    nodes = await placements(api, namespace, packed)
    assert empty not in nodes and len(set(nodes)) <= 2, nodes
    status = await policies.wait_status("reload", 2, "True", "True")
    assert condition(status, "Active")["reason"] == "InForce"


async def test_an_invalid_edit_leaves_scheduling_unchanged_and_status_explains(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    most_requested_available()
    name = kubesched.scheduler_name
    await create_nodes(api, [make_node("full-ish", cpu="4"), make_node("idle", cpu="4")])
    await create_pods(api, [make_pod("resident", namespace, name, cpu="2", node_name="full-ish")])
    await policies.create("strict", {"schedulerName": name, "priorities": MOST})
    await policies.wait_status("strict", 1, "True", "True")

    # No node has disktype=ssd: unschedulable under the default predicates.
    await create_pods(
        api, [make_pod("picky", namespace, name, cpu="100m", node_selector={"disktype": "ssd"})]
    )

    async def failed() -> bool:
        return any(e["reason"] == "FailedScheduling" for e in await events_for(api, namespace, "picky"))

    await wait_for(failed, timeout=20)

    typo = [{"name": "MostRequestedPriorty", "weight": 1}]
    assert await policies.replace_spec("strict", {"schedulerName": name, "priorities": typo}) == 2
    status = await policies.wait_status("strict", 2, "False", "True")
    accepted, active = condition(status, "Accepted"), condition(status, "Active")
    assert accepted["reason"] == "Invalid"
    assert accepted["message"].startswith('spec.priorities[0].name: unknown priority "MostRequestedPriorty"')
    assert active["reason"] == "PreviousGenerationInForce"
    assert active["message"] == (
        f'generation 1 drives scheduler "{name}"; generation 2 was rejected (see Accepted)'
    )
    assert status["acceptedGeneration"] == 1
    assert status["acceptedSpec"] == {"schedulerName": name, "priorities": MOST}

    # Generation 1 still decides: MostRequested puts the pod next to the resident one (the seed
    # policy the process falls back to would pick the idle node).
    await create_pods(api, [make_pod("after-typo", namespace, name, cpu="100m")])
    await wait_bound(api, namespace, 2)
    pods = await pods_by_name(api, namespace)
    assert pods["after-typo"]["spec"]["nodeName"] == "full-ish"
    assert not pods["picky"]["spec"].get("nodeName")

    # A valid edit without MatchNodeSelector: the unschedulable pod is retried at once, not after
    # the 60 s flush.
    edited = time.monotonic()
    relaxed = {"schedulerName": name, "predicates": [{"name": "PodFitsResources"}], "priorities": MOST}
    assert await policies.replace_spec("strict", relaxed) == 3
    pods = await wait_bound(api, namespace, 3, timeout=20)
    assert pods["picky"]["spec"]["nodeName"] == "full-ish"
    assert time.monotonic() - edited < 15
    status = await policies.wait_status("strict", 3, "True", "True")
    assert condition(status, "Active")["reason"] == "InForce"
    assert status["acceptedGeneration"] == 3


async def test_two_profiles_side_by_side_and_the_oldest_policy_wins(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    most_requested_available()
    spread_name = kubesched.scheduler_name
    pack_name = f"{spread_name}-pack"
    # The own profile from the seed policy, through `kubesched policy convert`.
    convert = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubesched", "policy", "convert", str(SEED_POLICY),
        "--name", f"spread-{namespace}", "--scheduler-name", spread_name,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    converted, _ = await convert.communicate()
    assert convert.returncode == 0
    await policies.create_manifest(yaml.safe_load(converted))
    await policies.create(f"pack-{namespace}", {"schedulerName": pack_name, "priorities": MOST})
    await asyncio.sleep(1.1)  # creationTimestamp has second resolution
    await policies.create(f"late-{namespace}", {"schedulerName": pack_name, "priorities": LEAST})
    await policies.wait_status(f"spread-{namespace}", 1, "True", "True")
    await policies.wait_status(f"pack-{namespace}", 1, "True", "True")
    late = await policies.wait_status(f"late-{namespace}", 1, "True", "False")
    assert condition(late, "Active")["reason"] == "Superseded"
    assert condition(late, "Active")["message"] == (
        f'SchedulerPolicy "pack-{namespace}" is older and drives scheduler "{pack_name}"'
    )

    # kubectl's columns (the Table the API server renders from additionalPrinterColumns).
    status, table = await _table(api, f"late-{namespace}")
    assert status == 200, table
    columns = [c["name"] for c in table["columnDefinitions"]]
    cells = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert {k: cells[k] for k in ("Scheduler", "Accepted", "Active")} == {
        "Scheduler": pack_name,
        "Accepted": "True",
        "Active": "False",
    }

    await create_nodes(api, [make_node(f"side-{i}", cpu="4", memory="16Gi") for i in range(3)])
    spread = [f"spread-{i}" for i in range(3)]
    await create_pods(api, [make_pod(n, namespace, spread_name, cpu="1", memory="1Gi") for n in spread])
    await wait_bound(api, namespace, 3)
    assert len(set(await placements(api, namespace, spread))) == 3
    pack = [f"pack-{i}" for i in range(3)]
    await create_pods(api, [make_pod(n, namespace, pack_name, cpu="500m", memory="512Mi") for n in pack])
    await wait_bound(api, namespace, 6)
    assert len(set(await placements(api, namespace, pack))) == 1
    scheduled = await wait_events(api, namespace, "pack-0", "Scheduled")
    assert scheduled[0]["source"]["component"] == pack_name

    # The older policy goes: the younger one takes over its scheduler name.
    await policies.delete(f"pack-{namespace}")
    late = await policies.wait_status(f"late-{namespace}", 1, "True", "True")
    assert condition(late, "Active")["reason"] == "InForce"
    more = [f"more-{i}" for i in range(2)]
    await create_pods(api, [make_pod(n, namespace, pack_name, cpu="500m", memory="512Mi") for n in more])
    await wait_bound(api, namespace, 8)
    packed_node = (await placements(api, namespace, pack))[0]
    assert packed_node not in await placements(api, namespace, more)  # LeastRequested now


async def _table(api: ApiClient, name: str) -> tuple[int, Any]:
    response = await api.call_api(
        f"{POLICIES}/{name}",
        "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    async with response:
        return int(response.status), json.loads(await response.text())


async def test_a_policy_deleted_mid_stream_loses_no_pod(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    most_requested_available()
    name = kubesched.scheduler_name
    await create_nodes(api, [make_node(f"stream-{i}", cpu="4", memory="16Gi") for i in range(4)])
    await policies.create("doomed", {"schedulerName": name, "priorities": MOST})
    await policies.wait_status("doomed", 1, "True", "True")

    first = [f"first-{i:02d}" for i in range(20)]
    await create_pods(api, [make_pod(n, namespace, name, cpu="100m", memory="64Mi") for n in first])
    await wait_bound(api, namespace, 20)
    assert len(set(await placements(api, namespace, first))) == 1  # MostRequested packs them

    async def stream() -> None:
        for chunk in range(8):
            names = [f"stream-{chunk}-{i}" for i in range(5)]
            await create_pods(api, [make_pod(n, namespace, name, cpu="100m", memory="64Mi") for n in names])
            await asyncio.sleep(0.1)

    streaming = asyncio.create_task(stream())
    await asyncio.sleep(0.25)
    await policies.delete("doomed")
    await streaming
    pods = await wait_bound(api, namespace, 60, timeout=60)
    assert len(pods) == 60 and all(p["spec"].get("nodeName") for p in pods.values())
    removed = log_records(kubesched, "profile_policy_removed")
    assert removed and removed[0]["profile"] == name and removed[0]["now"] == "base algorithm"
    # The seed policy (LeastRequested among others) spreads what came after.
    last = [f"stream-7-{i}" for i in range(5)]
    assert len(set(await placements(api, namespace, last))) >= 2
    assert not log_records(kubesched, "schedule_error")


async def test_every_replica_keeps_the_policy_so_a_new_leader_schedules_under_it(
    api: ApiClient, control_plane: Any, namespace: str, tmp_path: Path, policies: Policies
) -> None:
    most_requested_available()
    name = f"ks-{namespace}"
    fast_election = [
        "--leader-elect-lease-duration=6s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-retry-period=1s",
    ]
    args = ["--policy-config-file", str(SEED_POLICY), *fast_election]
    replicas = [
        KubeschedProcess(control_plane.kubeconfig, name, tmp_path, args, name=f"{name}-{r}").start()
        for r in ("a", "b")
    ]
    try:
        await create_nodes(api, [make_node(f"ha-{i}", cpu="4", memory="16Gi") for i in range(3)])
        await create_pods(api, [make_pod("resident", namespace, name, cpu="1", node_name="ha-0")])
        await policies.create("shared", {"schedulerName": name, "priorities": MOST})

        def compiled_everywhere() -> bool:
            return all(log_records(r, "profile_policy_applied") for r in replicas)

        await wait_for(compiled_everywhere, timeout=30, message="both replicas compiled the policy")
        await wait_for(lambda: any(log_records(r, "leader_elected") for r in replicas), timeout=30)
        (leader,) = [r for r in replicas if log_records(r, "leader_elected")]
        (follower,) = [r for r in replicas if r is not leader]
        await asyncio.to_thread(leader.stop)  # releases the lease: the follower takes over
        await wait_for(lambda: log_records(follower, "leader_elected"), timeout=30)

        # MostRequested, not the seed policy the new leader was started with: next to the resident.
        pods = [f"after-failover-{i}" for i in range(3)]
        await create_pods(api, [make_pod(n, namespace, name, cpu="500m", memory="512Mi") for n in pods])
        await wait_bound(api, namespace, 4)
        assert await placements(api, namespace, pods) == ["ha-0"] * 3
    finally:
        for replica in replicas:
            await asyncio.to_thread(replica.stop)


async def test_the_shipped_rbac_lets_the_operator_read_policies_and_write_their_status(
    api: ApiClient, control_plane: Any, policies: Policies
) -> None:
    manifests = Path(__file__).parents[2] / "manifests"
    for path in ("namespace.yaml", "rbac.yaml"):
        for manifest in yaml.safe_load_all((manifests / path).read_text()):
            await _apply(api, manifest)
    token = await service_account_token(api, "kubesched", "kubesched")
    await policies.create("rbac", {"priorities": LEAST})
    operator = new_token_client(control_plane.server, control_plane.ca_file, token)
    try:
        status, body = await request(operator, "GET", POLICIES)
        assert status == 200, body
        patch = {"status": {"observedGeneration": 1}}
        status, body = await request(
            operator, "PATCH", f"{POLICIES}/rbac/status", patch, content_type="application/merge-patch+json"
        )
        assert status == 200, body
        status, body = await request(operator, "PATCH", f"{POLICIES}/rbac", {"spec": {"priorities": []}})
        assert status == 403, body  # the spec is the users' to write
    finally:
        await operator.close()


async def _apply(api: ApiClient, manifest: Mapping[str, Any]) -> None:
    """Create, or replace what a reused control plane already holds."""
    kind, name, namespace = (
        manifest["kind"],
        manifest["metadata"]["name"],
        manifest["metadata"].get("namespace"),
    )
    group_version = manifest["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}.get(kind)
    plural = plural or {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts"}[kind]
    collection = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    status, body = await request(api, "POST", collection, manifest)
    if status == 409 and kind in ("ClusterRole", "ClusterRoleBinding"):
        status, body = await request(api, "PUT", f"{collection}/{name}", manifest)
    assert status in (200, 201, 409), body


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"priorities": [{"name": "LeastRequestedPriority", "weight": -1}]}, "spec.priorities.weight"),
        ({"priorities": [{"name": "LeastRequestedPriority", "weight": 0}]}, "spec.priorities.weight"),
        ({"priorities": [{"name": "LeastRequestedPriority", "weight": "high"}]}, "spec.priorities.weight"),
        ({"priorities": [{"name": "LeastRequestedPriority"}]}, "spec.priorities.weight"),
        ({"predicates": {"name": "PodFitsResources"}}, "spec.predicates"),
        ({"predicates": [{"argument": {}}]}, "spec.predicates.name"),
        ({"schedulerName": 7}, "spec.schedulerName"),
        ({"alwaysCheckAllPredicates": "yes"}, "spec.alwaysCheckAllPredicates"),
        ({"hardPodAffinitySymmetricWeight": 101}, "spec.hardPodAffinitySymmetricWeight"),
        ({"percentageOfNodesToScore": -5}, "spec.percentageOfNodesToScore"),
    ],
)
async def test_the_schema_rejects_wrong_types_and_negative_weights(
    api: ApiClient, policies: Policies, spec: dict[str, Any], field: str
) -> None:
    manifest = {"apiVersion": "kubesched.io/v1alpha1", "kind": "SchedulerPolicy", "metadata": {"name": "bad"}}
    status, message = await request(api, "POST", POLICIES, {**manifest, "spec": spec})
    policies.names.add("bad")
    assert status == 422, message
    assert field in message


async def test_a_huge_policy_is_refused_by_the_schema_with_its_limit(
    api: ApiClient, policies: Policies
) -> None:
    # 1.3 MB: it used to be stored, compiled for seconds on the event loop and put in force, and
    # then no status could be written (status.acceptedSpec doubled the object past etcd's limit).
    spec = label_preference_policy(12_000)
    policies.names.add("huge")
    manifest = {
        "apiVersion": "kubesched.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": "huge"},
        "spec": spec,
    }
    status, message = await request(api, "POST", POLICIES, manifest)
    assert status == 422, message
    limit = "spec.priorities: Invalid value: 12000: spec.priorities in body should have at most 1000 items"
    assert limit in message


def json_size(spec: Mapping[str, Any]) -> int:
    return len(json.dumps(spec, separators=(",", ":")))


async def test_a_policy_over_the_operator_limit_is_refused_and_the_previous_one_stays(
    api: ApiClient, kubesched: KubeschedProcess, policies: Policies
) -> None:
    name = kubesched.scheduler_name
    await policies.create("sized", {"schedulerName": name, "priorities": LEAST})
    await policies.wait_status("sized", 1, "True", "True")

    # Within the schema's limits, over the operator's: what an older CRD would let through.
    huge = {"schedulerName": name, **label_preference_policy(1000, label_length=300)}
    assert await policies.replace_spec("sized", huge) == 2
    status = await policies.wait_status("sized", 2, "False", "True")
    assert condition(status, "Accepted")["message"] == (
        f"spec: is {json_size(huge)} bytes as JSON; the limit is {MAX_SPEC_BYTES}"
    )
    assert condition(status, "Active")["reason"] == "PreviousGenerationInForce"
    assert status["acceptedSpec"] == {"schedulerName": name, "priorities": LEAST}
    applied = [r["generation"] for r in log_records(kubesched, "profile_policy_applied")]
    assert applied == [1], applied
    assert len(log_records(kubesched, "policy_rejected")) == 1

    # Near the limit: accepted, in force, and its status written without a copy of the spec.
    near = {"schedulerName": name, **label_preference_policy(1000, label_length=160)}
    assert MAX_SPEC_BYTES * 0.9 < json_size(near) <= MAX_SPEC_BYTES
    assert await policies.replace_spec("sized", near) == 3
    status = await policies.wait_status("sized", 3, "True", "True")
    assert condition(status, "Active")["reason"] == "InForce"
    assert status["acceptedGeneration"] == 3 and "acceptedSpec" not in status
    assert not log_records(kubesched, "policy_status_failed")


async def test_fields_the_schema_does_not_know_are_kept_for_the_operator_to_name(
    api: ApiClient, policies: Policies
) -> None:
    created = await policies.create(
        "typo", {"prioritis": [], "priorities": [{"name": "X", "weight": 1, "wieght": 2}]}
    )
    assert created["spec"]["prioritis"] == []
    assert created["spec"]["priorities"][0]["wieght"] == 2


async def test_without_the_crd_policies_are_not_watched(api: ApiClient) -> None:
    scheduler = Scheduler(SchedulerSettings("nobody"), default_algorithm(), None, None)  # type: ignore[arg-type]
    controller = PolicyController(PolicyStore("nobody"), scheduler, PolicyStatusWriter(api))
    assert not await controller.load(api, path="/apis/kubesched.io/v1alpha9/schedulerpolicies")
    assert await controller.load(api)
