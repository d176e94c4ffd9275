"""`kubectl kubesched`: kubesched's explain, simulate, snapshot, policy and version as a kubectl plugin,
and `quota`, the ElasticQuotas' use.

kubectl runs the executable `kubectl-kubesched` found on PATH for `kubectl kubesched ...` (krew's
naming) and hands it every argument after the plugin's name. The commands do what `kubesched
<command>` does, with kubectl's habits:

- `-n/--namespace`, `--context` and `--kubeconfig` are global flags, taken anywhere on the line;
- the kubeconfig is `--kubeconfig`, else the files in $KUBECONFIG, else ~/.kube/config; the
  namespace is `-n`, else the one the context names, else `default`;
- `-o json|yaml|wide`, a table by default; colour on a terminal only, never with `--no-color` or
  NO_COLOR set;
- an error is one `error: ...` line on standard error, and exit code 1.

The tools' modules are imported where they are used, as in cli.py: they pull in the Kubernetes
client and NumPy, which `version` and `--help` do not need.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import click
import yaml
from click.decorators import FC

from kubesched import cli
from kubesched.tools.table import table

PROG: Final = "kubectl kubesched"
DEFAULT_NAMESPACE: Final = "default"
DEFAULT_KUBECONFIG: Final = "~/.kube/config"
OUTPUTS: Final = ("json", "yaml", "wide")
# kubectl's global flags that take a value, by each spelling, and the long name click parses.
_VALUED_FLAGS: Final = {
    "-n": "--namespace",
    "--namespace": "--namespace",
    "--context": "--context",
    "--kubeconfig": "--kubeconfig",
}
_SWITCHES: Final = frozenset({"--no-color"})


@dataclass(frozen=True, slots=True)
class GlobalFlags:
    """kubectl's global flags as given on the command line (None: not given)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    no_color: bool = False


@dataclass(frozen=True, slots=True)
class Target:
    """The cluster and namespace the flags mean, resolved as kubectl resolves them."""

    kubeconfig: str | None  # the kubeconfig files that exist, joined by os.pathsep; None: none
    context: str | None  # None: no kubeconfig, or no current context in it
    namespace: str


# ------------------------------------------------------------------------------ kubectl's flags


def hoist_global_flags(args: Sequence[str]) -> list[str]:
    """`args` with kubectl's global flags moved in front of the command, where click parses them.

    kubectl takes `-n shop` before or after the command (`kubectl -n shop get pods`, `kubectl get
    pods -n shop`); a click group takes its options only before. Nothing after `--` is moved.
    """
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, equals, value = arg.partition("=")
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in _SWITCHES:
            front.append(arg)
        elif equals and flag in _VALUED_FLAGS:  # --namespace=shop, -n=shop
            front.append(f"{_VALUED_FLAGS[flag]}={value}")
        elif arg in _VALUED_FLAGS:
            if i + 1 == len(args):
                raise click.UsageError(f"flag needs an argument: {arg}")
            front.extend((_VALUED_FLAGS[arg], args[i + 1]))
            i += 1
        elif arg.startswith("-n") and not arg.startswith("--"):  # -nshop
            front.append(f"--namespace={arg[2:]}")
        else:
            rest.append(arg)
        i += 1
    return front + rest


class _KubectlGroup(click.Group):
    """A group that takes kubectl's global flags anywhere on the command line."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_flags(args))


def resolve_target(flags: GlobalFlags) -> Target:
    """The kubeconfig files, context and namespace kubectl would use with these flags."""
    if flags.kubeconfig is not None:
        if not Path(flags.kubeconfig).is_file():
            raise click.ClickException(f"kubeconfig {flags.kubeconfig}: no such file")
        paths = [flags.kubeconfig]
    else:
        listed = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        paths = [str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p]
        paths = [p for p in paths if Path(p).is_file()]
    if not paths:
        if flags.context is not None:
            raise click.ClickException(f'context "{flags.context}" does not exist')
        return Target(None, None, flags.namespace or _in_cluster_namespace() or DEFAULT_NAMESPACE)
    current, contexts = _read_kubeconfigs(paths)
    if flags.context is not None and flags.context not in contexts:
        raise click.ClickException(f'context "{flags.context}" does not exist')
    name = flags.context or current
    named = str((contexts.get(name) or {}).get("namespace") or "") if name else ""
    return Target(os.pathsep.join(paths), name, flags.namespace or named or DEFAULT_NAMESPACE)


def _read_kubeconfigs(paths: Sequence[str]) -> tuple[str | None, dict[str, Mapping[str, Any]]]:
    """The current context's name and every context, merged as kubectl merges files: the first wins."""
    current: str | None = None
    contexts: dict[str, Mapping[str, Any]] = {}
    for path in paths:
        try:
            document = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise click.ClickException(f"kubeconfig {path}: {exc}") from exc
        if not isinstance(document, Mapping):
            raise click.ClickException(f"kubeconfig {path}: not a kubeconfig")
        current = current or str(document.get("current-context") or "") or None
        for entry in document.get("contexts") or ():
            if isinstance(entry, Mapping) and entry.get("name"):
                context = entry.get("context")
                contexts.setdefault(str(entry["name"]), context if isinstance(context, Mapping) else {})
    return current, contexts


def _in_cluster_namespace() -> str | None:
    """The namespace of the pod this runs in, when it runs in one (as kubectl reads it there)."""
    from kubesched.kube.kubeconfig import IN_CLUSTER_TOKEN

    try:
        return IN_CLUSTER_TOKEN.with_name("namespace").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def pod_reference(argument: str, namespace_flag: str | None, namespace: str) -> tuple[str, str]:
    """(namespace, name) of a POD argument: NAME, in `namespace`, or NAMESPACE/NAME.

    An -n that names another namespace than NAMESPACE/ is an error rather than a guess.
    """
    from kubesched.policy.store import is_object_name

    if "/" in argument:
        namespace, _, name = argument.partition("/")
        if namespace_flag is not None and namespace_flag != namespace:
            raise click.UsageError(
                f"the namespace of {argument} does not match -n {namespace_flag}: give only one of them"
            )
    else:
        name = argument
    if not (is_object_name(namespace) and is_object_name(name)):
        raise click.BadParameter(f"expected NAME or NAMESPACE/NAME, got {argument!r}", param_hint="POD")
    return namespace, name


# --------------------------------------------------------------------------------------- output


def colour_wanted(no_color: bool, stream: TextIO) -> bool:
    """Colour on a terminal only, and never with --no-color or NO_COLOR set (https://no-color.org)."""
    return not no_color and not os.environ.get("NO_COLOR") and stream.isatty()


def paint_explain(text: str, best: Collection[str], fits: bool) -> str:
    """explain's table with its verdicts in colour: the outcome, each rejection's reason, the best nodes."""
    lines = text.split("\n")
    lines[1] = click.style(lines[1], fg="green" if fits else "red", bold=True)
    section = ""
    reason_at = node_at = total_at = -1  # where the columns start, from each section's header
    for i, line in enumerate(lines[2:], 2):
        if line.startswith(("REJECTED (", "FEASIBLE (")):
            section = line.split()[0]
            lines[i] = click.style(line, bold=True)
        elif section == "REJECTED" and line.startswith("NODE "):
            reason_at = line.index("REASON")
        elif section == "FEASIBLE" and line.startswith("RANK "):
            node_at, total_at = line.index("NODE"), line.index("TOTAL")
        elif section == "REJECTED" and reason_at >= 0 and line:
            lines[i] = line[:reason_at] + click.style(line[reason_at:], fg="red")
        elif section == "FEASIBLE" and node_at >= 0 and (node := line[node_at:total_at].rstrip()) in best:
            painted = click.style(node, fg="green", bold=True)
            lines[i] = line[:node_at] + painted + line[node_at + len(node) :]
    return "\n".join(lines)


_SIMULATE_SECTIONS: Final = {
    "MOVED (": "yellow",
    "NEWLY UNSCHEDULABLE (": "red",
    "NEWLY SCHEDULABLE (": "green",
    "PLACEMENTS (": None,
}


def paint_simulate(text: str) -> str:
    """simulate's table with its section titles in colour: yellow moves, red losses, green gains."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        for start, colour in _SIMULATE_SECTIONS.items():
            if line.startswith(start):
                lines[i] = click.style(line, fg=colour, bold=True)
                break
        else:
            if line.startswith("moved: "):
                lines[i] = click.style(line, bold=True)
    return "\n".join(lines)


def placements_table(placements: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every pod of `Simulation.as_dict()["placements"]`: where it is, or goes, under each policy."""
    rows = [["POD", "CURRENT", "CANDIDATE", "REASON"]]
    for p in placements:
        reason = p.get("candidateReason") or p.get("currentReason") or ""
        rows.append([p["pod"], p["current"] or "-", p["candidate"] or "-", reason])
    return ["", f"PLACEMENTS ({len(placements)})", *table(rows)]


def emit(flags: GlobalFlags, output: str | None, as_dict: Mapping[str, Any], text: str, painted: str) -> None:
    """Print a result as `-o` asks: JSON, YAML, or the table (`painted` on a colour terminal)."""
    if output == "json":
        click.echo(json.dumps(as_dict, indent=2))
    elif output == "yaml":
        click.echo(yaml.safe_dump(json.loads(json.dumps(as_dict)), sort_keys=False), nl=False)
    else:
        colour = colour_wanted(flags.no_color, sys.stdout)
        click.echo(painted if colour else text, color=colour)


# ---------------------------------------------------------------------------------- the cluster


def _require_cluster(target: Target) -> None:
    """Refuse a target that names no cluster: a kubeconfig context, or the pod this runs in."""
    from kubesched.kube.kubeconfig import IN_CLUSTER_TOKEN

    if target.kubeconfig is None and not IN_CLUSTER_TOKEN.exists():
        where = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
        raise click.ClickException(f"no kubeconfig found ({where}): give --kubeconfig or set KUBECONFIG")
    if target.kubeconfig is not None and target.context is None:
        raise click.ClickException(f"no current context in {target.kubeconfig}: give --context")


def read_live(target: Target, pod: tuple[str, str] | None = None) -> tuple[Any, dict[str, Any] | None]:
    """The cluster state (a `ClusterState`) and, when `pod` names one, that pod, through `target`."""
    from kubesched.tools.explain import read_live_state

    _require_cluster(target)
    with cli.api_errors():
        return asyncio.run(read_live_state(target.kubeconfig, target.context, pod))


# ------------------------------------------------------------------------------------- commands


def _reused(command: click.Command, *names: str) -> list[click.Parameter]:
    """Options of a `kubesched` command, shared so that both commands take them alike."""
    by_name = {param.name: param for param in command.params}
    return [by_name[name] for name in names]


def _output_option(wide: str) -> Callable[[FC], FC]:
    """kubectl's -o: json, yaml, or wide (`wide` says what wide shows); a table by default."""
    return click.option(
        "-o", "--output", type=click.Choice(OUTPUTS), help=f"json, yaml, or wide: {wide}. Default: a table."
    )


_EPILOG: Final = (
    "Global flags, before or after the command: -n/--namespace, --context, --kubeconfig, --no-color "
    "(kubectl kubesched --help)."
)


@click.group(
    cls=_KubectlGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
)
@click.option(
    "-n",
    "--namespace",
    metavar="NAMESPACE",
    help="The namespace; default the current context's, else default.",
)
@click.option("--context", metavar="NAME", help="The kubeconfig context to use; default the current one.")
@click.option(
    "--kubeconfig", metavar="FILE", help="Kubeconfig file; default $KUBECONFIG, else ~/.kube/config."
)
@click.option("--no-color", is_flag=True, help="Print no colour (nor with NO_COLOR set; never when piped).")
@click.pass_context
def plugin(
    ctx: click.Context, namespace: str | None, context: str | None, kubeconfig: str | None, no_color: bool
) -> None:
    """kubesched's tools as a kubectl plugin: why a pod is pending, what a policy would change.

    The flags above go before or after the command, as kubectl's global flags do.
    """
    ctx.obj = GlobalFlags(kubeconfig or None, context or None, namespace or None, no_color)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


plugin.add_command(cli.version)
plugin.add_command(cli.policy)


@plugin.command(
    params=_reused(cli.explain, "scheduler_name", "policy_config_file", "snapshot_file"), epilog=_EPILOG
)
@click.argument("pod", metavar="POD")
@_output_option("the table, which lists every node and check already")
@click.pass_obj
def explain(
    flags: GlobalFlags,
    pod: str,
    scheduler_name: str | None,
    policy_config_file: Path | None,
    snapshot_file: str | None,
    output: str | None,
) -> None:
    """Show, for every node, which predicates reject POD and why, and how the others score.

    POD is NAME, in the namespace of -n or of the current context, or NAMESPACE/NAME. Runs the
    policy against the live cluster state (or a saved one) without binding anything.
    """
    from kubesched.policy.compile import PolicyError
    from kubesched.tools.explain import PodNotFound, explain_in_state, explain_snapshot, render_table

    target = resolve_target(flags)
    namespace, name = pod_reference(pod, flags.namespace, target.namespace)
    try:
        if snapshot_file is not None:
            state = cli.load_snapshot(snapshot_file)
            result = explain_snapshot(state, namespace, name, scheduler_name, policy_config_file)
        else:
            state, raw = read_live(target, (namespace, name))
            assert raw is not None  # read_live raises PodNotFound otherwise
            result = explain_in_state(state, raw, scheduler_name, policy_config_file)
    except PodNotFound as exc:
        raise click.ClickException(str(exc)) from exc
    except PolicyError as exc:
        raise click.ClickException(f"policy: {exc}") from exc
    text = render_table(result)
    emit(flags, output, result.as_dict(), text, paint_explain(text, result.best, bool(result.feasible)))


@plugin.command(
    params=_reused(
        cli.simulate,
        "policy_file",
        "selector",
        "nodes_from",
        "replay",
        "scheduler_name",
        "seed",
        "policy_config_file",
    ),
    epilog=_EPILOG,
)
@click.option(
    "-A", "--all-namespaces", is_flag=True, help="Place the pods of every namespace, not only those of -n."
)
@_output_option("the table, then every pod under both policies")
@click.pass_obj
def simulate(
    flags: GlobalFlags,
    policy_file: str,
    selector: str,
    nodes_from: str,
    replay: bool,
    scheduler_name: str | None,
    seed: int,
    policy_config_file: Path | None,
    all_namespaces: bool,
    output: str | None,
) -> None:
    """Place pods under a candidate policy, without binding, and show what would change.

    The pods of the namespace (-n, else the current context's; -A: every namespace). By default
    the pending pods are placed under the policy in force and under the candidate, and the two
    compared; with --replay the bound pods are placed again and compared with where they are.
    Pods are taken in the scheduler's queue order, ties broken with --seed, as `kubesched simulate`.
    """
    from kubesched.tools.simulate import render_table
    from kubesched.tools.snapshot import STDIO

    if policy_file in STDIO and nodes_from in STDIO:
        raise click.UsageError("--policy and --nodes-from cannot both read standard input")
    target = resolve_target(flags)
    result = cli.run_simulation(
        policy_file,
        selector,
        nodes_from,
        scheduler_name,
        policy_config_file,
        lambda: read_live(target)[0],
        namespace=None if all_namespaces else target.namespace,
        replay=replay,
        seed=seed,
    )
    as_dict = result.as_dict()
    text = render_table(result)
    if output == "wide" and result.placements:
        text = "\n".join([text, *placements_table(as_dict["placements"])])
    emit(flags, output, as_dict, text, paint_simulate(text))


@plugin.command(params=_reused(cli.explain, "snapshot_file"), epilog=_EPILOG)
@_output_option("the names of the pods waiting on each quota")
@click.pass_obj
def quota(flags: GlobalFlags, snapshot_file: str | None, output: str | None) -> None:
    """List every ElasticQuota: per resource what its pods use, its min and max, and how many
    pods wait on it.

    Every namespace's, or only those of -n when given. Use is counted as the scheduler counts it:
    the requests of the bound pods not finished. A pod waits on a quota when it is pending and its
    PodScheduled condition names the quota (the scheduler refused its last attempt for it).
    """
    from kubesched.tools.quotas import as_dict, quota_reports, render_table

    if snapshot_file is not None:
        state = cli.load_snapshot(snapshot_file)
    else:
        state = read_live(resolve_target(flags))[0]
    reports = quota_reports(state, flags.namespace)
    text = render_table(reports, wide=output == "wide")
    emit(flags, output, as_dict(reports), text, text)


@plugin.group()
def snapshot() -> None:
    """Cluster state files, to reproduce a decision offline (simulate --nodes-from, explain --snapshot)."""


@snapshot.command("save", epilog=_EPILOG)
@click.argument("file")
@click.pass_obj
def snapshot_save(flags: GlobalFlags, file: str) -> None:
    """Write the cluster state the scheduler sees (nodes, pods, the objects its plugins read,
    SchedulerPolicies) to FILE as JSON; - writes to standard output. The whole cluster: -n does not
    narrow it."""
    cli.save_snapshot(read_live(resolve_target(flags))[0], file)


# ---------------------------------------------------------------------------------- entry point


def _one_line(message: str) -> str:
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """`kubectl-kubesched`: the plugin's commands, failing as kubectl does (`error: ...`, exit code 1)."""
    try:
        result = plugin.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        return 1
    except click.Abort:
        return 130  # interrupted, as a shell reports SIGINT
    return result if isinstance(result, int) else 0
