"""The `kubesched` command's first steps, before its command line is parsed.

Importing the scheduler takes most of its start, about a second. For `kubesched run` the process is
tuned (app/tuning.py) and the start-up's node and pod listings are sent (kube/early_listing.py)
before any of that, so that the API server answers meanwhile: the command line is only glanced at
for --kubeconfig. `cli.run` takes those listings if its own --kubeconfig turns out the same.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kubesched.app.tuning import hold_gc, share_gil
from kubesched.kube import early_listing


def main() -> None:
    """`kubesched` and `python -m kubesched`."""
    prepare(sys.argv[1:])
    from kubesched.cli import main as command

    command()


def prepare(argv: Sequence[str]) -> None:
    """For `kubesched run` (not its --help): hold the collector, share the GIL, send the listings."""
    if not argv or argv[0] != "run" or {"-h", "--help"} & set(argv):
        return
    hold_gc()
    share_gil()
    early_listing.begin(kubeconfig_flag(argv[1:]))


def kubeconfig_flag(args: Sequence[str]) -> str | None:
    """The value of --kubeconfig in `args`, the last one given as click takes it; None without one.
    A wrong guess costs only the head start: `early_listing.begun` compares it with the parsed flag."""
    value = None
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--kubeconfig" and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith("--kubeconfig="):
            value = arg.partition("=")[2]
    return value
