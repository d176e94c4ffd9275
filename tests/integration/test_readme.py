"""The README's examples stay true: every block marked `<!-- readme-test: NAME -->` is run or
validated here, against the real API server where it names Kubernetes objects, and its lists of
predicates, priorities and metrics are the ones the code has."""

from __future__ import annotations

import asyncio
import itertools
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
from kubesched_dev.fixtures import delete_namespace

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


def run_kubectl(
    control_plane: LocalControlPlane, args: list[str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [str(control_plane.bin_dir / "kubectl"), "--kubeconfig", str(control_plane.kubeconfig), *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=REPO, timeout=60)


def kubectl(control_plane: LocalControlPlane, args: list[str], stdin: str | None = None) -> str:
    result = run_kubectl(control_plane, args, stdin)
    assert result.returncode == 0, f"{shlex.join(args)}: {result.stderr}"
    return result.stdout


def commands(name: str) -> Iterator[list[str]]:
    for line in block(name).splitlines():
        if line.strip() and not line.startswith("#"):
            yield shlex.split(line.split("  #")[0])


def kubesched(control_plane: LocalControlPlane, command: list[str], cwd: Path) -> str:
    """A README's `kubesched ...` line (`< FILE` included) run in `cwd` against the test's API server."""
    assert command[0] == "kubesched"
    stdin = None
    if "<" in command:
        command, (source,) = command[: command.index("<")], command[command.index("<") + 1 :]
        stdin = (cwd / source).read_text()
    argv = [sys.executable, "-m", "kubesched", *command[1:], "--kubeconfig", str(control_plane.kubeconfig)]
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60)
    assert result.returncode == 0, f"{shlex.join(command)}: {result.stderr}"
    return result.stdout


# -------------------------------------------------------------------------------- the files named


FILE_NAMED = re.compile(r"[\w.-][\w./-]*(\.json|\.ya?ml|/)")


def test_every_file_a_readme_command_names_is_at_hand() -> None:
    """Each file a `sh` block names is in the checkout, written by an earlier command of the block
    (`> FILE`, `snapshot save FILE`), or one the README gives (`Given `FILE`:`): a reader running
    the commands from the checkout has it."""
    given = set(re.findall(r"Given `([^`]+)`:", README))
    for code in re.findall(r"^```sh\n(.*?)^```$", README, re.M | re.S):
        written: set[str] = set()
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            written |= {after for word, after in itertools.pairwise(words) if word in (">", "save")}
            for word in words:
                if FILE_NAMED.fullmatch(word):
                    assert (REPO / word).exists() or word in written | given, f"{word!r} in: {line}"


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


# ------------------------------------------------------------------------------------- PodGroups


def test_a_podgroup_of_the_old_api_group_is_refused_as_the_readme_says(
    control_plane: LocalControlPlane, namespace: str
) -> None:
    note = " ".join(block("podgroup-old-group").split())
    old = re.search(r"`apiVersion: (scheduling\.sigs\.k8s\.io/\w+)`", note)
    refusal = re.search(r"`(no matches for kind [^`]+)`", note)
    fix = re.search(r"Change their `apiVersion` to `([^`]+)`", note)
    assert old and refusal and fix, note
    group = next(yaml.safe_load_all(block("podgroup")))
    group["metadata"]["namespace"] = namespace
    group["apiVersion"] = old[1]
    refused = run_kubectl(control_plane, ["apply", "--dry-run=server", "-f", "-"], yaml.safe_dump(group))
    assert refused.returncode != 0 and refusal[1] in refused.stderr, refused.stderr
    group["apiVersion"] = fix[1]
    kubectl(control_plane, ["apply", "--dry-run=server", "-f", "-"], yaml.safe_dump(group))


# ---------------------------------------------------------------------------------------- explain


def test_the_example_file_holds_the_readme_pod() -> None:
    shown = yaml.safe_load(block("pod"))
    documents = yaml.safe_load_all((REPO / "examples/pending-pod.yaml").read_text())
    (pod,) = (d for d in documents if d["kind"] == "Pod")
    assert pod == shown


@pytest_asyncio.fixture
async def shop(api: ApiClient, control_plane: LocalControlPlane) -> AsyncIterator[None]:
    """The README's pod on the README's nodes, under the default policy of `manifests/`: what the
    README's commands create."""
    pod = yaml.safe_load(block("pod"))
    await delete_namespace(api, pod["metadata"]["namespace"])
    await request(api, "DELETE", f"{POLICIES}/kubesched")  # so that it is generation 1, as shown
    ran = []
    for command in commands("explain-setup"):
        assert command[0] == "kubectl"
        await asyncio.to_thread(kubectl, control_plane, command[1:])
        ran.append(command[1])
    assert ran == ["apply", "wait", "apply"]
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


@pytest.mark.usefixtures("shop")
async def test_the_simulate_commands_run_as_written(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    """From a checkout (its examples/) where the README's old-policy.json was saved."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "old-policy.json").write_text(block("legacy-policy"))
    outputs = [await asyncio.to_thread(kubesched, control_plane, c, tmp_path) for c in commands("simulate")]
    assert outputs[0].startswith("1 pending pod(s) placed")  # shop/web
    assert (tmp_path / "cluster.json").exists()
    assert outputs[-1] == block("explain-output") + "\n"  # offline, from the same file
    server_accepts_policy(control_plane, yaml.safe_load((REPO / "examples/policies/pack.yaml").read_text()))
