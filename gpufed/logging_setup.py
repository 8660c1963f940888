"""Process-wide logging for every gpufed command.

One format for all processes, a filter that redacts bearer tokens and join tokens from
every record as a last line of defence (code never logs them on purpose), and one that
keeps a client's misbehaviour from flooding the log with server-side noise.
"""

from __future__ import annotations

import logging
import re
import sys

from aiohttp.http_exceptions import HttpProcessingError

#: The levels a command's ``--log-level`` offers.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

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


#: asyncio's warning for each write to a connection that is already lost (a client that left).
_LOST_CONNECTION_WRITE = "socket.send() raised exception"


class ClientNoiseFilter(logging.Filter):
    """What a client does wrong is not a server error.

    - aiohttp logs each request it cannot parse (a malformed request line or header) as
      "Error handling request" at ERROR with a traceback, and each client that resets its
      connection mid-request the same way: both become one line at DEBUG.
    - asyncio warns "socket.send() raised exception." for every write after a connection
      was lost -- thousands in a burst when a busy stream's client leaves. The write fails
      and its writer stops on its own; the warning says nothing more and is dropped.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "asyncio" and record.getMessage().startswith(_LOST_CONNECTION_WRITE):
            return False
        error = record.exc_info[1] if record.exc_info else None
        if record.name.startswith("aiohttp") and isinstance(error, HttpProcessingError | ConnectionError):
            what = "a malformed HTTP request" if isinstance(error, HttpProcessingError) else "a lost connection"
            record.msg = "client error: %s (%s: %s)"
            record.args = (what, type(error).__name__, str(error).splitlines()[0] if str(error) else "")
            record.exc_info = None
            record.exc_text = None
            record.levelno = logging.DEBUG
            record.levelname = logging.getLevelName(logging.DEBUG)
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def configure_logging(level: str = "INFO", *, component: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s %(levelname)-5s {component} %(name)s: %(message)s")
    )
    handler.addFilter(ClientNoiseFilter())
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log duplicates our own request log.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
