"""Misbehaving extenders on a real API server: the scheduler carries on.

An extender that is not ignorable and answers garbage fails its pods' attempts, each with a
FailedScheduling event saying which extender and what was wrong; an ignorable one that never
answers costs its httpTimeout per pod and is skipped, and the pods are placed without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod, wait_for

from ..extender_server import ExtenderProcess
from .kubeapi import events_for, wait_bound
from .kubesched_process import KubeschedProcess

LICENCE = "example.com/licence"


async def test_a_misbehaving_extender_fails_its_pods_or_is_skipped(
    api: ApiClient, control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    # One process, two extenders: "/broken" answers HTML, "/silent" never answers.
    behaviour = {"broken/filter": {"raw": "<html>Bad Gateway</html>"}, "silent/filter": {"hang": True}}
    with ExtenderProcess(behaviour, tmp_path / "extender.log") as extender:
        base = extender.url.rsplit("/", 1)[0]
        policy = {
            "predicates": [{"name": "PodFitsResources"}],
            "priorities": [{"name": "LeastRequestedPriority", "weight": 1}],
            "extenders": [
                {  # asked only about pods that use a licence
                    "urlPrefix": f"{base}/broken",
                    "filterVerb": "filter",
                    "httpTimeout": "500ms",
                    "managedResources": [{"name": LICENCE, "ignoredByScheduler": True}],
                },
                {
                    "urlPrefix": f"{base}/silent",
                    "filterVerb": "filter",
                    "httpTimeout": "500ms",
                    "ignorable": True,
                },
            ],
        }
        policy_file = tmp_path / "policy.json"
        policy_file.write_text(json.dumps(policy))
        args = ["--policy-config-file", str(policy_file)]
        with KubeschedProcess(control_plane.kubeconfig, f"ks-{namespace}", tmp_path, args) as proc:
            proc.wait_for_log("cache_synced")
            await create_nodes(api, [make_node("xf-1", cpu="4")])
            licensed = make_pod("licensed", namespace, proc.scheduler_name, cpu="100m")
            licensed["spec"]["containers"][0]["resources"]["limits"] = {LICENCE: "1"}
            await create_pods(api, [licensed])

            async def failed() -> list[str]:
                events = await events_for(api, namespace, "licensed")
                return [e["message"] for e in events if e["reason"] == "FailedScheduling"]

            messages = await wait_for(failed, timeout=30, message="licensed reported unschedulable")
            # Then pods the broken extender is not asked about are still placed, past the silent one.
            await create_pods(
                api, [make_pod(f"plain-{i}", namespace, proc.scheduler_name, cpu="100m") for i in range(2)]
            )
            bound = await wait_bound(api, namespace, 2, timeout=30)
            log = proc.log()
        gone = extender.gone()
    assert messages[0] == (
        f"extender {base}/broken/filter: invalid JSON in reply: Expecting value: line 1 column 1 (char 0)"
    )
    placed = {name: pod["spec"].get("nodeName") for name, pod in bound.items()}
    assert placed == {"licensed": None, "plain-0": "xf-1", "plain-1": "xf-1"}
    skipped = [json.loads(line) for line in log.splitlines() if '"extender_skipped"' in line]
    assert {(e["extender"], e["verb"], e["level"]) for e in skipped} == {
        (f"{base}/silent", "filter", "warning")
    }
    assert all(e["error"] == f"extender {base}/silent/filter: no reply within 0.5s" for e in skipped)
    # The calls given up on were closed, not left to the server.
    assert gone == ["filter"] * len(skipped)
