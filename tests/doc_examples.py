"""The examples of README.md and docs/: every block marked `<!-- readme-test: NAME -->`, found by name
on whichever page holds it. tests/integration/test_readme.py runs or validates each one."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).parents[1]
MARKER = re.compile(
    r"^<!-- readme-test: (?P<name>[\w-]+) -->\n(?:```\w*\n(?P<code>.*?)\n```$|(?P<text>.*?)(?=\n\n|\Z))",
    re.M | re.S,
)

# The page each block lives on, so that a missing block is looked for where it belongs.
HOMES = {
    "readme-install": "README.md",
    "readme-policy": "README.md",
    "kubectl-kubesched": "README.md",
    "readme-explain-excerpt": "README.md",
    "explain-setup": "docs/tutorial.md",
    "pod": "docs/tutorial.md",
    "explain": "docs/tutorial.md",
    "explain-output": "docs/tutorial.md",
    "tutorial-uncordon": "docs/tutorial.md",
    "tutorial-scheduled": "docs/tutorial.md",
    "tutorial-typo": "docs/tutorial.md",
    "tutorial-rejected": "docs/tutorial.md",
    "tutorial-fix": "docs/tutorial.md",
    "tutorial-explain-fixed": "docs/tutorial.md",
    "install": "docs/how-to/install.md",
    "pdb-policy-v1": "docs/how-to/install.md",
    "policy": "docs/how-to/policies.md",
    "simulate": "docs/how-to/policies.md",
    "legacy-policy": "docs/how-to/migrate.md",
    "convert": "docs/how-to/migrate.md",
    "convert-output": "docs/how-to/migrate.md",
    "kubescheduler-config": "docs/how-to/migrate.md",
    "kubescheduler-convert": "docs/how-to/migrate.md",
    "kubescheduler-convert-output": "docs/how-to/migrate.md",
    "podgroup": "docs/how-to/gangs.md",
    "podgroup-old-group": "docs/how-to/gangs.md",
}


def pages() -> dict[str, str]:
    """Page (its path in the repository) -> its text: README.md and every page under docs/."""
    paths = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return {str(path.relative_to(REPO)): path.read_text() for path in paths}


@cache
def marked() -> dict[str, tuple[str, str]]:
    """Marked block name -> (its page, its text: a fenced block's code, else the paragraph or list
    that follows). A name is unique across pages."""
    blocks: dict[str, tuple[str, str]] = {}
    for page, text in pages().items():
        for match in MARKER.finditer(text):
            name = match["name"]
            assert name not in blocks, f"two blocks marked {name}: in {blocks[name][0]} and {page}"
            blocks[name] = (page, match["code"] if match["code"] is not None else match["text"])
    return blocks


def block(name: str) -> str:
    """The text of the block marked `name`, which must be on the page HOMES names."""
    home = HOMES[name]
    assert name in marked(), f"{home} has no block marked `readme-test: {name}`"
    page, text = marked()[name]
    assert page == home, f"the block marked {name} is in {page}, not {home}: move it, or its HOMES entry"
    return text
