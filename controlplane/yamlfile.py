"""Reading a YAML file that holds one mapping (a kubeconfig, a policy given to ``gpufed whatif``).

:func:`read_yaml_mapping` turns the two ways such a file is unusable (not YAML, not a mapping)
into the caller's own ``ValueError`` with the file's path in the message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint as one line (``expected …, but found … at line 2, column 1``): its
    own text quotes the faulty lines below it, which a one-line error cannot hold."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem}{where}"
    return " ".join(str(exc).split())


def read_yaml_mapping(
    path: Path, *, not_mapping: str, error: type[ValueError] = ValueError, quote_error: bool = True
) -> dict[str, Any]:
    """The YAML document of ``path``, which must be a mapping.

    Raises ``error``: ``<path> is not UTF-8 text``, ``<path> is not valid YAML`` (followed by the parser's words when
    ``quote_error``; pass False for files that carry secrets, since the parser quotes the lines
    around the fault) or ``<path><not_mapping>`` when the document is not a mapping.
    OSError from reading the file passes through.
    """
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path} is not valid YAML" + (f": {yaml_problem(exc)}" if quote_error else "")) from exc
    if not isinstance(document, dict):
        raise error(f"{path}{not_mapping}")
    return document
