"""structlog for our events, and Kopf's (and asyncio's) stdlib logging routed through the same renderer."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def configure(level: str = "info", fmt: str = "console") -> None:
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        # Level first: a disabled info line on the bind path then costs one check, not a timestamp.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Kopf narrates every watch event at debug level; keep it at warning unless asked.
    logging.getLogger("kopf").setLevel(max(root.level, logging.INFO if level == "debug" else logging.WARNING))
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
