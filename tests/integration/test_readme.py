"""The examples of README.md and docs/ stay true: every block marked `<!-- readme-test: NAME -->` is
run or validated here, against the real API server where it names Kubernetes objects."""

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

from kubesched.cli import main
from kubesched.kube.client import request
from kubesched.policy.store import API_GROUP, API_VERSION, PLURAL, compile_spec
from kubesched_dev.devcluster import LocalControlPlane
from kubesched_dev.fixtures import delete_namespace, wait_for

from ..doc_examples import HOMES, REPO, block, marked, pages
from .kubeapi import events_for, wait_bound
from .kubesched_process import KubeschedProcess

POLICIES = f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"


def test_every_marked_block_is_on_its_page_and_run_here() -> None:
    """A block marked on a page but not in HOMES would be run by nothing."""
    for name in HOMES:
        block(name)
    assert set(marked()) == set(HOMES)


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
    """A page's `kubesched ...` line (`< FILE` included) run in `cwd` against the test's API server."""
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


def test_every_file_a_documented_command_names_is_at_hand() -> None:
    """Each file a `sh` block of README.md or docs/ names is in the checkout, written by an earlier
    command of the block (`> FILE`, `snapshot save FILE`), or one a page gives (`Given `FILE`:`): a
    reader running the commands from the checkout has it."""
    texts = pages().values()
    given = {file for text in texts for file in re.findall(r"Given `([^`]+)`:", text)}
    for code in (code for text in texts for code in re.findall(r"^```sh\n(.*?)^```$", text, re.M | re.S)):
        written: set[str] = set()
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            written |= {after for word, after in itertools.pairwise(words) if word in (">", "save")}
            for word in words:
                if FILE_NAMED.fullmatch(word):
                    assert (REPO / word).exists() or word in written | given, f"{word!r} in: {line}"


# ------------------------------------------------------------------------------- install and pods


@pytest.fixture
def kubesched_namespace(control_plane: LocalControlPlane) -> None:
    # As after the first real `kubectl apply -k manifests/`: a server dry run needs the namespace.
    kubectl(control_plane, ["apply", "-f", "manifests/namespace.yaml"])


@pytest.mark.parametrize("name", ["install", "readme-install"])
def test_the_install_commands_pass_on_the_api_server(
    control_plane: LocalControlPlane, kubesched_namespace: None, name: str
) -> None:
    ran = []
    for command in commands(name):
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


@pytest.mark.parametrize("name", ["policy", "readme-policy"])
def test_the_policy_example_is_accepted_by_the_schema_and_the_operator(
    control_plane: LocalControlPlane, name: str
) -> None:
    manifest = yaml.safe_load(block(name))
    server_accepts_policy(control_plane, manifest)
    assert compile_spec(manifest["spec"], "kubesched")[0] == "kubesched-batch"


def test_policy_convert_prints_what_the_docs_show(
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


def test_a_podgroup_of_the_old_api_group_is_refused_as_the_docs_say(
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


def test_the_example_file_holds_the_tutorial_pod() -> None:
    shown = yaml.safe_load(block("pod"))
    documents = yaml.safe_load_all((REPO / "examples/pending-pod.yaml").read_text())
    (pod,) = (d for d in documents if d["kind"] == "Pod")
    assert pod == shown


@pytest_asyncio.fixture
async def shop(api: ApiClient, control_plane: LocalControlPlane) -> AsyncIterator[None]:
    """The tutorial's pod on its nodes, under the default policy of `manifests/`: what the tutorial's
    commands create."""
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


def test_the_readme_excerpt_of_explain_is_the_tutorial_output() -> None:
    excerpt = block("readme-explain-excerpt")
    shown = block("explain-output")
    assert shown.endswith("\n" + excerpt) and excerpt.count("\n") >= 5


@pytest.mark.usefixtures("shop")
async def test_explain_prints_what_the_tutorial_shows(control_plane: LocalControlPlane) -> None:
    (command,) = commands("explain")
    assert command[:2] == ["kubesched", "explain"]
    argv = [sys.executable, "-m", "kubesched", *command[1:], "--kubeconfig", str(control_plane.kubeconfig)]
    result = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == block("explain-output") + "\n"


@pytest.mark.usefixtures("shop")
async def test_the_simulate_commands_run_as_written(control_plane: LocalControlPlane, tmp_path: Path) -> None:
    """From a checkout (its examples/) where the old-policy.json of docs/how-to/migrate.md was saved."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "old-policy.json").write_text(block("legacy-policy"))
    outputs = [await asyncio.to_thread(kubesched, control_plane, c, tmp_path) for c in commands("simulate")]
    assert outputs[0].startswith("1 pending pod(s) placed")  # shop/web
    assert (tmp_path / "cluster.json").exists()
    assert outputs[-1] == block("explain-output") + "\n"  # offline, from the same file
    server_accepts_policy(control_plane, yaml.safe_load((REPO / "examples/policies/pack.yaml").read_text()))


# ------------------------------------------------------------------------------------- the tutorial


def columns(table: str, wanted: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The `wanted` columns of a kubectl table, row by row (AGE and the like vary from run to run)."""
    header, *rows = table.splitlines()
    starts = [header.index(f"{name} ") if f"{name} " in header else header.index(name) for name in wanted]
    return [tuple(row[start:].split()[0] for start in starts) for row in rows]


def appears_in_order(excerpt: str, output: str) -> bool:
    """Every line of `excerpt` but its `...` elisions is a line of `output`, in that order."""
    lines = iter(output.splitlines())
    return all(any(line == shown for line in lines) for shown in excerpt.splitlines() if shown != "...")


def run_lines(control_plane: LocalControlPlane, name: str, cwd: Path) -> list[str]:
    """Each command of the block marked `name`, kubectl's or kubesched's, and its output."""
    outputs = []
    for command in commands(name):
        if command[0] == "kubesched":
            outputs.append(kubesched(control_plane, command, cwd))
        else:
            assert command[0] == "kubectl", command
            outputs.append(kubectl(control_plane, command[1:]))
    return outputs


@pytest.mark.usefixtures("shop")
async def test_the_tutorial_schedules_the_pod_and_takes_a_live_policy_edit(
    api: ApiClient, control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """Steps 4 to 6 of docs/tutorial.md, with `make run`'s scheduler, from the cluster of step 2."""

    async def accepted(generation: int) -> dict[str, Any] | None:
        _, body = await request(api, "GET", f"{POLICIES}/kubesched")
        conditions = body.get("status", {}).get("conditions", [])
        ours = (c for c in conditions if c["type"] == "Accepted" and c["observedGeneration"] == generation)
        return next(ours, None)

    def get(*args: str) -> str:
        return kubectl(control_plane, ["get", *args, "-o", "wide"])

    args = ["--policy-config-file", str(REPO / "examples/policies/seed-policy.json")]
    try:
        with KubeschedProcess(control_plane.kubeconfig, "kubesched", tmp_path, args) as scheduler:
            scheduler.wait_for_log("leader_elected")
            await wait_for(lambda: events_for(api, "shop", "web"), timeout=30)  # FailedScheduling
            await asyncio.to_thread(run_lines, control_plane, "tutorial-uncordon", REPO)
            await wait_bound(api, "shop", 1)
            wanted = ("NAME", "STATUS", "NODE")
            shown = await asyncio.to_thread(get, "pod", "-n", "shop")
            assert columns(shown, wanted) == columns(block("tutorial-scheduled"), wanted)

            await asyncio.to_thread(run_lines, control_plane, "tutorial-typo", REPO)
            rejected = await wait_for(lambda: accepted(2), timeout=30)
            assert rejected["status"] == "False"
            said = re.search(r"`(spec\.priorities[^`]+) \(accepted: \.\.\.\)`", pages()["docs/tutorial.md"])
            assert said and rejected["message"].startswith(said[1]), rejected["message"]
            wanted = ("NAME", "ACCEPTED", "ACTIVE", "REASON")
            shown = await asyncio.to_thread(get, "schedpol", "kubesched")
            assert columns(shown, wanted) == columns(block("tutorial-rejected"), wanted)

            *_, explained = await asyncio.to_thread(run_lines, control_plane, "tutorial-fix", REPO)
            assert (await wait_for(lambda: accepted(3), timeout=30))["status"] == "True"
            assert appears_in_order(block("tutorial-explain-fixed"), explained), explained
    finally:
        await request(api, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubesched")
