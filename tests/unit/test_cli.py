from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubesched import __version__
from kubesched.app.settings import FLAGS, RunSettings
from kubesched.cli import main, run
from kubesched.version import source_revision


def test_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBESCHED_REVISION", "0123abc")
    result = CliRunner().invoke(main, ["version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kubesched {__version__} (revision 0123abc)"


def test_source_revision_without_the_variable_is_a_commit_or_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBESCHED_REVISION", raising=False)
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", source_revision())


def test_source_revision_without_git_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBESCHED_REVISION", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert source_revision() == "unknown"


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


def test_run_flags_default_to_the_settings_tree_defaults() -> None:
    """Every flag of `kubesched run` sets one setting, and left alone gives that setting's default."""
    parsed = run.make_context("run", []).params
    assert set(parsed) == set(FLAGS)
    assert RunSettings.from_flags(parsed) == RunSettings()
    assert RunSettings().election.config("kubesched") is not None


def test_run_flags_land_in_their_settings() -> None:
    args = ["--kube-api-qps", "5", "--leader-elect=false", "--pod-max-backoff", "1m", "--log-format", "json"]
    settings = RunSettings.from_flags(run.make_context("run", args).params)
    assert settings.connection.qps == 5.0
    assert settings.election.config(settings.scheduling.scheduler_name) is None
    assert settings.scheduling.queue().max_backoff == 60.0
    assert settings.observability.log_format == "json"
    assert settings.connection.burst == RunSettings().connection.burst


def test_lease_defaults_to_the_scheduler_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "sched")
    args = ["--scheduler-name", "ks", "--leader-elect-renew-deadline", "8s"]
    settings = RunSettings.from_flags(run.make_context("run", args).params)
    config, again = settings.election.config("ks"), settings.election.config("ks")
    assert config is not None and again is not None
    assert (config.namespace, config.name, config.renew_deadline) == ("sched", "ks", 8.0)
    assert config.identity and config.identity == again.identity  # drawn once per process


def test_a_flag_without_a_setting_is_refused() -> None:
    with pytest.raises(TypeError, match="no_such_flag"):
        RunSettings.from_flags({"no_such_flag": 1})


@pytest.mark.parametrize(
    ("args", "code", "last_line"),
    [
        (["run", "--no-such-flag"], 2, "error: No such option '--no-such-flag'."),
        (
            ["policy", "convert", "missing.json"],
            2,
            "error: Invalid value for 'FILE': File 'missing.json' does not exist.",
        ),
        (["policy", "convert", "p.json"], 1, 'error: p.json: predicates[0].name: unknown predicate "X"'),
    ],
)
def test_errors_read_as_the_kubectl_plugins_do(
    args: list[str], code: int, last_line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`error: ...` on standard error, as kubectl and `kubectl kubesched` print it; a usage error keeps
    click's usage and hint above it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.json").write_text('{"kind": "Policy", "apiVersion": "v1", "predicates": [{"name": "X"}]}')
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    assert result.stdout == "" and "Error:" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(last_line), result.stderr
    if code == 2:
        assert result.stderr.startswith(f"Usage: main {args[0]}"), result.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("case", "text", "words"),
    [
        ("not YAML", "apiVersion: v1\nclusters: [\n  {oops\n", "reading the kubeconfig"),
        (
            "no current context",
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\n",
            "reading the kubeconfig",
        ),
        (
            "no server there",
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:PORT',"
            " insecure-skip-tls-verify: true}}]\n"
            "users: [{name: c, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: c}}]\n",
            "https://127.0.0.1:PORT",
        ),
    ],
)
def test_run_fails_to_start_in_one_line(tmp_path: Path, case: str, text: str, words: str) -> None:
    """`kubesched run` with a kubeconfig it cannot use: exit code 1 and one line naming the file or
    the server, no traceback (that comes only with --log-level debug)."""
    import subprocess
    import sys

    port = str(_closed_port())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text.replace("PORT", port))
    argv = [sys.executable, "-m", "kubesched", "run", "--kubeconfig", str(kubeconfig)]
    argv += ["--leader-elect=false", "--metrics-port", "0", "--log-level", "error"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert words.replace("PORT", port) in lines[0], lines[0]
    if "kubeconfig" in words:
        assert str(kubeconfig) in lines[0]
    if case == "not YAML":
        debug = subprocess.run([*argv[:-1], "debug"], capture_output=True, text=True, timeout=120)
        assert debug.returncode == 1 and "Traceback" in debug.stderr, debug.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["snapshot", "save", "-"],
        ["explain", "default/web"],
        ["simulate", "--policy", "-", "--nodes-from", "live"],
    ],
)
@pytest.mark.parametrize("case", ["missing file", "no server there"])
def test_reading_the_cluster_fails_in_one_line(tmp_path: Path, command: list[str], case: str) -> None:
    """The commands that read the live cluster: a kubeconfig that is not there, or a server that does
    not answer, is one `error:` line naming it, not a traceback."""
    kubeconfig = tmp_path / "kubeconfig"
    port = _closed_port()
    if case == "no server there":
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}',"
            " insecure-skip-tls-verify: true}}]\n"
            "users: [{name: c, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: c}}]\n"
        )
    policy = '{"kind": "Policy", "apiVersion": "v1"}'
    result = CliRunner().invoke(main, [*command, "--kubeconfig", str(kubeconfig)], input=policy)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1, (result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert (str(kubeconfig) if case == "missing file" else f"127.0.0.1:{port}") in lines[0], lines[0]
