from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kubesched import __version__
from kubesched.cli import main


def test_version() -> None:
    result = CliRunner().invoke(main, ["version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kubesched {__version__}"


def test_run_rejects_nonsense_flags_before_connecting() -> None:
    result = CliRunner().invoke(main, ["run", "--bind-concurrency", "0"])
    assert result.exit_code == 2
    assert "--bind-concurrency" in result.output and "at least 1" in result.output


def test_run_reports_an_invalid_policy_file_and_exits_non_zero(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"kind": "Policy", "apiVersion": "v1", "predicates": [{"name": "NoSuchPredicate"}]}')
    result = CliRunner().invoke(
        main, ["run", "--policy-config-file", str(policy), "--kubeconfig", "/nonexistent"]
    )
    assert result.exit_code == 1
    assert "NoSuchPredicate" in result.output
    assert "predicates[0].name" in result.output


def test_run_reports_malformed_json(tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"kind": "Policy", "predicates": [')
    result = CliRunner().invoke(main, ["run", "--policy-config-file", str(policy)])
    assert result.exit_code == 1
    assert str(policy) in result.output


def test_percentage_of_nodes_to_score_is_a_share() -> None:
    result = CliRunner().invoke(main, ["run", "--percentage-of-nodes-to-score", "101"])
    assert result.exit_code == 2
    assert "--percentage-of-nodes-to-score" in result.output and "0<=x<=100" in result.output
