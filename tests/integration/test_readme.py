"""The README's examples stay true: every block marked `<!-- readme-test: NAME -->` is run or
validated here, against the real API server where it names Kubernetes objects, and its lists of
predicates, priorities and metrics are the ones the code has."""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner
from kubernetes_asyncio.client import ApiClient
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from kubesched.cli import main
from kubesched.kube.client import request
from kubesched.plugins import registry as plugins
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL, compile_spec
from kubesched.telemetry import metrics
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import create_namespace, create_nodes, delete_namespace, make_node

REPO = Path(__file__).parents[2]
README = (REPO / "README.md").read_text()
MARKER = re.compile(
    r"^<!-- readme-test: (?P<name>[\w-]+) -->\n(?:```\w*\n(?P<code>.*?)\n```$|(?P<text>.*?)(?=\n\n|\Z))",
    re.M | re.S,
)
POLICIES = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"


def marked() -> dict[str, str]:
    """Marked block name -> its text (a fenced block's code, else the paragraph or list that follows)."""
    blocks: dict[str, str] = {}
    for match in MARKER.finditer(README):
        assert match["name"] not in blocks, f"two blocks marked {match['name']}"
        blocks[match["name"]] = match["code"] if match["code"] is not None else match["text"]
    return blocks


BLOCKS = marked()


def block(name: str) -> str:
    assert name in BLOCKS, f"README.md has no block marked `readme-test: {name}`"
    return BLOCKS[name]


def listed(name: str) -> list[str]:
    return re.findall(r"^- `(\w+)`", block(name), re.M)


def kubectl(control_plane: LocalControlPlane, args: list[str], stdin: str | None = None) -> str:
    command = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.kubeconfig), *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, f"{shlex.join(args)}: {result.stderr}"
    return result.stdout


def commands(name: str) -> Iterator[list[str]]:
    for line in block(name).splitlines():
        if line.strip() and not line.startswith("#"):
            yield shlex.split(line.split("  #")[0])


# ------------------------------------------------------------------------------------ the lists


@pytest.mark.parametrize(
    ("name", "registry", "aliases"),
    [
        ("predicates", set(plugins.PREDICATES), plugins.PREDICATE_ALIASES),
        ("priorities", set(plugins.PRIORITIES) | plugins.SKIPPED_PRIORITIES, plugins.PRIORITY_ALIASES),
    ],
)
def test_every_predicate_and_priority_is_listed_once_with_its_aliases(
    name: str, registry: set[str], aliases: dict[str, str]
) -> None:
    names = listed(name)
    assert len(names) == len(set(names))
    assert set(names) == registry
    lines = {re.match(r"- `(\w+)`", line)[1]: line for line in block(name).splitlines()}  # type: ignore[index]
    for alias, target in aliases.items():
        if alias in ("ServiceAffinity", "RequestedToCapacityRatio"):
            continue  # plugin names accepted as priority names, not legacy aliases a user would look for
        assert f"alias `{alias}`" in lines[target], alias


def exported_metrics() -> dict[str, set[str]]:
    """Metric name -> label names, for every metric kubesched.telemetry.metrics defines."""
    exported = {}
    for collector in vars(metrics).values():
        if isinstance(collector, MetricWrapperBase):
            suffix = "_total" if collector._type == "counter" else ""
            exported[collector._name + suffix] = set(collector._labelnames)
        elif Collector in type(collector).__mro__:  # collected at scrape time: its family says
            for family in collector.collect():
                suffix = "_total" if family.type == "counter" else ""
                exported[family.name + suffix] = set(getattr(family, "_labelnames", ()))
    return exported


def test_the_metrics_table_is_what_the_process_exports() -> None:
    documented = {}
    for row in block("metrics").splitlines()[2:]:
        metric, labels = (cell.strip() for cell in row.strip("|").split("|")[:2])
        labels = re.sub(r"\([^)]*\)", "", labels)  # the values in parentheses
        documented[metric.strip("`")] = set(re.findall(r"`(\w+)`", labels))
    assert documented == exported_metrics()


# ------------------------------------------------------------------------------- install and pods


@pytest.fixture
def kubesched_namespace(control_plane: LocalControlPlane) -> None:
    # As after the first real `kubectl apply -k manifests/`: a server dry run needs the namespace.
    kubectl(control_plane, ["apply", "-f", "manifests/namespace.yaml"])


def test_the_install_commands_pass_on_the_api_server(
    control_plane: LocalControlPlane, kubesched_namespace: None
) -> None:
    ran = []
    for command in commands("install"):
        assert command[0] == "kubectl"
        args = command[1:]
        if args[0] == "apply":
            args.insert(1, "--dry-run=server")
        kubectl(control_plane, args)
        ran.append(args[0])
    assert ran == ["apply", "wait", "apply"]


def test_the_policy_v1_variant_turns_only_the_pdb_into_policy_v1(control_plane: LocalControlPlane) -> None:
    (line,) = block("pdb-policy-v1").splitlines()
    build, rewrite, apply = (stage.strip() for stage in line.split("|"))
    assert apply == "kubectl apply -f -"
    built = kubectl(control_plane, shlex.split(build)[1:])
    rewritten = subprocess.run(shlex.split(rewrite), input=built, capture_output=True, text=True, check=True)
    before = [d for d in yaml.safe_load_all(built) if d]
    after = [d for d in yaml.safe_load_all(rewritten.stdout) if d]
    changed = [
        (a["kind"], b["apiVersion"], a["apiVersion"]) for a, b in zip(after, before, strict=True) if a != b
    ]
    assert changed == [("PodDisruptionBudget", "policy/v1beta1", "policy/v1")]


def test_the_pod_example_is_a_valid_pod_for_kubesched(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    pod = yaml.safe_load(block("pod"))
    assert pod["spec"]["schedulerName"] == "kubesched"
    pod["metadata"]["namespace"] = namespace
    kubectl(control_plane, ["create", "--dry-run=server", "-f", "-"], stdin=yaml.safe_dump(pod))


# ------------------------------------------------------------------------------------- policies


def server_accepts_policy(control_plane: LocalControlPlane, manifest: dict[str, Any]) -> None:
    kubectl(control_plane, ["create", "--dry-run=server", "-f", "-"], stdin=yaml.safe_dump(manifest))
    compile_spec(manifest["spec"], "kubesched")  # what the operator would say: raises PolicyError


def test_the_policy_example_is_accepted_by_the_schema_and_the_operator(
    control_plane: LocalControlPlane,
) -> None:
    manifest = yaml.safe_load(block("policy"))
    server_accepts_policy(control_plane, manifest)
    assert compile_spec(manifest["spec"], "kubesched")[0] == "kubesched-batch"


def test_policy_convert_prints_what_the_readme_shows(
    control_plane: LocalControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (command,) = commands("convert")
    assert command[:3] == ["kubesched", "policy", "convert"] and command[-2] == ">"
    (tmp_path / command[3]).write_text(block("legacy-policy"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, command[1:-2], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output == block("convert-output") + "\n"
    server_accepts_policy(control_plane, yaml.safe_load(result.output))


# ---------------------------------------------------------------------------------------- explain

EXPLAIN_NODES = [  # as the README describes them
    make_node("node-a", cpu="2", memory="8Gi", labels={"disktype": "ssd"}),
    make_node("node-b", cpu="4", memory="8Gi", labels={"disktype": "hdd"}),
    make_node("node-c", cpu="4", memory="8Gi", labels={"disktype": "ssd"}, unschedulable=True),
]


@pytest_asyncio.fixture
async def shop(api: ApiClient, control_plane: LocalControlPlane) -> AsyncIterator[None]:
    """The README's pod on the README's nodes, under the default policy of `manifests/` just applied."""
    pod = yaml.safe_load(block("pod"))
    await delete_namespace(api, pod["metadata"]["namespace"])
    await create_namespace(api, pod["metadata"]["namespace"])
    await request(api, "DELETE", f"{POLICIES}/kubesched")  # so that it is generation 1, as shown
    await create_nodes(api, EXPLAIN_NODES)
    await asyncio.to_thread(kubectl, control_plane, ["create", "-f", "manifests/schedulerpolicy.yaml"])
    await asyncio.to_thread(kubectl, control_plane, ["create", "-f", "-"], yaml.safe_dump(pod))
    yield
    await request(api, "DELETE", f"{POLICIES}/kubesched")
    await delete_namespace(api, pod["metadata"]["namespace"])


@pytest.mark.usefixtures("shop")
async def test_explain_prints_what_the_readme_shows(control_plane: LocalControlPlane) -> None:
    (command,) = commands("explain")
    assert command[:2] == ["kubesched", "explain"]
    argv = [sys.executable, "-m", "kubesched", *command[1:], "--kubeconfig", str(control_plane.kubeconfig)]
    result = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == block("explain-output") + "\n"
