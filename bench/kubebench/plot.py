"""The PNG: one panel per figure, a group of bars per scenario, min-max whiskers over the repeats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display here; must precede pyplot

import matplotlib.pyplot as plt

from kubebench.report import GANG_RATIO, median
from kubebench.schedulers import KUBE_SCHEDULER, KUBESCHED, KUBESCHED_GANGS, LABELS, NULL

COLORS = {NULL: "#9e9e9e", KUBE_SCHEDULER: "#3f6fb5", KUBESCHED: "#e07b24", KUBESCHED_GANGS: "#8e4f9e"}
PANELS = (
    ("pods_per_s", "throughput, pods/s (first to last bind)", "higher is better"),
    ("latency_p99_ms", "creation-to-bound p99, ms (dot: p50)", "lower is better"),
    ("cpu_s_per_1000_pods", "scheduler CPU s per 1,000 pods", "lower is better"),
    ("peak_rss_mib", "scheduler peak RSS, MiB", "lower is better"),
)


def plot(
    rows: list[dict[str, Any]],
    scenarios: list[str],
    titles: dict[str, str],
    schedulers: list[str],
    heading: str,
    path: Path,
    found_ratios: list[dict[str, Any]] | None = None,
) -> Path:
    """Draw the summary rows; kubesched's bars carry their ratio to kube-scheduler ("k-s"), and those
    of kubesched with PodGroups their ratio to kubesched without ("no groups")."""
    versus = {
        (entry["scenario"], key): value
        for entry in found_ratios or []
        for key, value in (entry.get("kubesched_vs_kube_scheduler") or {}).items()
        if value is not None
    }
    versus_no_groups = {
        (entry["scenario"], key): value
        for entry in found_ratios or []
        for key, value in (entry.get(GANG_RATIO) or {}).items()
        if value is not None
    }
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    width = 0.8 / max(len(schedulers), 1)
    for ax, (key, title, hint) in zip(axes.flat, PANELS, strict=True):
        for i, kind in enumerate(schedulers):
            xs, heights, lows, highs, p50s = [], [], [], [], []
            for x, scenario in enumerate(scenarios):
                row = next((r for r in rows if r["scenario"] == scenario and r["scheduler"] == kind), None)
                position = x + (i - (len(schedulers) - 1) / 2) * width
                value = None if row is None else median(row, key)
                if row is not None and value is None:
                    mark = "failed" if row["ok_runs"] == 0 else "n/a"
                    ax.text(position, 0, mark, rotation=90, ha="center", va="bottom", fontsize=7)
                if value is None or row is None:
                    continue
                metric = row["metrics"][key]
                xs.append(position)
                heights.append(value)
                lows.append(value - metric["min"])
                highs.append(metric["max"] - value)
                p50s.append(median(row, "latency_p50_ms"))
                text = f"{value:.0f}" if value >= 10 else f"{value:.2f}"
                vs = versus.get((scenario, key)) if kind == KUBESCHED else None
                if vs is not None:
                    text += f"\n{vs:.2f}x k-s"  # kubesched / kube-scheduler
                vs = versus_no_groups.get((scenario, key)) if kind == KUBESCHED_GANGS else None
                if vs is not None:
                    text += f"\n{vs:.2f}x no groups"
                ax.text(position, value, text, ha="center", va="bottom", fontsize=7)
            ax.bar(
                xs,
                heights,
                width,
                yerr=[lows, highs],
                capsize=2,
                color=COLORS.get(kind, "black"),
                label=LABELS.get(kind, kind),
            )
            if key == "latency_p99_ms":
                ax.plot(xs, p50s, "o", color="black", markersize=3)
        ax.set_ylim(top=ax.get_ylim()[1] * 1.12)  # room for the labels above the bars
        ax.set_title(f"{title}  ({hint})", fontsize=10)
        ax.set_xticks(range(len(scenarios)))
        ax.set_xticklabels([titles.get(s, s).replace(", ", ",\n") for s in scenarios], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(heading, fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
