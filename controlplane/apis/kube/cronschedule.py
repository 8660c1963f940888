"""A CronJob's schedule as kube reads it: robfig/cron v3's ``ParseStandard``.

kube validates ``spec.schedule`` by parsing it and quoting the parser's error: five fields
(``expected exactly 5 fields, found 2: [bad sched]``, the fields as Go prints a list), each a
comma-separated list of ranges (``*``, ``?``, ``N``, ``N-M``, with a ``/step``; ``N/step``
runs to the field's maximum), months and weekdays also by name; or a descriptor (``@hourly``,
``@every 1h30m`` with Go's duration syntax). The text is not trimmed: a descriptor must start
it, and fields are split on whitespace.

Pure: text in, robfig's error out (None when it parses).
"""

from __future__ import annotations

from controlplane.apis.durations import go_duration_error

_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_EVERY = "@every "
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: (low, high, names) of the five fields: minute, hour, day of month, month, day of week.
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    (0, 6, {d: i for i, d in enumerate(_WEEKDAYS)}),
)
_INT64_MAX = 2**63 - 1


class _Refused(ValueError):
    pass


def _atoi(text: str) -> int:
    """Go's ``strconv.Atoi``, in its words when it fails."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise _Refused(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise _Refused(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": value out of range')
    return value


def _unsigned(text: str) -> int:
    """robfig's ``mustParseInt``."""
    value = _atoi(text)
    if value < 0:
        raise _Refused(f"negative number ({value}) not allowed: {text}")
    return value


def _int_or_name(text: str, names: dict[str, int]) -> int:
    return names[text.lower()] if text.lower() in names else _unsigned(text)


def _range_error(expr: str, low: int, high: int, names: dict[str, int]) -> str | None:
    """robfig's ``getRange`` for one range of a field."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    try:
        if low_and_high[0] in ("*", "?"):
            start, end = low, high
        else:
            start = _int_or_name(low_and_high[0], names)
            if len(low_and_high) > 2:
                return f"too many hyphens: {expr}"
            end = _int_or_name(low_and_high[1], names) if len(low_and_high) == 2 else start
        if len(range_and_step) > 2:
            return f"too many slashes: {expr}"
        step = _unsigned(range_and_step[1]) if len(range_and_step) == 2 else 1
    except _Refused as exc:
        return str(exc)
    if len(range_and_step) == 2 and len(low_and_high) == 1:
        end = high  # "N/step" runs from N to the maximum
    if start < low:
        return f"beginning of range ({start}) below minimum ({low}): {expr}"
    if end > high:
        return f"end of range ({end}) above maximum ({high}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    if step == 0:
        return f"step of range should be a positive number: {expr}"
    return None


def schedule_error(schedule: str) -> str | None:
    """Why robfig/cron's ``ParseStandard`` refuses ``schedule``, in its words; None when it parses."""
    if not schedule:
        return "empty spec string"
    if schedule.startswith("@"):
        if schedule.startswith(_EVERY):
            error = go_duration_error(schedule[len(_EVERY):])
            return f"failed to parse duration {schedule}: {error}" if error else None
        return None if schedule in _DESCRIPTORS else f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"  # Go prints the []string
    for text, (low, high, names) in zip(fields, _FIELDS, strict=True):
        for expr in filter(None, text.split(",")):  # strings.FieldsFunc: empty ranges are skipped
            error = _range_error(expr, low, high, names)
            if error:
                return error
    return None
