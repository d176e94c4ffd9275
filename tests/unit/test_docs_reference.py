"""The generated reference pages (hack/kubesched_dev/docs.py) leave nothing out: every command and
option, CRD field, predicate and priority, metric, event reason and condition, and benchmark row."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from mkdocs.exceptions import PluginError
from prometheus_client import REGISTRY, generate_latest

from kubesched.cli import main
from kubesched.kube import reasons
from kubesched.kubectl_plugin import plugin
from kubesched.plugins import registry
from kubesched_dev import docs

REPO = Path(__file__).parents[2]


def row(page: str, first_cell: str) -> str:
    """The table row whose first cell starts with `first_cell`."""
    found = [line for line in page.splitlines() if line.startswith(f"| {first_cell}")]
    assert len(found) == 1, f"{first_cell}: {len(found)} rows"
    return found[0]


def sections(page: str) -> dict[str, str]:
    """`## `heading`` -> the text up to the next such heading."""
    parts = re.split(r"^## `([^`]+)`$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


# ------------------------------------------------------------------------------------------ CLI


def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, f"{path} {name}")


@pytest.mark.parametrize(("group", "prog"), [(main, "kubesched"), (plugin, "kubectl kubesched")])
def test_every_command_and_option_is_on_the_cli_page(group: click.Group, prog: str) -> None:
    page = sections(docs.cli_reference())
    commands = list(walk(group, prog))
    assert len(commands) > 3
    for path, command in commands:
        assert path in page, path
        assert " ".join((command.help or "").split()[:6]) in " ".join(page[path].split()), path
        for param in command.params:
            if isinstance(param, click.Option) and "--help" not in param.opts:
                option_row = row(page[path], f"`{param.opts[0]}`")
                assert all(f"`{flag}`" in option_row for flag in param.secondary_opts), option_row


def test_the_cli_page_shows_defaults_ranges_and_choices() -> None:
    run = sections(docs.cli_reference())["kubesched run"]
    assert "| `--kube-api-qps` | float | `50.0` |" in run
    assert "| `--percentage-of-nodes-to-score` | integer range (0<=x<=100) |" in run
    assert "`console` \\| `json`" in row(run, "`--log-format`")


# ---------------------------------------------------------------------------------------- CRDs


def field_paths(node: Any, path: str) -> Iterator[str]:
    """Every property under `node`, as `a.b[].c` (a map's values as `.*`)."""
    if not isinstance(node, dict):
        return
    for name, child in node.get("properties", {}).items():
        yield f"{path}.{name}"
        yield from field_paths(child, f"{path}.{name}")
    yield from field_paths(node.get("items"), f"{path}[]")
    yield from field_paths(node.get("additionalProperties"), f"{path}.*")


@pytest.mark.parametrize("filename", sorted(p.name for p in (REPO / "crds").glob("*_*.yaml")))
def test_every_crd_field_is_on_the_policy_page(filename: str) -> None:
    page = docs.policy_reference()
    crd = yaml.safe_load((REPO / "crds" / filename).read_text())
    kind = crd["spec"]["names"]["kind"]
    assert f"## {kind}" in page
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    paths = [p.lstrip(".") for top in ("spec", "status") for p in field_paths(schema["properties"][top], top)]
    assert paths
    kind_part = page.split(f"## {kind}\n")[1].split("\n## ")[0]
    for path in paths:
        assert f"| `{path}` |" in kind_part, f"{kind} {path}"


def test_the_policy_page_shows_types_enums_and_limits() -> None:
    page = docs.policy_reference()
    assert "one of `Active`, `Shadow`" in row(page, "`spec.mode`")
    assert "minimum `0`; maximum `100`" in row(page, "`spec.percentageOfNodesToScore`")
    assert "| array of object | max items `1000` |" in row(page, "`spec.predicates`")
    assert "| map of quantity (integer or string) |" in row(page, "`spec.min`")


# ------------------------------------------------------------------------------------- plugins


def test_every_predicate_is_on_the_plugins_page_with_what_it_declares() -> None:
    page = docs.plugins_reference()
    for name, spec in registry.PREDICATES.items():
        line = row(page, f"`{name}`")
        assert spec.summary and spec.summary in line, name
        assert all(f"alias `{a}`" in line for a in spec.aliases), name
        assert f"| {spec.framework}" in line if spec.framework else True, name
        assert f"`{spec.argument_key}`" in line if spec.argument_key else True, name
        assert ("mandatory" in line) is spec.mandatory, name
    assert set(registry.FRAMEWORK_FILTERS) <= set(re.findall(r"\b[A-Z]\w+\b", page))


def test_every_priority_is_on_the_plugins_page_with_its_default_weight() -> None:
    page = docs.plugins_reference().split("## Priorities")[1]
    for name, spec in registry.PRIORITIES.items():
        line = row(page, f"`{name}`")
        assert spec.summary and spec.summary in line, name
        assert all(f"alias `{a}`" in line for a in spec.aliases), name
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[2] == spec.framework and cells[3] == str(spec.default_weight or ""), line
        assert cells[4] == (f"`{spec.argument_key}`" if spec.argument_key else ""), line
    for name in registry.SKIPPED_PRIORITIES:
        row(page, f"`{name}`")


# ------------------------------------------------------------------------------------- metrics


def test_every_metric_the_process_exports_is_on_the_metrics_page() -> None:
    exposition = generate_latest(REGISTRY).decode()
    ours = {
        name
        for name in re.findall(r"^# TYPE (\S+) ", exposition, re.M)
        if name.startswith(("scheduler_", "kubesched_", "leader_election_")) and not name.endswith("_created")
    }
    page = docs.metrics_reference()
    documented = set(re.findall(r"^\| `(\w+)` \|", page, re.M))
    assert ours <= documented and len(ours) > 20
    for name, (kind, labels, help_text) in docs.exported_metrics().items():
        line = row(page, f"`{name}`")
        assert f"| {kind} |" in line and " ".join(help_text.split()[:5]) in line, name
        assert all(f"`{label}`" in line for label in labels), name


# -------------------------------------------------------------------------------------- events


def test_every_event_reason_and_condition_is_on_the_events_page() -> None:
    page = docs.events_reference()
    for event in reasons.EVENTS:
        assert (
            row(page, f"`{event.reason}`")
            == f"| `{event.reason}` | {event.type} | {event.kind} | {event.meaning} |"
        )
    for c in reasons.CONDITIONS:
        assert f"| {c.kind} | `{c.condition}` | {c.status} | `{c.reason}` | {c.meaning} |" in page
    written = {
        v
        for k, v in vars(reasons).items()
        if isinstance(v, str) and k.isupper() and k not in ("NORMAL", "WARNING")
    }
    shown = {e.reason for e in reasons.EVENTS} | {
        x for c in reasons.CONDITIONS for x in (c.condition, c.reason)
    }
    assert written == shown, "every reason and condition the code writes has a line"


# ---------------------------------------------------------------------------------- benchmarks


def test_every_row_of_the_latest_results_is_on_the_benchmark_page() -> None:
    page = docs.benchmark_results()
    latest = json.loads((docs.RESULTS / "latest.json").read_text())
    titles = latest["meta"]["scenarios"]
    for entry in latest["summary"]:
        line = row(page, f"{titles[entry['scenario']]} | `{entry['scheduler']}`")
        assert f"| {entry['ok_runs']}/{entry['runs']} |" in line
        if entry["ok_runs"]:  # a binder whose every run failed its audit has no figures
            assert f"| {entry['metrics']['pods_per_s']['median']:.0f} |" in line
    assert f"]({docs.PLOT})" in page
    assert (docs.RESULTS / "latest.png").exists()


def test_the_history_has_a_line_per_release(tmp_path: Path) -> None:
    shutil.copy(docs.RESULTS / "latest.json", tmp_path / "latest.json")
    assert "No release yet" in docs.benchmark_results(tmp_path)
    release = json.loads((docs.RESULTS / "latest.json").read_text())
    (tmp_path / "release-0.2.0.json").write_text(json.dumps(release))
    history = docs.benchmark_results(tmp_path).split("## History")[1]
    (kubesched,) = [r for r in release["summary"] if r["scheduler"] == "kubesched"][:1]
    assert (
        f"- 0.2.0: {kubesched['scenario']} {kubesched['metrics']['pods_per_s']['median']:.0f} pods/s"
        in history
    )


# ------------------------------------------------------------------------------------ the hook


def test_a_marker_becomes_its_page_and_an_unknown_one_fails_the_build() -> None:
    expanded = docs.expand("# Metrics\n\n<!-- reference: metrics -->\n", "reference/metrics.md")
    assert expanded == f"# Metrics\n\n{docs.metrics_reference()}\n"
    with pytest.raises(PluginError, match="unknown reference marker 'metric'"):
        docs.expand("<!-- reference: metric -->", "reference/metrics.md")


@pytest.mark.parametrize("name", sorted(docs.GENERATORS))
def test_each_reference_page_holds_its_marker(name: str) -> None:
    page = "benchmarks.md" if name == "benchmarks" else f"reference/{name}.md"
    assert f"<!-- reference: {name} -->" in (REPO / "docs" / page).read_text()
