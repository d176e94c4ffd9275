"""The monitoring kit in manifests/monitoring as its tests read it: the PromQL of every dashboard panel,
dashboard variable and alert, and the metric names and label matchers that PromQL uses.

Prometheus's own parser checks the queries (promtool, test_monitoring_kit.py); what it cannot tell,
which metrics a query names, is read here with a few regular expressions over the text: strings,
label matchers, ranges and grouping clauses are cut out, and the identifiers left that are not
function calls or keywords are metric names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).parents[1]
KIT = REPO / "manifests" / "monitoring"
DASHBOARD = KIT / "dashboard.json"
RULE = KIT / "prometheusrule.yaml"

# What Grafana puts into a query before Prometheus sees it (enough for the parser to accept it).
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$job": "kubesched-metrics"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_VALUES = re.compile(r"\blabel_values\(\s*([^,()]*?)\s*(?:,\s*\w+\s*)?\)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# Not after a word character, a dot or `$` (durations, numbers, variables); not a function call.
_IDENTIFIER = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "offset", "bool", "group_left", "group_right", "inf", "nan", "start", "end"}
)
_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)\s*\{([^{}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def prometheus_rule() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULE.read_text())
    return loaded


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in prometheus_rule()["spec"]["groups"] for rule in group["rules"]]


def dashboard_queries() -> dict[str, str]:
    """Where -> PromQL, for every panel target and every query variable of the dashboard."""
    found: dict[str, str] = {}
    panels = list(dashboard()["panels"])
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels", []))  # a collapsed row holds its panels
        for target in panel.get("targets", []):
            found[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found[f"variable {variable['name']}"] = query["query"] if isinstance(query, dict) else query
    return found


def alert_queries() -> dict[str, str]:
    return {f"alert {rule['alert']}": rule["expr"] for rule in alert_rules()}


def all_queries() -> dict[str, str]:
    return {**dashboard_queries(), **alert_queries()}


def as_promql(query: str) -> str:
    """A dashboard query as Prometheus receives it: Grafana's variables and `label_values` resolved."""
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace("${" + variable[1:] + "}", value).replace(variable, value)
    return _LABEL_VALUES.sub(r"\1", query)


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query (or a Grafana `label_values(metric, label)`) selects."""
    text = _STRING.sub('""', query)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_VALUES.sub(r" \1 ", text)
    text = _GROUPING.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in _KEYWORDS}


def label_matchers(query: str) -> list[tuple[str, str, str, str]]:
    """(metric, label, operator, value) for every label matcher of every selector in a query."""
    return [
        (metric, *matcher) for metric, body in _SELECTOR.findall(query) for matcher in _MATCHER.findall(body)
    ]


# Labels that the scrape adds to every series (Prometheus Operator's endpoints discovery), not kubesched.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "endpoint", "container"})


def exported_series(exposition: str) -> dict[str, set[str]]:
    """Series name -> its label names, for every sample of a /metrics page (histograms as their
    `_bucket`, `_sum` and `_count` series, counters as `_total`: the names Prometheus stores)."""
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


def unexported(queries: dict[str, str], series: dict[str, set[str]]) -> list[str]:
    """What the queries name that the series lack: metric names, and labels matched on."""
    problems = []
    for where, query in queries.items():
        for name in sorted(metric_names(query)):
            if name not in series:
                problems.append(f"{where}: metric {name} is not exported")
        for metric, label, _, _ in label_matchers(query):
            if metric in series and label not in TARGET_LABELS and label not in series[metric]:
                problems.append(f"{where}: {metric} has no label {label}")
    return problems
