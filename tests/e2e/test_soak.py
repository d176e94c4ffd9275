"""A short `make soak`: every map and set of a real scheduler back to its size once its pods are gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_short_soak_leaves_every_size_at_its_start(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    # RSS over a few thousand pods is the warm-up alone: only the sizes are judged here.
    argv = [
        sys.executable, str(BENCH / "soak.py"), "--pods", "2000", "--sample-every", "1000",
        "--warmup", "0", "--max-growth", "1000000", "--out", str(out), "--log-dir", str(tmp_path),
    ]  # fmt: skip
    # The harness imports the fixtures from hack/, as `make soak` runs it.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT / "hack"), os.environ.get("PYTHONPATH")))),
    }
    run = subprocess.run(argv, capture_output=True, text=True, timeout=840, env=env)
    summary = json.loads(out.read_text())["summary"]
    assert summary["sizes_differing_from_start"] == {}, run.stdout[-3000:]
    assert summary["pods_churned"] == 2000
    assert summary["stalled_batches"] == 0
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
