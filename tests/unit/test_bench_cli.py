"""The benchmark's command line (bench/kubebench/cli.py): which runs may replace results/latest.*."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from kubebench.cli import is_full_run, parse_args
from kubebench.schedulers import ALL


@pytest.mark.parametrize(
    ("argv", "schedulers", "repeats", "full"),
    [
        ([], list(ALL), 3, True),
        ([], list(ALL), 5, True),
        ([], list(ALL), 2, False),
        ([], ["kubesched"], 3, False),
        (["--batch", "5000x5000"], list(ALL), 3, False),
        (["--steady", "1000x50x30"], list(ALL), 3, False),
        (["--no-steady"], list(ALL), 3, False),
        (["--no-batch"], list(ALL), 3, False),
    ],
)
def test_only_the_default_sizes_with_every_binder_and_three_repeats_replace_latest(
    argv: list[str], schedulers: list[str], repeats: int, full: bool
) -> None:
    assert is_full_run(parse_args(argv), schedulers, repeats) is full
