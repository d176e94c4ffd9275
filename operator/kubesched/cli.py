"""The `kubesched` command, after kube-scheduler's: `run`, `version`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from kubesched import __version__, logs


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def main() -> None:
    """kubesched: kube-scheduler's algorithm as a Kopf operator, with live policies."""


@main.command()
def version() -> None:
    """Print the version."""
    click.echo(f"kubesched {__version__}")


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
@click.option(
    "--policy-config-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Legacy Policy file (JSON or YAML). Without it, kube-scheduler 1.20's default algorithm.",
)
@click.option(
    "--kube-api-qps", default=50.0, show_default=True, help="Client-side requests per second (0: unlimited)."
)
@click.option("--kube-api-burst", default=100, show_default=True, help="Client-side burst above the QPS.")
@click.option("--bind-concurrency", default=64, show_default=True, help="Binding requests in flight at once.")
@click.option("--batch-size", default=32, show_default=True, help="Pods scheduled per executor call.")
@click.option("--metrics-port", default=10251, show_default=True, help="Port for /metrics (0: off).")
@click.option("--seed", type=int, default=None, help="Seed for tie-breaking among equally good nodes.")
@click.option("--log-format", type=click.Choice(["console", "json"]), default="console", show_default=True)
@click.option(
    "--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True
)
def run(
    kubeconfig: str | None,
    scheduler_name: str,
    policy_config_file: Path | None,
    kube_api_qps: float,
    kube_api_burst: int,
    bind_concurrency: int,
    batch_size: int,
    metrics_port: int,
    seed: int | None,
    log_format: str,
    log_level: str,
) -> None:
    """Run the scheduler."""
    logs.configure(log_level, log_format)
    for name, val in (
        ("--kube-api-burst", kube_api_burst),
        ("--bind-concurrency", bind_concurrency),
        ("--batch-size", batch_size),
    ):
        if val < 1:
            raise click.BadParameter(f"must be at least 1, got {val}", param_hint=name)
    if kube_api_qps < 0:
        raise click.BadParameter(f"must not be negative, got {kube_api_qps}", param_hint="--kube-api-qps")
    from kubesched.app import RunOptions

    options = RunOptions(
        kubeconfig,
        scheduler_name,
        policy_config_file,
        kube_api_qps,
        kube_api_burst,
        bind_concurrency,
        batch_size,
        metrics_port,
        seed,
    )
    from kubesched.algorithm.policy import PolicyError

    try:
        from kubesched.app import run_scheduler

        asyncio.run(run_scheduler(options))
    except PolicyError as exc:
        raise click.ClickException(f"{policy_config_file}: {exc}") from exc
    except KeyboardInterrupt:
        pass
