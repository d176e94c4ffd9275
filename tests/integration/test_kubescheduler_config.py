"""`kubesched policy convert` of a KubeSchedulerConfiguration on a real API server: the CRD keeps every
field convert writes (nothing pruned), refuses an invalid `nodeResourcesScoring`, the operator
accepts the policies, and a gpu bin-packing profile places a pod as 1.32's MostAllocated would."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kubesched.kube.client import request
from kubesched_dev.fixtures import create_nodes, create_pods, make_node, make_pod

from .kubesched_process import KubeschedProcess
from .test_policies import POLICIES, SEED_POLICY, Policies
from .test_scheduling import wait_bound


@pytest.fixture
def kubesched(control_plane: Any, namespace: str, tmp_path: Path) -> Iterator[KubeschedProcess]:
    proc = KubeschedProcess(
        control_plane.kubeconfig, f"ks-{namespace}", tmp_path, ["--policy-config-file", str(SEED_POLICY)]
    )
    with proc:
        proc.wait_for_log("cache_synced")
        yield proc


def configuration(namespace: str, gpu: str) -> str:
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
leaderElection: {{leaderElect: true}}
profiles:
- schedulerName: {namespace}-default
  pluginConfig:
  - name: InterPodAffinity
    args: {{hardPodAffinityWeight: 10}}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {{maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}}
- schedulerName: {namespace}-gpu
  plugins:
    score:
      enabled: [{{name: NodeResourcesFit, weight: 10}}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{{name: cpu, weight: 1}}, {{name: memory, weight: 1}}, {{name: {gpu}, weight: 5}}]
"""


async def test_converted_policies_are_kept_whole_accepted_and_schedule(
    api: ApiClient, namespace: str, tmp_path: Path, kubesched: KubeschedProcess, policies: Policies
) -> None:
    gpu = f"kubesched.test/gpu-{namespace}"
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(configuration(namespace, gpu))
    convert = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubesched", "policy", "convert", str(source),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    converted, warnings = await convert.communicate()
    assert convert.returncode == 0, warnings
    assert b"leaderElection" in warnings
    manifests = list(yaml.safe_load_all(converted))
    assert [m["metadata"]["name"] for m in manifests] == [f"{namespace}-default", f"{namespace}-gpu"]
    assert "podTopologySpreadDefaultConstraints" in manifests[0]["spec"]
    assert "nodeResourcesScoring" in manifests[1]["spec"]

    for manifest in manifests:
        created = await policies.create_manifest(manifest)
        # Nothing pruned: the 1.20 API server stores every field convert writes.
        assert created["spec"] == manifest["spec"]
        assert created["metadata"]["annotations"] == manifest["metadata"]["annotations"]
        await policies.wait_status(manifest["metadata"]["name"], 1, "True", "True")

    # The schema refuses what the operator would refuse, before it is stored.
    invalid = {**manifests[1], "metadata": {"name": f"{namespace}-invalid"}}
    invalid["spec"] = {**invalid["spec"], "nodeResourcesScoring": {"weight": 1, "type": "Packed"}}
    status, body = await request(api, "POST", POLICIES, invalid)
    assert status == 422, body
    assert "spec.nodeResourcesScoring.type" in str(body)

    # MostAllocated weighing the gpu: the small gpu node, which LeastRequestedPriority would never pick.
    small, big = f"{namespace}-gpu-small", f"{namespace}-gpu-big"
    await create_nodes(
        api,
        [
            make_node(small, cpu="2", memory="8Gi", extended={gpu: "2"}),
            make_node(big, cpu="16", memory="64Gi", extended={gpu: "8"}),
        ],
    )
    pod = make_pod("trainer", namespace, f"{namespace}-gpu", cpu="500m", memory="1Gi", extended={gpu: "1"})
    pod["spec"]["containers"][0]["resources"]["limits"] = {gpu: "1"}  # extended resources need limits
    await create_pods(api, [pod])
    bound = await wait_bound(api, namespace, 1, timeout=20)
    assert bound["trainer"]["spec"]["nodeName"] == small
