"""The docs' reference pages, generated from the code at build time so that they cannot drift.

mkdocs.yml loads this module as a hook. A page holds a short hand-written intro and a marker,
`<!-- reference: NAME -->`, which `on_page_markdown` replaces with GENERATORS[NAME]()'s Markdown;
an unknown name fails the build. `on_files` adds the benchmark plot, which lives outside docs/.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from kubesched.cli import main as kubesched_main
from kubesched.kube import reasons
from kubesched.kubectl_plugin import plugin as kubectl_plugin
from kubesched.plugins import registry
from kubesched.telemetry import metrics

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"
RESULTS = REPO / "bench" / "results"
PLOT = "assets/bench-latest.png"  # where the site serves bench/results/latest.png
MARKER = re.compile(r"^<!-- reference: ([\w-]+) -->$", re.M)


def _cell(text: str) -> str:
    """Text fit for a table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CLI


def _commands(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    """The command and, for a group, every subcommand under it, depth first."""
    if command.hidden:
        return
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from _commands(command.commands[name], f"{path} {name}")


def _option_type(option: click.Option) -> str:
    if option.is_flag:
        return "flag"
    if isinstance(option.type, click.Choice):
        return " | ".join(f"`{c}`" for c in option.type.choices)
    return option.type.name


def _help(command: click.Command) -> str:
    """The command's help as click prints it: up to a form feed."""
    return inspect.cleandoc(command.help or "").split("\f")[0]


def _command_section(path: str, command: click.Command) -> str:
    ctx = click.Context(command, info_name=path)
    usage = " ".join(command.collect_usage_pieces(ctx))
    parts = [f"## `{path}`", _help(command), f"Usage: `{path} {usage}`"]
    arguments = [p for p in command.get_params(ctx) if isinstance(p, click.Argument)]
    if arguments:
        parts.append("Arguments: " + ", ".join(f"`{p.make_metavar(ctx)}`" for p in arguments))
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden or "--help" in param.opts:
            continue
        extra = param.get_help_extra(ctx)  # what --help shows in brackets
        flags = ", ".join(f"`{flag}`" for flag in [*param.opts, *param.secondary_opts])
        kind = _option_type(param) + (f" ({extra['range']})" if "range" in extra else "")
        default = f"`{extra['default']}`" if "default" in extra else ""
        description = param.help or ""
        if "envvars" in extra:
            description += " Environment: " + ", ".join(f"`{e}`" for e in extra["envvars"]) + "."
        if "required" in extra:
            description += " Required."
        rows.append([flags, kind, default, description])
    if rows:
        parts.append(_table(["Option", "Type", "Default", "Description"], rows))
    return "\n\n".join(parts)


def cli_reference() -> str:
    """Every command of `kubesched` and of the kubectl plugin, with every option."""
    sections = [_command_section(path, cmd) for path, cmd in _commands(kubesched_main, "kubesched")]
    sections += [_command_section(path, cmd) for path, cmd in _commands(kubectl_plugin, "kubectl kubesched")]
    return "\n\n".join(sections)


# ---------------------------------------------------------------------------------------- CRDs


def _crd_schema(filename: str) -> tuple[str, str, dict[str, Any]]:
    """The CRD's kind, group/version and the schema of its storage version."""
    crd = yaml.safe_load((CRDS / filename).read_text())
    (version,) = (v for v in crd["spec"]["versions"] if v["storage"])
    group_version = f"{crd['spec']['group']}/{version['name']}"
    return crd["spec"]["names"]["kind"], group_version, version["schema"]["openAPIV3Schema"]


def _schema_type(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity (integer or string)"
    kind = str(node.get("type", "any"))
    if kind == "array" and "items" in node:
        return f"array of {_schema_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_schema_type(node['additionalProperties'])}"
    return kind


LIMITS = (
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("pattern", "pattern"),
)


def _constraints(node: dict[str, Any], required: bool) -> str:
    found = ["required"] if required else []
    if "enum" in node:
        found.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    found += [f"{label} `{node[key]}`" for key, label in LIMITS if key in node]
    if "default" in node:
        found.append(f"default `{node['default']}`")
    if node.get("x-kubernetes-list-map-keys"):
        found.append("keyed by " + ", ".join(f"`{k}`" for k in node["x-kubernetes-list-map-keys"]))
    return "; ".join(found)


def schema_fields(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(dotted path, schema, required) of every field under `node`, depth first."""
    required = set(node.get("required", ()))
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}" if path else name
        yield child_path, child, name in required
        yield from schema_fields(child, child_path)
    if "items" in node:
        yield from schema_fields(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from schema_fields(node["additionalProperties"], f"{path}.*")


def _crd_section(filename: str) -> str:
    kind, group_version, schema = _crd_schema(filename)
    parts = [f"## {kind}", f"`apiVersion: {group_version}`, defined in `crds/{filename}`."]
    if "description" in schema:
        parts.append(" ".join(schema["description"].split()))
    for top in ("spec", "status"):
        if top not in schema.get("properties", {}):
            continue
        node = schema["properties"][top]
        rows = [
            [f"`{path}`", _schema_type(child), _constraints(child, required), child.get("description", "")]
            for path, child, required in schema_fields(node, top)
        ]
        parts += [f"### {kind} `{top}`", _table(["Field", "Type", "Constraints", "Description"], rows)]
    return "\n\n".join(parts)


CRD_FILES = (
    "kubesched.io_schedulerpolicies.yaml",
    "scheduling.x-k8s.io_podgroups.yaml",
    "scheduling.x-k8s.io_elasticquotas.yaml",
)


def policy_reference() -> str:
    """Every field of the SchedulerPolicy, PodGroup and ElasticQuota custom resources, from crds/."""
    return "\n\n".join(_crd_section(f) for f in CRD_FILES)


# ------------------------------------------------------------------------------------- plugins


def _names(name: str, aliases: tuple[str, ...]) -> str:
    return f"`{name}`" + "".join(f" (alias `{a}`)" for a in aliases)


def plugins_reference() -> str:
    """Every predicate and priority of the registry, with its argument and kube-scheduler plugin."""
    # A predicate that enables other predicates' filters (GeneralPredicates) names their plugins.
    framework_of = {s.classes: s.framework for s in registry.PREDICATES.values() if s.framework}
    predicates = []
    for spec in registry.PREDICATES.values():
        plugin = spec.framework or ", ".join(f for cls in spec.classes if (f := framework_of.get((cls,), "")))
        if spec.refused_by_1_20:
            plugin = "none: refused by 1.20, kept with the semantics of the release that last had it"
        use = "mandatory" if spec.mandatory else "default" if spec.default else ""
        argument = f"`{spec.argument_key}`" if spec.argument_key else ""
        predicates.append([_names(spec.name, spec.aliases), spec.summary, plugin, use, argument])
    priorities = []
    for prio in registry.PRIORITIES.values():
        weight = str(prio.default_weight) if prio.default_weight else ""
        argument = f"`{prio.argument_key}`" if prio.argument_key else ""
        priorities.append([_names(prio.name, prio.aliases), prio.summary, prio.framework, weight, argument])
    for name in sorted(registry.SKIPPED_PRIORITIES):
        summary = "Accepted and ignored, as kube-scheduler 1.20 does: a constant score changes no decision."
        priorities.append([f"`{name}`", summary, "", "", ""])
    return "\n\n".join(
        [
            "## Predicates",
            "In the order they run (kube-scheduler's `predicatesOrdering`), whatever the policy's order.",
            _table(["Name", "Checks", "kube-scheduler plugin", "In the default set", "Argument"], predicates),
            "## Priorities",
            "Each scores a node 0 to 100; the scores, times their weights, are summed.",
            _table(["Name", "Favours", "kube-scheduler plugin", "Default weight", "Argument"], priorities),
        ]
    )


# ------------------------------------------------------------------------------------- metrics


def exported_metrics() -> dict[str, tuple[str, list[str], str]]:
    """Metric name -> (type, label names, help), for every metric kubesched.telemetry.metrics defines."""
    exported = {}
    for collector in vars(metrics).values():
        if isinstance(collector, MetricWrapperBase):
            suffix = "_total" if collector._type == "counter" else ""
            name = collector._name + suffix
            exported[name] = (str(collector._type), list(collector._labelnames), collector._documentation)
        elif Collector in type(collector).__mro__:  # collected at scrape time: its family says
            for family in collector.collect():
                suffix = "_total" if family.type == "counter" else ""
                labels = list(getattr(family, "_labelnames", ()))
                exported[family.name + suffix] = (family.type, labels, family.documentation)
    return exported


def metrics_reference() -> str:
    rows = [
        [f"`{name}`", kind, ", ".join(f"`{label}`" for label in labels), help_text]
        for name, (kind, labels, help_text) in exported_metrics().items()
    ]
    return _table(["Metric", "Type", "Labels", "Meaning"], rows)


# -------------------------------------------------------------------------------------- events


def events_reference() -> str:
    events = [[f"`{e.reason}`", e.type, e.kind, e.meaning] for e in reasons.EVENTS]
    conditions = [
        [c.kind, f"`{c.condition}`", c.status, f"`{c.reason}`", c.meaning] for c in reasons.CONDITIONS
    ]
    return "\n\n".join(
        [
            "## Events",
            _table(["Reason", "Type", "On", "Meaning"], events),
            "## Conditions",
            _table(["On", "Condition", "Status", "Reason", "Meaning"], conditions),
        ]
    )


# ---------------------------------------------------------------------------------- benchmarks

BENCH_COLUMNS = (
    ("pods_per_s", "pods/s", "{:.0f}"),
    ("latency_p50_ms", "p50 ms", "{:.0f}"),
    ("latency_p99_ms", "p99 ms", "{:.0f}"),
    ("cpu_s_per_1000_pods", "CPU s / 1,000 pods", "{:.2f}"),
    ("peak_rss_mib", "peak RSS MiB", "{:.0f}"),
)


def _figure(metric: dict[str, Any] | None, form: str) -> str:
    return form.format(metric["median"]) if metric else ""


def _commit_date(path: Path) -> str:
    """The date of the last commit that changed `path`, or '' outside a git checkout."""
    result = subprocess.run(
        ["git", "log", "-1", "--format=%cs", "--", str(path)], capture_output=True, text=True, cwd=REPO
    )
    return result.stdout.strip()


def benchmark_results(results_dir: Path = RESULTS) -> str:
    """The latest full run's medians (latest.json), its plot, and one line per release's run
    (release-VERSION.json, copied from latest.json when a release is made)."""
    results = results_dir / "latest.json"
    data = json.loads(results.read_text())
    meta = data["meta"]
    titles = meta.get("scenarios") or {}
    rows = []
    for row in data["summary"]:
        metric = row["metrics"]
        ok = f"{row['ok_runs']}/{row['runs']}"
        figures = [_figure(metric.get(key), form) for key, _, form in BENCH_COLUMNS]
        rows.append([titles.get(row["scenario"], row["scenario"]), f"`{row['scheduler']}`", ok, *figures])
    ratios = [
        [
            titles.get(r["scenario"], r["scenario"]),
            *(
                f"{value:.2f}x" if (value := r.get("kubesched_vs_kube_scheduler", {}).get(key)) else ""
                for key, _, _ in BENCH_COLUMNS
            ),
        ]
        for r in data["ratios"]
    ]
    machine = meta.get("machine", {})
    commit = meta.get("versions", {}).get("kubesched_commit", "")[:10]
    releases = sorted(results_dir.glob("release-*.json"))
    history = [
        f"- {p.stem.removeprefix('release-')}: "
        + ", ".join(
            f"{r['scenario']} {r['metrics']['pods_per_s']['median']:.0f} pods/s"
            for r in json.loads(p.read_text())["summary"]
            if r["scheduler"] == "kubesched"
        )
        for p in releases
    ] or ["No release yet: the latest committed run above is the only one kept."]
    return "\n\n".join(
        [
            "## Latest results",
            f"Run of {meta['started_at'][:10]} (committed {_commit_date(results) or 'not yet'}), "
            f"kubesched at commit `{commit}`, on {machine.get('cpus', '?')} cores "
            f"({machine.get('platform', 'unknown platform')}); medians over the repeats.",
            _table(["Scenario", "Binder", "ok runs", *(title for _, title, _ in BENCH_COLUMNS)], rows),
            "kubesched / kube-scheduler (above 1 is better for pods/s, below 1 for the others):",
            _table(["Scenario", *(title for _, title, _ in BENCH_COLUMNS)], ratios),
            f"![The latest full run: one panel a figure, one group of bars a scenario]({PLOT})",
            "## History",
            "\n".join(history),
        ]
    )


# ------------------------------------------------------------------------------------ the hook

GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "policy": policy_reference,
    "plugins": plugins_reference,
    "metrics": metrics_reference,
    "events": events_reference,
    "benchmarks": benchmark_results,
}


def expand(markdown: str, where: str) -> str:
    """`markdown` with each marker replaced by its generated text."""

    def generated(match: re.Match[str]) -> str:
        name = match[1]
        if name not in GENERATORS:
            raise PluginError(f"{where}: unknown reference marker {name!r}; known: {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PLOT, abs_src_path=str(RESULTS / "latest.png")))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return expand(markdown, page.file.src_uri)
