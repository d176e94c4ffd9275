"""`kubesched policy convert`: a legacy Policy file in, a SchedulerPolicy manifest out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.policy.store import compile_spec

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
        ('{"kind": "KubeSchedulerConfiguration"}', 'kind: must be "Policy"'),
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
    assert output.startswith("Error: ")
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
