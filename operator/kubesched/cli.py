"""The `kubesched` command, after kube-scheduler's: `run`, `version`; and `explain`, `simulate`,
`snapshot save`, `policy convert`."""

from __future__ import annotations

import asyncio
import io
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import click
from click.decorators import FC

from kubesched.app.eventloop import EVENT_LOOPS
from kubesched.telemetry import logs


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only from click 8.2
    """A duration as kube-scheduler's flags take it ("15s", "1m30s", "500ms"); a bare number is seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        from kubesched.model.duration import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class _Kubesched(click.Group):
    """The top command, failing as kubectl does: `error: ...` on standard error, not click's `Error: ...`."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        # What click's standalone mode does, but for the report of a ClickException.
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            report = io.StringIO()
            exc.show(report)  # click's report (the usage first, for a usage error): only its prefix changes
            click.echo(
                re.sub(r"^Error: ", "error: ", report.getvalue(), count=1, flags=re.M), err=True, nl=False
            )
            code = exc.exit_code
        except click.Abort:
            click.echo("Aborted!", err=True)
            code = 1
        sys.exit(code if isinstance(code, int) else 0)


@click.group(
    cls=_Kubesched, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
def main() -> None:
    """kubesched: kube-scheduler's algorithm as a Kopf operator, with live policies."""


@main.command()
def version() -> None:
    """Print the version and the source revision (git commit) it was built from."""
    from kubesched.version import version_line

    click.echo(version_line())


def _duration_option(flag: str, default: str, description: str) -> Callable[[FC], FC]:
    """A flag that takes a duration, its default shown as written ("15s")."""
    return click.option(flag, type=Duration(), default=default, show_default=True, help=description)


def _policy_config_file_option(description: str) -> Callable[[FC], FC]:
    """--policy-config-file, a legacy Policy file; each command says what it uses it for."""
    return click.option(
        "--policy-config-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help=description
    )


# Options the tools take alike.
_kubeconfig_option: Final = click.option(
    "--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig; default $KUBECONFIG or in-cluster."
)
_table_or_json_option: Final = click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)


@main.command()
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Kubeconfig file; default $KUBECONFIG or in-cluster.",
)
@click.option(
    "--scheduler-name",
    default="kubesched",
    show_default=True,
    help="Pods with this spec.schedulerName are ours.",
)
@_policy_config_file_option(
    "Legacy Policy file (JSON or YAML). Without it, kube-scheduler 1.20's default algorithm."
)
@click.option(
    "--kube-api-qps", default=50.0, show_default=True, help="Client-side requests per second (0: unlimited)."
)
@click.option("--kube-api-burst", default=100, show_default=True, help="Client-side burst above the QPS.")
@click.option("--bind-concurrency", default=64, show_default=True, help="Binding requests in flight at once.")
@click.option("--batch-size", default=32, show_default=True, help="Pods scheduled per executor call.")
@click.option(
    "--percentage-of-nodes-to-score",
    type=click.IntRange(0, 100),
    default=None,
    help="Stop looking for feasible nodes once this share of the cluster fits (100: score every node; "
    "0: kube-scheduler's adaptive default). For the --policy-config-file or default profile; a "
    "SchedulerPolicy sets its own.",
)
@click.option("--metrics-port", default=10251, show_default=True, help="Port for /metrics (0: off).")
@click.option("--seed", type=int, default=None, help="Seed for tie-breaking among equally good nodes.")
@click.option(
    "--leader-elect",
    type=click.BOOL,
    is_flag=False,
    flag_value=True,
    default=True,
    show_default=True,
    help="Run several replicas: only the holder of a Lease schedules (--leader-elect=false: always).",
)
@_duration_option(
    "--leader-elect-lease-duration",
    "15s",
    "How long followers wait, after the last renewal they saw, before taking over.",
)
@_duration_option(
    "--leader-elect-renew-deadline", "10s", "The leader stops binding when it could not renew for this long."
)
@_duration_option(
    "--leader-elect-retry-period", "2s", "How often the leader renews and followers try to take over."
)
@click.option(
    "--leader-elect-resource-namespace",
    default=None,
    help="Namespace of the Lease; default $POD_NAMESPACE, else kube-system.",
)
@click.option(
    "--leader-elect-resource-name", default=None, help="Name of the Lease; default the --scheduler-name."
)
@_duration_option(
    "--shadow-status-interval",
    "10s",
    "How often the leader writes Shadow SchedulerPolicies' figures into their status.",
)
@_duration_option(
    "--pod-initial-backoff",
    "1s",
    "Backoff of a pod after its first failed attempt; it doubles with each attempt.",
)
@_duration_option("--pod-max-backoff", "10s", "The longest backoff of a pod.")
@_duration_option(
    "--cache-reconcile-interval",
    "60s",
    "How often the cache is compared with a fresh listing of every kind it holds (0: never).",
)
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console", show_default=True)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
@click.option(
    "--event-loop",
    type=click.Choice(EVENT_LOOPS),
    default="uvloop",
    show_default=True,
    help="The event loop: uvloop, or the standard library's asyncio loop.",
)
def run(**flags: Any) -> None:
    """Run the scheduler."""
    from kubesched.app.tuning import fix_mmap_threshold, hold_gc, share_gil

    hold_gc()  # from the first import until every listed pod is fed (app/run.py)
    share_gil()
    fix_mmap_threshold()
    from kubesched.app.settings import RunSettings

    settings = RunSettings.from_flags(flags)
    connection, scheduling = settings.connection, settings.scheduling
    logs.configure(settings.observability.log_level, settings.observability.log_format)
    for name, val in (
        ("--kube-api-burst", connection.burst),
        ("--bind-concurrency", scheduling.bind_concurrency),
        ("--batch-size", scheduling.batch_size),
    ):
        if val < 1:
            raise click.BadParameter(f"must be at least 1, got {val}", param_hint=name)
    if connection.qps < 0:
        raise click.BadParameter(f"must not be negative, got {connection.qps}", param_hint="--kube-api-qps")
    if not 0 < scheduling.pod_initial_backoff <= scheduling.pod_max_backoff:
        raise click.BadParameter(
            "must be positive and at most --pod-max-backoff", param_hint="--pod-initial-backoff"
        )
    election = settings.election.config(scheduling.scheduler_name)
    problems = election.problems() if election else []
    if problems:
        raise click.UsageError("; ".join(problems))
    from kubesched.app.eventloop import event_loop
    from kubesched.app.run import StartupError, run_scheduler
    from kubesched.policy.compile import PolicyError

    try:
        with event_loop(settings.process.event_loop):
            asyncio.run(run_scheduler(settings))
    except PolicyError as exc:
        # Most messages of a policy file name it already.
        text, where = str(exc), str(scheduling.policy_config_file)
        message = text if text.startswith(where) else f"{where}: {text}"
        raise CommandError(message, settings.observability.log_level) from exc
    except StartupError as exc:
        raise CommandError(str(exc), settings.observability.log_level) from exc
    except KeyboardInterrupt:
        pass


class CommandError(click.ClickException):
    """A failure told in one line; with --log-level debug, the traceback that led to it too."""

    def __init__(self, message: str, log_level: str = "info") -> None:
        super().__init__(message)
        self.debug = log_level.lower() == "debug"

    def show(self, file: Any = None) -> None:
        if self.debug and self.__cause__ is not None:
            import traceback

            traceback.print_exception(self.__cause__, file=sys.stderr)
        super().show(file)


@main.group()
def policy() -> None:
    """SchedulerPolicy tools."""


@policy.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="metadata.name; default the --scheduler-name, else kubesched.")
@click.option(
    "--scheduler-name", default=None, help="spec.schedulerName; default none (the operator's own name)."
)
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@click.option(
    "--validate/--no-validate",
    default=True,
    show_default=True,
    help="Refuse a policy the operator would reject.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Fail when a KubeSchedulerConfiguration holds settings with no SchedulerPolicy equivalent.",
)
def convert(
    file: Path, name: str | None, scheduler_name: str | None, output: str, validate: bool, strict: bool
) -> None:
    """Print a legacy Policy file (JSON or YAML, kind: Policy) as a SchedulerPolicy manifest, or a
    KubeSchedulerConfiguration (v1, v1beta3) as one SchedulerPolicy per profile."""
    import json

    import yaml

    from kubesched.kube.extender_transport import HTTPTransport
    from kubesched.policy.compile import PolicyError, compile_policy
    from kubesched.policy.files import load_policy_file
    from kubesched.policy.kubescheduler_config import parse_configuration_text
    from kubesched.policy.store import is_object_name, policy_manifest

    try:
        configuration = parse_configuration_text(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        configuration = None  # the legacy path reports why the file cannot be read
    if configuration is not None:
        _convert_configuration(file, configuration, name, scheduler_name, output, validate, strict)
        return
    _warn_if_default_scheduler(scheduler_name)
    name = name or scheduler_name or "kubesched"
    if not is_object_name(name):
        raise click.BadParameter(f"{name!r} is not an RFC 1123 subdomain", param_hint="--name")
    try:
        document = load_policy_file(file)
    except PolicyError as exc:
        raise click.ClickException(str(exc)) from exc
    if validate:
        try:
            # With the real transport, so that extenders' TLS files are checked too; nothing is sent.
            compile_policy(document, transport=HTTPTransport)
        except PolicyError as exc:
            raise click.ClickException(f"{file}: {exc} (--no-validate converts it anyway)") from exc
    manifest = policy_manifest(document, name, scheduler_name)
    if output == "json":
        click.echo(json.dumps(manifest, indent=2))
    else:
        click.echo(f"# SchedulerPolicy converted from {file.name}", nl=True)
        click.echo(yaml.safe_dump(manifest, sort_keys=False), nl=False)


def _warn_if_default_scheduler(scheduler_name: str | None) -> None:
    """An explicit --scheduler-name default-scheduler is allowed: say what it means."""
    from kubesched.policy.kubescheduler_config import DEFAULT_SCHEDULER_NAME

    if scheduler_name == DEFAULT_SCHEDULER_NAME:
        click.echo(
            f"warning: --scheduler-name {DEFAULT_SCHEDULER_NAME}: applied, the policy makes kubesched "
            "schedule every pod that names no scheduler, alongside kube-scheduler if it still runs",
            err=True,
        )


def _convert_configuration(
    file: Path,
    document: dict[str, Any],
    name: str | None,
    scheduler_name: str | None,
    output: str,
    validate: bool,
    strict: bool,
) -> None:
    """`policy convert` of a KubeSchedulerConfiguration: what is not converted goes to stderr."""
    import json

    import yaml

    from kubesched.kube.extender_transport import HTTPTransport
    from kubesched.policy.compile import PolicyError
    from kubesched.policy.kubescheduler_config import (
        DEFAULT_SCHEDULER_NAME,
        configuration_manifests,
        convert_configuration,
    )
    from kubesched.policy.store import compile_spec, is_object_name

    try:
        profiles, unconverted = convert_configuration(document)
        manifests = configuration_manifests(profiles, name, scheduler_name)
    except PolicyError as exc:
        raise click.ClickException(f"{file}: {exc}") from exc
    # kube-scheduler's own name, and that of a profile naming none: taking its pods must be asked for.
    for i, profile in enumerate(profiles):
        if scheduler_name is None and profile.scheduler_name == DEFAULT_SCHEDULER_NAME:
            fix = (
                f"give --scheduler-name (--scheduler-name {DEFAULT_SCHEDULER_NAME} if that is meant)"
                if len(profiles) == 1
                else "rename its schedulerName"
            )
            raise click.ClickException(
                f"{file}: profiles[{i}] would be a policy for {DEFAULT_SCHEDULER_NAME}: applied, it would "
                f"make kubesched compete with kube-scheduler for every pod that names no scheduler: {fix}"
            )
    _warn_if_default_scheduler(scheduler_name)
    for manifest in manifests:
        policy_name = manifest["metadata"]["name"]
        if not is_object_name(policy_name):
            raise click.ClickException(
                f"{file}: {policy_name!r} is not an RFC 1123 subdomain: give the policy a name with --name"
            )
        if validate:
            try:
                compile_spec(manifest["spec"], policy_name, HTTPTransport)
            except PolicyError as exc:
                message = f"{file}: profile {policy_name}: {exc} (--no-validate converts it anyway)"
                raise click.ClickException(message) from exc
    for entry in unconverted:
        click.echo(f"warning: {entry}", err=True)
    if strict and unconverted:
        raise click.ClickException(
            f"{file}: {len(unconverted)} setting(s) not converted, see the warnings (--strict)"
        )
    if output == "json":
        single = len(manifests) == 1
        body = manifests[0] if single else {"apiVersion": "v1", "kind": "List", "items": manifests}
        click.echo(json.dumps(body, indent=2))
        return
    click.echo(f"# SchedulerPolicies converted from {file.name} ({document['apiVersion']})")
    for entry in unconverted:
        click.echo(f"# warning: {entry}")
    click.echo(yaml.safe_dump_all(manifests, sort_keys=False), nl=False)


@main.command()
@click.argument("pod", metavar="NAMESPACE/POD")
@_kubeconfig_option
@click.option(
    "--scheduler-name",
    default=None,
    help="Profile whose policy runs (its active SchedulerPolicy, if any); default the pod's schedulerName.",
)
@_policy_config_file_option(
    "Legacy Policy file used when no SchedulerPolicy drives the profile; default the one the "
    "scheduler's leader publishes on its Lease, else the built-in default (with a warning)."
)
@click.option(
    "--snapshot",
    "snapshot_file",
    metavar="FILE",
    default=None,
    help="Read the cluster state from a file `kubesched snapshot save` wrote, instead of the API server.",
)
@_table_or_json_option
def explain(
    pod: str,
    kubeconfig: str | None,
    scheduler_name: str | None,
    policy_config_file: Path | None,
    snapshot_file: str | None,
    output: str,
) -> None:
    """Show, for every node, which predicates reject POD and why, and how the others score.

    Runs the policy against the live cluster state (or a saved one) without binding anything.
    """
    from kubesched.policy.compile import PolicyError
    from kubesched.tools.explain import PodNotFound, explain_live, explain_snapshot, render_json, render_table

    namespace, _, name = pod.partition("/")
    if not name or not namespace:
        raise click.BadParameter(f"expected NAMESPACE/POD, got {pod!r}", param_hint="NAMESPACE/POD")
    try:
        if snapshot_file is not None:
            state = load_snapshot(snapshot_file)
            result = explain_snapshot(state, namespace, name, scheduler_name, policy_config_file)
        else:
            live = explain_live(kubeconfig, namespace, name, scheduler_name, policy_config_file)
            with api_errors():
                result = asyncio.run(live)
    except PodNotFound as exc:
        raise click.ClickException(str(exc)) from exc
    except PolicyError as exc:
        raise click.ClickException(f"policy: {exc}") from exc
    click.echo(render_json(result) if output == "json" else render_table(result))


def load_snapshot(path: str) -> Any:
    from kubesched.tools.snapshot import SnapshotError, load

    try:
        return load(path)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from exc


@contextmanager
def api_errors() -> Iterator[None]:
    """A kubeconfig that does not load, an API server that cannot be reached or says no: one line each."""
    from aiohttp import ClientError

    try:
        yield
    except (ClientError, OSError, RuntimeError) as exc:  # RuntimeError: kube.client.ConfigurationError too
        raise click.ClickException(str(exc) or type(exc).__name__) from exc


def _read_live(kubeconfig: str | None) -> Any:
    """The cluster state (a `ClusterState`) from the API server `kubeconfig` names."""
    from kubesched.tools.explain import read_live_state

    with api_errors():
        return asyncio.run(read_live_state(kubeconfig))[0]


def run_simulation(
    policy_file: str,
    selector: str,
    nodes_from: str,
    scheduler_name: str | None,
    policy_config_file: Path | None,
    read_live: Callable[[], Any],
    *,
    namespace: str | None,
    replay: bool,
    seed: int,
) -> Any:
    """`simulate` for both of its commands: read the candidate, the cluster state (`read_live()` when
    `nodes_from` is live) and the current policy, place the pods, and return the `Simulation`; what
    is wrong with the input is a click error."""
    from kubesched.policy.compile import PolicyError
    from kubesched.tools.explain import algorithm_for
    from kubesched.tools.simulate import SimulateError, parse_label_selector, read_candidate, simulate
    from kubesched.tools.snapshot import STDIO

    try:
        pods = parse_label_selector(selector)
    except SimulateError as exc:
        raise click.BadParameter(str(exc), param_hint="--pods") from exc
    try:
        name, candidate = read_candidate(policy_file, scheduler_name or "kubesched")
    except PolicyError as exc:
        raise click.ClickException(f"--policy {exc}") from exc
    name = scheduler_name or name
    try:
        state = read_live() if nodes_from == "live" else load_snapshot(nodes_from)
        try:
            current, source, _ = algorithm_for(name, state.policies, policy_config_file, leases=state.leases)
        except PolicyError as exc:
            raise click.ClickException(f"current policy: {exc}") from exc
        try:
            return simulate(
                state,
                candidate,
                current,
                scheduler_name=name,
                selector=pods,
                namespace=namespace,
                replay=replay,
                seed=seed,
                candidate_policy="standard input" if policy_file in STDIO else policy_file,
                current_policy=source,
            )
        finally:
            for extender in current.extenders:
                extender.close()
    finally:
        for extender in candidate.extenders:
            extender.close()


@main.command()
@click.option(
    "--policy",
    "policy_file",
    required=True,
    metavar="FILE",
    help="The candidate: a SchedulerPolicy manifest or a legacy Policy file (JSON or YAML); - reads stdin.",
)
@click.option(
    "--pods",
    "selector",
    default="",
    metavar="SELECTOR",
    help="Label selector (kubectl syntax) of the pods to place; default every one of the scheduler name.",
)
@click.option("-n", "--namespace", default=None, help="Only pods of this namespace.")
@click.option(
    "--nodes-from",
    default="live",
    show_default=True,
    metavar="live|FILE",
    help="The cluster state: the API server, or a file `kubesched snapshot save` wrote (- reads stdin).",
)
@click.option(
    "--replay",
    is_flag=True,
    help="Take the bound pods off their nodes and place them again, instead of placing the pending ones.",
)
@click.option(
    "--scheduler-name",
    default=None,
    help="Whose pods; default the manifest's spec.schedulerName, else kubesched.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed for tie-breaking among equally good nodes, as `kubesched run --seed`.",
)
@_policy_config_file_option(
    "The current policy when no SchedulerPolicy drives the scheduler name (the scheduler's own "
    "--policy-config-file); default the built-in default."
)
@_kubeconfig_option
@_table_or_json_option
def simulate(
    policy_file: str,
    selector: str,
    namespace: str | None,
    nodes_from: str,
    replay: bool,
    scheduler_name: str | None,
    seed: int,
    policy_config_file: Path | None,
    kubeconfig: str | None,
    output: str,
) -> None:
    """Place pods under a candidate policy, without binding, and show what would change.

    By default the pending pods are placed under the policy in force and under the candidate, and
    the two compared; with --replay the bound pods are placed again and compared with where they
    are. Pods are taken in the scheduler's queue order, ties broken with --seed: a kubesched
    started with that seed and policy on that cluster state binds them to the same nodes.
    """
    from kubesched.tools.simulate import render_json, render_table
    from kubesched.tools.snapshot import STDIO

    if policy_file in STDIO and nodes_from in STDIO:
        raise click.UsageError("--policy and --nodes-from cannot both read standard input")
    result = run_simulation(
        policy_file,
        selector,
        nodes_from,
        scheduler_name,
        policy_config_file,
        lambda: _read_live(kubeconfig),
        namespace=namespace,
        replay=replay,
        seed=seed,
    )
    click.echo(render_json(result) if output == "json" else render_table(result))


@main.group()
def snapshot() -> None:
    """Cluster state files, to reproduce a decision offline (simulate, explain --snapshot)."""


@snapshot.command("save")
@click.argument("file")
@_kubeconfig_option
def snapshot_save(file: str, kubeconfig: str | None) -> None:
    """Write the cluster state the scheduler sees (nodes, pods, the objects its plugins read,
    SchedulerPolicies) to FILE as JSON; - writes to standard output."""
    save_snapshot(_read_live(kubeconfig), file)


def save_snapshot(state: Any, file: str) -> None:
    """Write `state` to FILE (- for standard output) and say on stderr what was saved."""
    from kubesched.tools.snapshot import STDIO, save

    try:
        save(state, file)
    except OSError as exc:
        raise click.ClickException(f"{file}: {exc}") from exc
    if file not in STDIO:
        pending = sum(1 for pod in state.pods if not (pod.get("spec") or {}).get("nodeName"))
        others = sum(len(items) for items in state.objects.values())
        click.echo(
            f"saved {len(state.nodes)} node(s), {len(state.pods)} pod(s) ({pending} pending), "
            f"{others} other object(s) and {len(state.policies or ())} SchedulerPolicy(ies) to {file}",
            err=True,
        )
