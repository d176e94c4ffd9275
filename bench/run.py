"""`python bench/run.py [--quick] [...]`: the benchmark (see bench/README.md); `make bench` runs it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubebench.cli import main

if __name__ == "__main__":
    sys.exit(main())
