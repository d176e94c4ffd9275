"""`kubesched policy convert`: a legacy Policy file in, a SchedulerPolicy manifest out; a
KubeSchedulerConfiguration in, one SchedulerPolicy per profile out (the conversion itself is
tested in test_kubescheduler_config.py, against kube-scheduler 1.32's
pkg/scheduler/apis/config/v1/default_plugins.go and the plugins' argument types in
pkg/scheduler/apis/config/types_pluginargs.go)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.policy.store import compile_spec

from ..doc_examples import block

SEED_POLICY = Path(__file__).parents[2] / "examples" / "policies" / "seed-policy.json"


def convert(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["policy", "convert", *args])
    return result.exit_code, result.output


def test_seed_policy_becomes_a_manifest_whose_spec_compiles_the_same() -> None:
    code, output = convert(str(SEED_POLICY))
    assert code == 0, output
    manifest = yaml.safe_load(output)
    assert manifest["apiVersion"] == "kubesched.io/v1alpha1"
    assert manifest["kind"] == "SchedulerPolicy"
    assert manifest["metadata"] == {"name": "kubesched"}
    legacy = json.loads(SEED_POLICY.read_text())
    assert manifest["spec"] == {k: v for k, v in legacy.items() if k not in ("kind", "apiVersion")}
    name, algorithm = compile_spec(manifest["spec"], "kubesched")
    assert name == "kubesched"
    assert algorithm.priority_names == (
        "BalancedResourceAllocation",
        "EqualPriority",
        "LeastRequestedPriority",
        "SelectorSpreadPriority",
    )


def test_yaml_input_json_output_and_a_scheduler_name(tmp_path: Path) -> None:
    source = tmp_path / "policy.yaml"
    source.write_text(
        "kind: Policy\napiVersion: v1\npriorities:\n- {name: LeastRequestedPriority, weight: 2}\n"
    )
    code, output = convert(str(source), "--scheduler-name", "batch", "-o", "json")
    assert code == 0, output
    assert json.loads(output) == {
        "apiVersion": "kubesched.io/v1alpha1",
        "kind": "SchedulerPolicy",
        "metadata": {"name": "batch"},
        "spec": {"schedulerName": "batch", "priorities": [{"name": "LeastRequestedPriority", "weight": 2}]},
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"kind": "Policy", "predicates": [', "not valid JSON"),
        ("- just\n- a list\n", "a policy file must hold an object, got list"),
        ('{"kind": "Policie"}', 'kind: must be "Policy"'),
        (
            '{"kind": "KubeSchedulerConfiguration"}',
            "apiVersion: must be one of kubescheduler.config.k8s.io/v1,",
        ),
        ('{"priorities": [{"name": "LeastRequestedPriority", "weight": -1}]}', "priorities[0].weight"),
        (
            '{"predicates": [{"name": "PodFitsResourcez"}]}',
            'predicates[0].name: unknown predicate "PodFitsResourcez"',
        ),
    ],
)
def test_malformed_input_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    source = tmp_path / ("policy.yaml" if content.startswith("-") else "policy.json")
    source.write_text(content)
    code, output = convert(str(source))
    assert code != 0
    assert output.startswith("error: ")
    assert str(source) in output
    assert message in output
    assert "apiVersion: kubesched.io" not in output


def test_no_validate_converts_what_the_operator_would_reject(tmp_path: Path) -> None:
    source = tmp_path / "policy.json"
    source.write_text('{"kind": "Policy", "priorities": [{"name": "ImageLocalityPriorityX", "weight": 1}]}')
    assert convert(str(source))[0] != 0
    code, output = convert(str(source), "--no-validate")
    assert code == 0, output
    assert yaml.safe_load(output)["spec"]["priorities"][0]["name"] == "ImageLocalityPriorityX"


def test_validation_loads_the_extenders_tls_files_as_the_operator_would(tmp_path: Path) -> None:
    source = tmp_path / "policy.json"
    extender = {"urlPrefix": "https://x", "tlsConfig": {"caFile": str(tmp_path / "absent-ca.pem")}}
    source.write_text(json.dumps({"kind": "Policy", "extenders": [extender]}))
    code, output = convert(str(source))
    assert code != 0 and "extenders: cannot set up TLS" in output
    assert convert(str(source), "--no-validate")[0] == 0


def test_missing_file_and_bad_name_are_usage_errors(tmp_path: Path) -> None:
    code, output = convert(str(tmp_path / "absent.json"))
    assert code == 2 and "does not exist" in output
    code, output = convert(str(SEED_POLICY), "--name", "Not_A_Name")
    assert code == 2 and "RFC 1123" in output


KUBESCHEDULER_CONFIGURATION = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: true}
profiles:
- schedulerName: kubesched
- schedulerName: gpu-binpack
  plugins:
    multiPoint:
      enabled: [{name: NodeResourcesFit, weight: 5}, {name: Coscheduling}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}, {name: memory, weight: 1}, {name: nvidia.com/gpu, weight: 5}]
"""
WARNINGS = [
    "warning: leaderElection: leader election has no SchedulerPolicy equivalent "
    "(use kubesched run's --leader-elect* flags)",
    "warning: profiles[1].plugins.multiPoint.enabled[1]: plugin Coscheduling has no SchedulerPolicy "
    "equivalent (PodGroups are built into kubesched: every profile places a group's members all or "
    "nothing)",
]


def test_a_kubescheduler_configuration_becomes_one_policy_per_profile(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(KUBESCHEDULER_CONFIGURATION)
    result = CliRunner().invoke(main, ["policy", "convert", str(source)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == WARNINGS
    # The same warnings as comments, and in each manifest's annotation.
    assert [line for line in result.stdout.splitlines() if line.startswith("# warning: ")] == [
        "# " + line for line in WARNINGS
    ]
    first, second = yaml.safe_load_all(result.stdout)
    assert first["metadata"]["name"] == first["spec"]["schedulerName"] == "kubesched"
    assert second["metadata"]["name"] == second["spec"]["schedulerName"] == "gpu-binpack"
    assert second["spec"]["nodeResourcesScoring"] == {
        "weight": 5,
        "type": "MostAllocated",
        "resources": [
            {"name": "cpu", "weight": 1},
            {"name": "memory", "weight": 1},
            {"name": "nvidia.com/gpu", "weight": 5},
        ],
    }
    annotation = second["metadata"]["annotations"]["kubesched.io/unconverted"]
    assert annotation.splitlines() == [line.removeprefix("warning: ") for line in WARNINGS]
    for manifest in (first, second):
        compile_spec(manifest["spec"], "kubesched")


def test_strict_refuses_a_configuration_with_unconverted_settings(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(KUBESCHEDULER_CONFIGURATION)
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "--strict"])
    assert result.exit_code == 1
    assert "2 setting(s) not converted" in result.stderr
    assert "apiVersion: kubesched.io" not in result.stdout


def test_a_configuration_as_json_and_names_for_a_single_profile(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.json"
    source.write_text(json.dumps(yaml.safe_load(KUBESCHEDULER_CONFIGURATION)))
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "-o", "json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    assert listing["kind"] == "List"
    assert [item["metadata"]["name"] for item in listing["items"]] == ["kubesched", "gpu-binpack"]
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "--name", "x"])
    assert result.exit_code == 1 and "a name can be given to one profile only" in result.stderr

    source.write_text(
        json.dumps(
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": "KubeSchedulerConfiguration"}
        )
    )
    args = [
        "policy",
        "convert",
        str(source),
        "-o",
        "json",
        "--name",
        "batch",
        "--scheduler-name",
        "kubesched-batch",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    manifest = json.loads(result.stdout)
    assert manifest["metadata"] == {"name": "batch"}
    assert manifest["spec"]["schedulerName"] == "kubesched-batch"


# scheduler-plugins' own configuration for coscheduling (manifests/coscheduling/scheduler-config.yaml).
SCHEDULER_PLUGINS_COSCHEDULING = """\
apiVersion: kubescheduler.config.k8s.io/v1beta3
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: "REPLACE_ME_WITH_KUBE_CONFIG_PATH"
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
    preFilter:
      enabled:
      - name: Coscheduling
    postFilter:
      enabled:
      - name: Coscheduling
    permit:
      enabled:
      - name: Coscheduling
    reserve:
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
"""


def test_scheduler_plugins_coscheduling_configuration_is_one_note_and_a_timeout(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(SCHEDULER_PLUGINS_COSCHEDULING)
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "--scheduler-name", "kubesched"])
    assert result.exit_code == 0, result.output
    warnings = result.stderr.splitlines()
    assert [line.split(": ")[1] for line in warnings] == [
        "leaderElection",
        "clientConnection",
        "profiles[0].plugins.queueSort.enabled[0]",
        "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds",
    ]
    assert "PodGroups are built into kubesched" in warnings[2]
    assert "a 10 s wait for PodGroups without scheduleTimeoutSeconds" in warnings[3]
    assert "kubesched uses each PodGroup's scheduleTimeoutSeconds" in warnings[3]
    (manifest,) = yaml.safe_load_all(result.stdout)
    assert manifest["spec"]["schedulerName"] == "kubesched"
    compile_spec(manifest["spec"], "kubesched")


# The first example of the Kubernetes documentation's "Scheduler Configuration" page: no schedulerName.
KUBERNETES_DOCS_EXAMPLE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - plugins:
      score:
        disabled:
        - name: PodTopologySpread
        enabled:
        - name: MyCustomPluginA
          weight: 2
        - name: MyCustomPluginB
          weight: 1
"""


@pytest.mark.parametrize(
    ("content", "where"),
    [
        pytest.param(KUBERNETES_DOCS_EXAMPLE, "profiles[0]", id="no schedulerName"),
        pytest.param(SCHEDULER_PLUGINS_COSCHEDULING, "profiles[0]", id="schedulerName: default-scheduler"),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "profiles: [{schedulerName: a}, {}]\n",
            "profiles[1]",
            id="one profile of two",
        ),
    ],
)
def test_a_policy_for_default_scheduler_needs_an_explicit_scheduler_name(
    tmp_path: Path, content: str, where: str
) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(content)
    result = CliRunner().invoke(main, ["policy", "convert", str(source)])
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: {where} would be a policy for default-scheduler")
    assert ("give --scheduler-name" if where == "profiles[0]" else "rename its schedulerName") in line


def test_an_explicit_default_scheduler_name_is_allowed_with_a_warning(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(KUBERNETES_DOCS_EXAMPLE)
    args = ["policy", "convert", str(source), "--scheduler-name", "default-scheduler"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0].startswith(
        "warning: --scheduler-name default-scheduler: applied, the policy makes kubesched schedule"
    )
    assert yaml.safe_load(result.stdout)["spec"]["schedulerName"] == "default-scheduler"
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "--scheduler-name", "mine"])
    assert result.exit_code == 0, result.output
    assert "default-scheduler" not in result.output


def test_a_legacy_policy_for_default_scheduler_is_warned_about() -> None:
    result = CliRunner().invoke(
        main, ["policy", "convert", str(SEED_POLICY), "--scheduler-name", "default-scheduler"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: --scheduler-name default-scheduler: applied, the policy")


def test_a_profile_name_that_cannot_name_a_policy_needs_name(tmp_path: Path) -> None:
    source = tmp_path / "scheduler-config.yaml"
    source.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles: [{schedulerName: My_Scheduler}]\n"
    )
    result = CliRunner().invoke(main, ["policy", "convert", str(source)])
    assert result.exit_code == 1 and "give the policy a name with --name" in result.stderr
    result = CliRunner().invoke(main, ["policy", "convert", str(source), "--name", "mine"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["spec"]["schedulerName"] == "My_Scheduler"


def test_the_documented_kubescheduler_configuration_example_is_what_convert_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = shlex.split(block("kubescheduler-convert"))
    assert command[:3] == ["kubesched", "policy", "convert"] and command[-2] == ">"
    (tmp_path / command[3]).write_text(block("kubescheduler-config") + "\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, command[1:-2], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout == block("kubescheduler-convert-output") + "\n"
    assert result.stderr.startswith("warning: leaderElection: leader election has no SchedulerPolicy")
