"""`kubectl kubesched`: kubectl's flags and habits, on saved cluster states and a kubeconfig in a temp dir."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from kubesched import cli
from kubesched.kubectl_plugin import colour_wanted, hoist_global_flags, main, paint_explain
from kubesched.tools.snapshot import ClusterState, save
from kubesched_dev.fixtures import make_node, make_pod

REPO = Path(__file__).parents[2]
MOST = {"kind": "Policy", "apiVersion": "v1", "priorities": [{"name": "MostRequestedPriority", "weight": 1}]}
ANSI = re.compile(r"\x1b\[")


def kubeconfig_document(current: str | None = "shop-admin") -> dict[str, object]:
    """Three contexts on one (unreachable) cluster: namespace shop, namespace other, and none."""
    contexts = [
        {"name": "shop-admin", "context": {"cluster": "c", "user": "u", "namespace": "shop"}},
        {"name": "other-admin", "context": {"cluster": "c", "user": "u", "namespace": "other"}},
        {"name": "plain", "context": {"cluster": "c", "user": "u"}},
    ]
    document: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": contexts,
    }
    if current is not None:
        document["current-context"] = current
    return document


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_document()))
    return str(path)


@pytest.fixture(autouse=True)
def _no_kubeconfig_around(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No $KUBECONFIG, an empty home, no NO_COLOR: each test sets what it needs."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield


@pytest.fixture
def cluster(tmp_path: Path) -> str:
    """A saved cluster state with a pending pod `web` in each of shop, other and default; each fares
    differently: shop/web fits node-c only, other/web fits nowhere, default/web fits everywhere."""
    nodes = [
        make_node("node-a", cpu="2", labels={"disktype": "ssd"}),
        make_node("node-b", cpu="4", labels={"disktype": "hdd"}),
        make_node("node-c", cpu="8", labels={"disktype": "ssd"}),
    ]
    pods = [
        make_pod("web", "shop", cpu="3", node_selector={"disktype": "ssd"}),
        make_pod("web", "other", cpu="64"),
        make_pod("web", "default", cpu="100m"),
    ]
    path = tmp_path / "cluster.json"
    save(ClusterState(nodes, pods), str(path))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`kubectl-kubesched ARGS`: exit code, standard output, standard error."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def explained_pod(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, "explain", *args, "-o", "json")
    assert code == 0, err
    return str(json.loads(out)["pod"])


def kubesched(*args: str) -> str:
    """`kubesched ARGS`' standard output, to compare with the plugin's."""
    result = CliRunner().invoke(cli.main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


# ------------------------------------------------------------------------------ the namespace


@pytest.mark.parametrize(
    ("found_in", "args", "pod"),
    [
        ("--kubeconfig", [], "shop/web"),  # the current context's namespace
        ("--kubeconfig", ["--context", "other-admin"], "other/web"),
        ("--kubeconfig", ["--context", "plain"], "default/web"),  # a context without one
        ("--kubeconfig", ["-n", "other"], "other/web"),
        ("--kubeconfig", ["--context", "other-admin", "-n", "shop"], "shop/web"),  # -n wins
        ("$KUBECONFIG", [], "shop/web"),
        ("$KUBECONFIG", ["--context", "other-admin"], "other/web"),
        ("~/.kube/config", [], "shop/web"),
        ("nowhere", [], "default/web"),
        ("nowhere", ["--namespace", "other"], "other/web"),
    ],
)
def test_the_namespace_is_n_else_the_contexts_else_default(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    kubeconfig: str,
    cluster: str,
    found_in: str,
    args: list[str],
    pod: str,
) -> None:
    if found_in == "--kubeconfig":
        args = ["--kubeconfig", kubeconfig, *args]
    elif found_in == "$KUBECONFIG":
        # A list, as kubectl takes it: files that do not exist are skipped.
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{kubeconfig}")
    elif found_in == "~/.kube/config":
        home = tmp_path / "home" / ".kube"
        home.mkdir(parents=True)
        (home / "config").write_text(Path(kubeconfig).read_text())
    assert explained_pod(capsys, "web", "--snapshot", cluster, *args) == pod


def test_the_first_kubeconfig_file_to_name_a_current_context_wins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cluster: str
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "other-admin"}))
    second.write_text(yaml.safe_dump(kubeconfig_document()))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert explained_pod(capsys, "web", "--snapshot", cluster) == "other/web"


@pytest.mark.parametrize(
    "args",
    [
        ["explain", "shop/web"],
        ["explain", "web", "-n", "shop"],
        ["explain", "shop/web", "-n", "shop"],  # the same namespace twice is fine
        ["-n", "shop", "explain", "web"],  # global flags before the command, as kubectl takes them
        ["explain", "--namespace=shop", "web"],
        ["explain", "web", "-nshop"],
        ["explain", "web", "-n=shop"],
        ["--context", "other-admin", "explain", "shop/web"],  # NAMESPACE/ wins over the context's
    ],
)
def test_pod_is_namespace_slash_name_or_a_name_in_the_namespace(
    capsys: pytest.CaptureFixture[str], kubeconfig: str, cluster: str, args: list[str]
) -> None:
    code, out, err = run(capsys, *args, "--snapshot", cluster, "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["pod"] == "shop/web"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["explain", "shop/web", "-n", "other"], "the namespace of shop/web does not match -n other"),
        (["explain", "web", "--context", "nope"], 'context "nope" does not exist'),
        (["explain", "shop/gone"], "pod shop/gone is not in the snapshot"),
        (["explain", "a/b/c"], "expected NAME or NAMESPACE/NAME, got 'a/b/c'"),
        (["explain", "Web"], "expected NAME or NAMESPACE/NAME, got 'Web'"),
        (["explain", "web", "-o", "xml"], "'xml' is not one of 'json', 'yaml', 'wide'"),
        (["explain", "web", "--frobnicate"], "--frobnicate"),
        (["explain", "web", "-n"], "flag needs an argument: -n"),
        (["explain"], "Missing argument 'POD'"),
        (["explain", "web", "--kubeconfig", "/nonexistent"], "kubeconfig /nonexistent: no such file"),
        (["explain", "web", "--snapshot", "/nonexistent"], "/nonexistent: cannot read"),
    ],
)
def test_errors_are_one_line_on_standard_error_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], kubeconfig: str, cluster: str, args: list[str], error: str
) -> None:
    # Right after the command, so that the flag under test stays last on the line.
    extra = [*(["--snapshot", cluster] if "--snapshot" not in args else [])]
    extra += ["--kubeconfig", kubeconfig] if "--kubeconfig" not in args else []
    code, out, err = run(capsys, args[0], *extra, *args[1:])
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert error in err


def test_an_unreachable_api_server_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], kubeconfig: str
) -> None:
    code, out, err = run(capsys, "explain", "web", "--kubeconfig", kubeconfig)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and "127.0.0.1:1" in err, err


def test_a_kubeconfig_without_a_current_context_needs_context(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "no-current"
    path.write_text(yaml.safe_dump(kubeconfig_document(current=None)))
    code, _, err = run(capsys, "snapshot", "save", "-", "--kubeconfig", str(path))
    assert code == 1
    assert err == f"error: no current context in {path}: give --context\n"


def test_without_any_kubeconfig_the_cluster_commands_say_where_they_looked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "snapshot", "save", "-")
    assert code == 1
    assert err == "error: no kubeconfig found (~/.kube/config): give --kubeconfig or set KUBECONFIG\n"


# --------------------------------------------------------------------------------- output


def test_outputs_are_kubesched_explains_in_json_yaml_and_table(
    capsys: pytest.CaptureFixture[str], kubeconfig: str, cluster: str
) -> None:
    args = ["explain", "web", "--snapshot", cluster, "--kubeconfig", kubeconfig]
    outputs = {}
    for output in ("json", "yaml", "wide", None):
        code, outputs[output], err = run(capsys, *args, *(["-o", output] if output else []))
        assert code == 0, err
    expected_json = kubesched("explain", "shop/web", "--snapshot", cluster, "-o", "json")
    assert outputs["json"] == expected_json
    assert yaml.safe_load(outputs["yaml"]) == json.loads(expected_json)
    # explain's table already lists every node and check: wide is the same table.
    assert outputs[None] == outputs["wide"] == kubesched("explain", "shop/web", "--snapshot", cluster)
    assert "node-a  PodFitsResources   Insufficient cpu" in outputs[None]


def test_colour_only_on_a_terminal_and_never_with_no_color(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kubeconfig: str, cluster: str
) -> None:
    args = ["explain", "web", "--snapshot", cluster, "--kubeconfig", kubeconfig]
    code, plain, _ = run(capsys, *args)  # captured: not a terminal
    assert code == 0 and not ANSI.search(plain)

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, painted, _ = run(capsys, *args)
    assert code == 0 and ANSI.search(painted)
    assert click.unstyle(painted) == plain
    assert run(capsys, *args, "--no-color")[1] == plain
    assert run(capsys, *args, "-o", "json")[1] == run(capsys, *args, "-o", "json", "--no-color")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    assert run(capsys, *args)[1] == plain


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "no_color_flag", "no_color_env", "colour"),
    [
        (True, False, "", True),
        (False, False, "", False),
        (True, True, "", False),
        (True, False, "1", False),
        (True, False, "", True),  # NO_COLOR set but empty counts as unset
    ],
)
def test_colour_wanted(
    monkeypatch: pytest.MonkeyPatch, tty: bool, no_color_flag: bool, no_color_env: str, colour: bool
) -> None:
    monkeypatch.setenv("NO_COLOR", no_color_env)
    assert colour_wanted(no_color_flag, _Stream(tty)) is colour  # type: ignore[arg-type]


def test_explain_colours_the_outcome_each_reason_and_the_best_nodes(cluster: str) -> None:
    table = kubesched("explain", "shop/web", "--snapshot", cluster).rstrip("\n")
    painted = paint_explain(table, ("node-c",), fits=True)
    assert click.unstyle(painted) == table
    red = click.style("Insufficient cpu", fg="red")
    assert f"node-a  PodFitsResources   {red}" in painted
    assert click.style("would be scheduled on node-c", fg="green", bold=True) in painted
    assert click.style("node-c", fg="green", bold=True) in painted
    unfit = kubesched("explain", "other/web", "--snapshot", cluster).rstrip("\n")
    assert click.style("0/3 nodes are available: 3 Insufficient cpu.", fg="red", bold=True) in paint_explain(
        unfit, (), fits=False
    )


# ------------------------------------------------------------------------------- the commands


def test_simulate_places_the_pods_of_the_namespace_or_with_a_every_namespace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kubeconfig: str, cluster: str
) -> None:
    policy = tmp_path / "most.json"
    policy.write_text(json.dumps(MOST))
    args = ["simulate", "--policy", str(policy), "--nodes-from", cluster, "--kubeconfig", kubeconfig]

    def placed(*more: str) -> list[str]:
        code, out, err = run(capsys, *args, *more, "-o", "json")
        assert code == 0, err
        return sorted(p["pod"] for p in json.loads(out)["placements"])

    assert placed() == ["shop/web"]
    assert placed("-n", "other") == ["other/web"]
    assert placed("-A") == ["default/web", "other/web", "shop/web"]
    assert placed("-A", "-n", "other") == ["default/web", "other/web", "shop/web"]  # as kubectl: -A wins

    code, table, _ = run(capsys, *args)
    assert code == 0
    same = ["simulate", "--policy", str(policy), "--nodes-from", cluster, "--namespace", "shop"]
    assert table == kubesched(*same)
    code, wide, _ = run(capsys, *args, "-A", "-o", "wide")
    assert code == 0
    assert wide.startswith(kubesched(*same[:-2]).rstrip("\n"))
    # wide: the table, then every pod in the queue's order, where each policy puts it, or why not.
    assert wide.split("PLACEMENTS (3)\n")[1].splitlines() == [
        "POD          CURRENT  CANDIDATE  REASON",
        "shop/web     node-c   node-c",
        "other/web    -        -          0/3 nodes are available: 3 Insufficient cpu.",
        "default/web  node-b   node-c",
    ]
    code, as_yaml, _ = run(capsys, *args, "-o", "yaml")
    assert code == 0 and yaml.safe_load(as_yaml)["placements"][0]["pod"] == "shop/web"


def test_version_and_policy_convert_are_kubescheds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(capsys, "version") == (0, kubesched("version"), "")
    legacy = tmp_path / "old-policy.json"
    legacy.write_text(json.dumps(MOST))
    converted = run(capsys, "policy", "convert", str(legacy), "--name", "pack", "-o", "json", "-n", "ignored")
    assert converted == (0, kubesched("policy", "convert", str(legacy), "--name", "pack", "-o", "json"), "")


def test_no_command_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 0
    assert out.startswith("Usage: kubectl kubesched [OPTIONS] [COMMAND]")
    assert "explain" in out and "--context NAME" in out


@pytest.mark.parametrize(
    ("args", "hoisted"),
    [
        (["explain", "web", "-n", "shop"], ["--namespace", "shop", "explain", "web"]),
        (["explain", "-nshop", "web"], ["--namespace=shop", "explain", "web"]),
        (["explain", "web", "-n=shop"], ["--namespace=shop", "explain", "web"]),
        (["snapshot", "save", "--context", "prod", "-"], ["--context", "prod", "snapshot", "save", "-"]),
        (
            ["explain", "web", "--kubeconfig=k", "--no-color"],
            ["--kubeconfig=k", "--no-color", "explain", "web"],
        ),
        (["explain", "web", "-o", "json"], ["explain", "web", "-o", "json"]),
        (["explain", "--", "-n", "x"], ["explain", "--", "-n", "x"]),  # nothing after --
    ],
)
def test_global_flags_are_taken_anywhere_on_the_line(args: list[str], hoisted: list[str]) -> None:
    assert hoist_global_flags(args) == hoisted


def test_the_package_installs_kubectl_kubesched() -> None:
    """krew's naming: kubectl runs `kubectl-kubesched` from PATH for `kubectl kubesched`."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-kubesched"] == "kubesched.kubectl_plugin:main"


GPU = "nvidia.com/gpu"


def elastic_quota(namespace: str, name: str, created: str, spec: dict[str, object]) -> dict[str, object]:
    meta = {"namespace": namespace, "name": name, "uid": f"{namespace}-{name}", "creationTimestamp": created}
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": meta,
        "spec": spec,
    }


def refused(name: str, namespace: str, message: str) -> dict[str, object]:
    pod = make_pod(name, namespace, extended={GPU: "2"})
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return pod


def test_quota_lists_every_elastic_quota_with_its_use_and_waiting_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kubeconfig: str
) -> None:
    at = "2026-01-01T00:00:00Z"
    quotas = [
        elastic_quota("team", "eq", at, {"min": {GPU: "4", "cpu": "2"}, "max": {GPU: "6", "memory": "8Gi"}}),
        elastic_quota("team", "late", "2026-02-01T00:00:00Z", {"max": {GPU: "1"}}),
        elastic_quota("lab", "eq", at, {"min": {"cpu": "1"}}),
    ]
    over = "0/1 nodes are available: ElasticQuota team/eq: over max: nvidia.com/gpu 8 > 6."
    pods = [
        make_pod("train", "team", cpu="1500m", memory="1Gi", node_name="n1", extended={GPU: "6"}),
        refused("wait-1", "team", over),
        refused(
            "wait-2",
            "team",
            f"pod group team/g: ElasticQuota team/eq refuses its 2 members still needed: {over}",
        ),
        refused("elsewhere", "team", "0/1 nodes are available: 1 Insufficient cpu."),
        make_pod("done", "team", cpu="7", node_name="n1"),
    ]
    pods[-1]["status"]["phase"] = "Succeeded"  # finished: no longer counted
    path = tmp_path / "quotas.json"
    save(ClusterState([make_node("n1", cpu="64")], pods, {"ElasticQuota": quotas}), str(path))
    args = ["quota", "--snapshot", str(path), "--kubeconfig", kubeconfig]

    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert out.splitlines() == [
        "NAMESPACE  NAME  RESOURCE        USED   MIN    MAX  WAITING",
        "lab        eq    cpu             0      1      -    0",
        "team       eq    cpu             1500m  2000m  -    2",
        "                 memory          1Gi    0Gi    8Gi",
        "                 nvidia.com/gpu  6      4      6",
        "team       late  nvidia.com/gpu  -      0      1    0",
        "note: team/late: ignored: ElasticQuota eq, older, is in force in namespace team",
    ]
    code, wide, _ = run(capsys, *args, "-o", "wide")
    assert "wait-1, wait-2" in wide.splitlines()[2]
    code, as_json, _ = run(capsys, *args, "-n", "team", "-o", "json")
    found = json.loads(as_json)["quotas"]
    assert [(q["name"], q["inForce"], q["waiting"]) for q in found] == [
        ("eq", True, ["wait-1", "wait-2"]),
        ("late", False, []),
    ]
    assert found[0]["resources"][2] == {"resource": GPU, "used": "6", "min": "4", "max": "6"}
    empty = tmp_path / "empty.json"
    save(ClusterState([], []), str(empty))
    assert run(capsys, "quota", "--snapshot", str(empty)) == (0, "No ElasticQuotas found.\n", "")
