"""Shadow SchedulerPolicies on a real API server: figures in status, and never a bind.

Run with -s to read what one shadow evaluation cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, wait_for

from .kubeapi import events_for, pods_by_name, wait_bound, wait_events
from .kubesched_process import KubeschedProcess
from .test_policies import Policies, condition, most_requested_available

# The same two priorities, weights swapped: the active one spreads, the shadow packs.
SPREAD = [{"name": "LeastRequestedPriority", "weight": 3}, {"name": "MostRequestedPriority", "weight": 1}]
PACK = [{"name": "LeastRequestedPriority", "weight": 1}, {"name": "MostRequestedPriority", "weight": 3}]
PODS = 6


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    """A kubesched writing shadow figures every second."""
    args = ["--leader-elect=false", "--shadow-status-interval=1s"]
    with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path, args) as proc:
        proc.wait_for_log("cache_synced")
        yield proc


async def shadow_figures(
    policies: Policies, name: str, evaluated: int, timeout: float = 20
) -> dict[str, Any]:
    """status.shadow once it counts `evaluated` pods."""
    found: dict[str, Any] = {}

    async def counted() -> bool:
        nonlocal found
        found = ((await policies.get(name)).get("status") or {}).get("shadow") or {}
        return found.get("evaluated") == evaluated

    try:
        await wait_for(counted, timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"status.shadow of {name} after {timeout} s: {found}") from None
    return found


def shadow_spec(scheduler_name: str, priorities: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schedulerName": scheduler_name, "mode": "Shadow", "priorities": priorities, **extra}


async def test_shadow_agreement_splits_on_swapped_weights_and_is_exact_when_identical(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    most_requested_available()
    name = kubesched.scheduler_name
    await policies.create(f"active-{namespace}", {"schedulerName": name, "priorities": SPREAD})
    await policies.create(f"twin-{namespace}", shadow_spec(name, SPREAD))
    await policies.create(f"packer-{namespace}", shadow_spec(name, PACK))
    await policies.wait_status(f"active-{namespace}", 1, "True", "True")
    for shadow in (f"twin-{namespace}", f"packer-{namespace}"):
        status = await policies.wait_status(shadow, 1, "True", "False")
        active = condition(status, "Active")
        assert active["reason"] == "Shadow"
        assert f'beside SchedulerPolicy "active-{namespace}"' in active["message"]

    # A half-full node and an empty one: spreading fills the empty one, packing the busy one.
    await create_nodes(
        api, [make_node("busy", cpu="4", memory="8Gi"), make_node("idle", cpu="4", memory="8Gi")]
    )
    await create_pods(api, [make_pod("resident", namespace, name, cpu="2", memory="4Gi", node_name="busy")])
    names = [f"web-{i}" for i in range(PODS)]
    await create_pods(api, [make_pod(n, namespace, name, cpu="250m", memory="512Mi") for n in names])
    pods = await wait_bound(api, namespace, PODS + 1)
    # The active policy decided: every pod on the idle node (still below the busy one at 1.5 cpu).
    assert {pods[n]["spec"]["nodeName"] for n in names} == {"idle"}

    twin = await shadow_figures(policies, f"twin-{namespace}", PODS)
    assert twin["agreed"] == PODS and twin["agreementPercent"] == 100.0
    assert twin["differentNode"] == 0 and twin["recentDisagreements"] == []
    assert twin["comparedWith"] == f'SchedulerPolicy "active-{namespace}" generation 1'

    packer = await shadow_figures(policies, f"packer-{namespace}", PODS)
    assert packer["agreed"] == 0 and packer["differentNode"] == PODS
    assert packer["agreementPercent"] == 0.0
    latest = packer["recentDisagreements"][0]
    assert latest["pod"].startswith(f"{namespace}/web-")
    assert latest["active"]["node"] == "idle" and latest["shadow"]["node"] == "busy"
    # The top term behind each choice is the priority the policy weighs most.
    assert latest["active"]["topTerms"][0]["priority"] == "LeastRequestedPriority"
    assert latest["shadow"]["topTerms"][0]["priority"] == "MostRequestedPriority"
    assert latest["shadow"]["topTerms"][0]["weight"] == 3
    print(
        f"\nshadow cost: {packer['meanEvaluationMilliseconds']} ms per pod evaluated "
        f"({packer['evaluationSeconds']} s for {packer['evaluated']} pods)"
    )

    # One bind per pod, by the active profile: no Scheduled event came from anything else.
    for pod in names:
        scheduled = await wait_events(api, namespace, pod, "Scheduled")
        assert len(scheduled) == 1, scheduled
        assert scheduled[0]["message"].endswith(" to idle")

    # An edit of the shadow starts its figures again, against the new generation.
    assert await policies.replace_spec(f"twin-{namespace}", shadow_spec(name, PACK)) == 2
    await policies.wait_status(f"twin-{namespace}", 2, "True", "False")
    await create_pods(api, [make_pod("late", namespace, name, cpu="250m", memory="512Mi")])
    await wait_bound(api, namespace, PODS + 2)
    edited = await shadow_figures(policies, f"twin-{namespace}", 1)
    assert edited["generation"] == 2 and edited["differentNode"] == 1


async def test_a_shadow_alone_never_binds(
    api: ApiClient, namespace: str, kubesched: KubeschedProcess, policies: Policies
) -> None:
    lonely = f"{kubesched.scheduler_name}-lonely"
    await policies.create(f"lonely-{namespace}", shadow_spec(lonely, PACK, shadow={"sampleRate": 1}))
    status = await policies.wait_status(f"lonely-{namespace}", 1, "True", "False")
    assert "nothing drives that scheduler name" in condition(status, "Active")["message"]
    await create_nodes(api, [make_node("free", cpu="4", memory="8Gi")])
    await create_pods(api, [make_pod("waiting", namespace, lonely, cpu="100m")])
    # The own profile still schedules meanwhile: the process is alive and working.
    await create_pods(api, [make_pod("own", namespace, kubesched.scheduler_name, cpu="100m")])
    await wait_bound(api, namespace, 1)
    pods = await pods_by_name(api, namespace)
    assert pods["own"]["spec"]["nodeName"] == "free"
    assert not pods["waiting"]["spec"].get("nodeName")
    assert await events_for(api, namespace, "waiting") == []
    figures = await shadow_figures(policies, f"lonely-{namespace}", 0)
    assert figures["comparedWith"] == "none"
