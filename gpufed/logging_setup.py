"""Process-wide logging for every gpufed command.

One format for all processes, and a filter that redacts bearer tokens and join tokens
from every record as a last line of defence (code never logs them on purpose).
"""

from __future__ import annotations

import logging
import re
import sys

_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(--(?:bootstrap-)?token[= ])\S+"),
    re.compile(r"(?i)(\"?token\"?\s*[:=]\s*\"?)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b([a-z0-9]{6}\.)[A-Za-z0-9]{16,}\b"),
)


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``<redacted>``."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + "<redacted>", text)
    return text


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def configure_logging(level: str = "INFO", *, component: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(levelname)-5s {component} %(name)s: %(message)s")
    )
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log duplicates our own request log.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
