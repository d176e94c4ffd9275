"""The monitoring kit (manifests/monitoring): Prometheus's own tool checks the alert rules and every
dashboard query and runs the alerts' unit tests; the kit's files are of the kinds kustomize, the
Prometheus Operator and Grafana expect; the metrics it adds behave as it reads them.

promtool comes with Debian's `prometheus` package (`make promtool`); without it these checks skip,
except in CI, where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from prometheus_client import REGISTRY

from kubesched.kube.binding import Binder, BindOutcome
from kubesched.kube.events import Recorder
from kubesched.policy.compile import default_algorithm
from kubesched.policy.controller import PolicyController, PolicyStatusWriter
from kubesched.policy.shadow import Verdict
from kubesched.policy.store import PolicyStore
from kubesched.runtime.queue import ACTIVE, BACKOFF, UNSCHEDULABLE
from kubesched.runtime.scheduler import Scheduler, SchedulerSettings
from kubesched.telemetry import metrics

from ..monitoring_kit import (
    DASHBOARD,
    KIT,
    REPO,
    alert_rules,
    all_queries,
    as_promql,
    dashboard,
    dashboard_queries,
    exported_series,
    label_matchers,
    metric_names,
    prometheus_rule,
    unexported,
)

ALERT_TESTS = Path(__file__).parent / "monitoring-alerts-test.yaml"
RUNBOOKS = "docs/how-to/monitoring.md"  # the page every alert's runbook_url names
SERVICE = REPO / "manifests" / "service.yaml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool is not installed: `make promtool` (Debian's prometheus package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_promtool(*args: str, cwd: Path) -> str:
    result = subprocess.run([promtool(), *args], capture_output=True, text=True, cwd=cwd, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------- promtool


def test_the_alert_rules_pass_promtool_check_rules(tmp_path: Path) -> None:
    rules = write_rules(tmp_path / "kubesched-rules.yaml", prometheus_rule()["spec"]["groups"])
    output = run_promtool("check", "rules", rules.name, cwd=tmp_path)
    assert f"SUCCESS: {len(alert_rules())} rules found" in output


def test_the_alerts_fire_when_their_promtool_unit_tests_say(tmp_path: Path) -> None:
    write_rules(tmp_path / "kubesched-rules.yaml", prometheus_rule()["spec"]["groups"])
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    assert "SUCCESS" in run_promtool("test", "rules", ALERT_TESTS.name, cwd=tmp_path)
    # Every alert is seen firing in some case.
    cases = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    fired = {check["alertname"] for case in cases for check in case["alert_rule_test"] if check["exp_alerts"]}
    assert fired == {rule["alert"] for rule in alert_rules()}


def test_every_dashboard_query_is_promql_that_prometheus_parses(tmp_path: Path) -> None:
    queries = dashboard_queries()
    recorded = [
        {"record": f"dashboard:query_{i}", "expr": as_promql(q)} for i, q in enumerate(queries.values())
    ]
    rules = write_rules(tmp_path / "dashboard-queries.yaml", [{"name": "dashboard", "rules": recorded}])
    assert f"SUCCESS: {len(queries)} rules found" in run_promtool("check", "rules", rules.name, cwd=tmp_path)


def test_a_broken_query_fails_the_check(tmp_path: Path) -> None:
    broken = [{"record": "dashboard:broken", "expr": "sum by (le) (rate(kubesched_binds_total[5m])"}]
    rules = write_rules(tmp_path / "broken.yaml", [{"name": "broken", "rules": broken}])
    result = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, text=True)
    assert result.returncode != 0


# ------------------------------------------------------------------------------------ the files


def test_the_kit_is_a_kustomize_component_of_a_service_monitor_a_rule_and_a_dashboard() -> None:
    component = yaml.safe_load((KIT / "kustomization.yaml").read_text())
    assert (component["apiVersion"], component["kind"]) == ("kustomize.config.k8s.io/v1alpha1", "Component")
    kinds = {yaml.safe_load((KIT / name).read_text())["kind"] for name in component["resources"]}
    assert kinds == {"ServiceMonitor", "PrometheusRule"}
    for name in component["resources"]:
        assert yaml.safe_load((KIT / name).read_text())["apiVersion"] == "monitoring.coreos.com/v1"
    (generator,) = component["configMapGenerator"]
    (entry,) = generator["files"]
    key, file = entry.split("=")
    assert (KIT / file) == DASHBOARD and key.endswith(".json")
    assert generator["options"]["labels"]["grafana_dashboard"] == "1"
    assert generator["options"]["disableNameSuffixHash"] is True


def test_the_dashboard_asks_for_a_prometheus_data_source_and_uses_it_everywhere() -> None:
    board = dashboard()
    (source,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert (source["name"], source["query"]) == ("datasource", "prometheus")
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert panels and all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_the_latency_panels_are_quantiles_over_five_minute_bucket_rates() -> None:
    queries = dashboard_queries()
    for histogram in ("scheduler_pod_scheduling_duration_seconds", "kubesched_event_loop_lag_seconds"):
        rate = rf"rate\({histogram}_bucket\{{[^}}]*\}}\[5m\]\)"
        quantile = rf"histogram_quantile\(0\.\d+, sum by \([^)]*\) \({rate}\)\)"
        uses = [q for q in queries.values() if histogram in q]
        assert uses and all(re.search(quantile, q) for q in uses), uses


def test_the_service_monitor_scrapes_the_metrics_service_and_the_alerts_name_its_job() -> None:
    monitor = yaml.safe_load((KIT / "servicemonitor.yaml").read_text())
    service = yaml.safe_load(SERVICE.read_text())
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    # Without a jobLabel, the job is the Service's name.
    assert "jobLabel" not in monitor["spec"]
    matchers = [m for q in all_queries().values() for m in label_matchers(q)]
    jobs = {value for _, label, _, value in matchers if label == "job"}
    assert jobs == {service["metadata"]["name"], "$job"}
    (job,) = [v for v in dashboard()["templating"]["list"] if v["name"] == "job"]
    assert job["current"]["value"] == service["metadata"]["name"]


def heading_anchor(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs both make it for a plain heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_has_a_for_a_severity_a_summary_and_a_runbook_section_in_the_docs() -> None:
    page = (REPO / RUNBOOKS).read_text()
    anchors = {heading_anchor(h) for h in re.findall(r"^#+ (.+)$", page, re.M)}
    runbooks = page[page.index("\n## Runbooks\n") :]
    for rule in alert_rules():
        assert re.fullmatch(r"\d+m", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], rule["alert"]
        named, anchor = notes["runbook_url"].split("#")
        assert named == RUNBOOKS and anchor == heading_anchor(rule["alert"]) and anchor in anchors
        assert f"\n### {rule['alert']}\n" in runbooks


def test_the_label_values_queries_match_are_ones_the_code_sets() -> None:
    values = {
        ("kubesched_binds_total", "outcome"): {o.value for o in BindOutcome},
        ("kubesched_shadow_evaluations_total", "verdict"): {v.value for v in Verdict},
        ("scheduler_pending_pods", "queue"): {ACTIVE, BACKOFF, UNSCHEDULABLE},
    }
    checked = set()
    for query in all_queries().values():
        for metric, label, operator, value in label_matchers(query):
            if (metric, label) in values:
                named = set(value.split("|")) if operator in ("=~", "!~") else {value}
                assert named <= values[metric, label], (metric, label, value)
                checked.add((metric, label))
    assert checked == set(values)


# ------------------------------------------------------------------- reading names out of PromQL


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ('sum by (le) (rate(a_bucket{job="x", le!="b{c"}[5m] offset 1h)) * 1e3', {"a_bucket"}),
        ("b:rate5m unless on (pod) group_left (name) c == bool 0.5", {"b:rate5m", "c"}),
        ("count(d{x=~'$job'} > 0) or vector(0)", {"d"}),
        ("histogram_quantile(0.99, sum without (pod) (rate(e_bucket[$__rate_interval])))", {"e_bucket"}),
        ("label_values(f, job)", {"f"}),
        ("delta((max by (ns) (g and on (instance) (h == 1)))[10m:1m]) > 0", {"g", "h"}),
    ],
)
def test_metric_names_are_read_out_of_promql(query: str, names: set[str]) -> None:
    assert metric_names(query) == names


EXPOSITION = """\
# TYPE kubesched_binds_total counter
kubesched_binds_total{outcome="bound"} 3.0
# TYPE kubesched_event_loop_lag_seconds histogram
kubesched_event_loop_lag_seconds_bucket{le="0.05"} 1.0
kubesched_event_loop_lag_seconds_bucket{le="+Inf"} 1.0
kubesched_event_loop_lag_seconds_sum 0.001
kubesched_event_loop_lag_seconds_count 1.0
"""


def test_a_query_naming_a_metric_or_label_the_process_does_not_export_is_reported() -> None:
    series = exported_series(EXPOSITION)
    good = {
        "binds": 'rate(kubesched_binds_total{job="j", outcome="failed"}[5m])',
        "lag": "histogram_quantile(0.99, sum by (le) (rate(kubesched_event_loop_lag_seconds_bucket[5m])))",
    }
    assert unexported(good, series) == []
    bad = {
        "typo": "rate(kubesched_bind_total[5m])",
        "family": "kubesched_event_loop_lag_seconds",  # a histogram has no series of its bare name
        "label": 'kubesched_binds_total{result="failed"}',
    }
    assert unexported(bad, series) == [
        "typo: metric kubesched_bind_total is not exported",
        "family: metric kubesched_event_loop_lag_seconds is not exported",
        "label: kubesched_binds_total has no label result",
    ]


# ------------------------------------------------------------------------------ the new metrics


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def reloads(result: str) -> float:
    return sample("kubesched_policy_reloads_total", result=result) or 0.0


def policy(name: str, spec: dict[str, Any], generation: int) -> dict[str, Any]:
    created = "2024-01-01T00:00:00Z"
    meta = {"name": name, "uid": f"uid-{name}", "generation": generation, "creationTimestamp": created}
    return {"metadata": meta, "spec": spec}


async def test_policy_reloads_count_each_new_generation_and_acceptance_is_read_at_scrape_time() -> None:
    settings = SchedulerSettings("own")
    scheduler = Scheduler(settings, default_algorithm(), cast(Binder, None), cast(Recorder, None))
    follower = PolicyStatusWriter(cast(ApiClient, None), lambda: False)  # writes nothing
    controller = PolicyController(PolicyStore("own"), scheduler, follower)
    metrics.POLICY_ACCEPTED.track(controller.store.acceptance)
    accepted, invalid = reloads("accepted"), reloads("invalid")
    most = {"priorities": [{"name": "MostRequestedPriority", "weight": 1}]}
    typo = {"priorities": [{"name": "MostRequestedPriorty", "weight": 1}]}

    await controller.on_event("ADDED", policy("monitored", most, 1))
    await controller.on_event("MODIFIED", policy("monitored", most, 1))  # a status update: nothing new
    assert (reloads("accepted") - accepted, reloads("invalid") - invalid) == (1, 0)
    assert sample("kubesched_policy_accepted", policy="monitored") == 1.0

    await controller.on_event("MODIFIED", policy("monitored", typo, 2))
    assert (reloads("accepted") - accepted, reloads("invalid") - invalid) == (1, 1)
    assert sample("kubesched_policy_accepted", policy="monitored") == 0.0

    await controller.on_event("DELETED", policy("monitored", typo, 2))
    assert sample("kubesched_policy_accepted", policy="monitored") is None


def test_both_reload_results_are_exported_before_the_first_reload() -> None:
    # rate() and increase() see a counter's first step only if its series existed before it.
    assert sample("kubesched_policy_reloads_total", result="accepted") is not None
    assert sample("kubesched_policy_reloads_total", result="invalid") is not None
