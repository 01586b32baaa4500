"""Durations and sizes as people write them in a policy, and back again for display.

Durations: `30s`, `90m`, `36h`, `7d`, `2w`, or a compound such as `1d12h`. Sizes: a plain
integer is bytes; otherwise a number and a unit, decimal (`kB`, `MB`, `GB`, `TB`, `PB`,
`EB`) or binary (`KiB`, `MiB`, `GiB`, `TiB`, `PiB`, `EiB`); units are case-insensitive and
a space may separate number and unit, so `format_bytes` output parses again.

>>> parse_duration("36h")
datetime.timedelta(days=1, seconds=43200)
>>> parse_size("1.5GiB")
1610612736
>>> format_bytes(1610612736)
'1.5 GiB'
"""

from __future__ import annotations

import math
import re
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

_DURATION_UNITS: dict[str, int] = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([wdhms])")
_DURATION_FULL = re.compile(r"(?:\d+(?:\.\d+)?\s*[wdhms]\s*)+")

_SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "eb": 10**18,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
    "eib": 2**60,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")
_BINARY_DISPLAY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def parse_duration(value: str | timedelta) -> timedelta:
    """`7d` -> timedelta(days=7). Raises ValueError naming the accepted forms.

    A bare number is refused: `7` could mean seconds or days, and a wrong guess here
    deletes data early.
    """
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError("a duration cannot be negative")
        return value
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a duration such as 90m, 36h, 7d or 2w, got {_given(value)}")
    if re.search(r"\d\s*M", value):  # (months? minutes are `m`)
        raise ValueError(
            f"invalid duration {value!r}: M is not a unit (months have no fixed length): "
            "write minutes as m, or months as days (180d)"
        )
    text = value.strip().lower()
    if text.startswith("-"):
        raise ValueError(f"a duration cannot be negative: {value!r}")
    if not _DURATION_FULL.fullmatch(text):
        hint = " (add a unit: s, m, h, d or w)" if re.fullmatch(r"\d+(\.\d+)?", text) else ""
        raise ValueError(f"invalid duration {value!r}: expected e.g. 90m, 36h, 7d, 2w{hint}")
    seconds = Decimal(0)
    for number, unit in _DURATION_PART.findall(text):
        seconds += Decimal(number) * _DURATION_UNITS[unit]
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(
            f"duration {value!r} is too long: at most {MAX_DURATION_SECONDS // 86_400}d (100 years)"
        )
    micros = int((seconds * 1_000_000).to_integral_value(ROUND_HALF_EVEN))
    return timedelta(microseconds=micros)


MAX_DURATION_SECONDS = 36_500 * 86_400
"""The longest duration a policy may give (100 years): ages and windows are counted back
from `as_of`, and a longer one fell off the calendar mid-plan (OverflowError)."""
MAX_SIZE = 2**63 - 1
"""The largest size a policy may give (8 EiB): what a catalog's 64-bit sizes can hold."""


def _given(value: object) -> str:
    """What a policy gave instead of a duration or size, in its own words."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple | dict | set):
        return "a list" if isinstance(value, list | tuple) else "a mapping or set"
    if isinstance(value, date):
        return f"a date {value}"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return "binary data"
    tag = getattr(getattr(value, "tag", None), "value", None)
    return f"a value tagged {tag}" if tag else "a value of another type"


def format_duration(td: timedelta) -> str:
    """timedelta -> the shortest compound string (`1d12h`, `90s` -> `1m30s`), parseable again.

    Days are not folded into weeks so that `365d` stays `365d`. Sub-second parts are
    dropped (policies never need them).
    """
    total = int(td.total_seconds())
    if total < 0:
        return "-" + format_duration(-td)
    if total == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def parse_size(value: str | int) -> int:
    """`64MiB` -> 67108864; a plain integer is bytes. Fractions round to whole bytes."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 512KiB, 64MiB or 2TB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a size cannot be negative: {value}")
        return _at_most_max(value, value)
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0 or value != int(value):
            raise ValueError(f"a size in bytes must be a whole non-negative number: {value}")
        return _at_most_max(int(value), value)
    if not isinstance(value, str):
        raise ValueError(f"expected a size such as 512KiB, 64MiB or 2TB, got {_given(value)}")
    text = value.strip()
    if text.startswith("-"):
        raise ValueError(f"a size cannot be negative: {value!r}")
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"invalid size {value!r}: expected e.g. 512KiB, 64MiB, 1.5GiB, 2TB")
    number, unit = match.groups()
    if not unit:
        multiplier = 1
    else:
        try:
            multiplier = _SIZE_UNITS[unit.lower()]
        except KeyError:
            raise ValueError(
                f"invalid size unit {unit!r} in {value!r}: use B, KB, MB, GB, TB, PB, EB "
                "or KiB, MiB, GiB, TiB, PiB, EiB"
            ) from None
    try:
        exact = Decimal(number) * multiplier
    except InvalidOperation:  # pragma: no cover - the regex admits only digits
        raise ValueError(f"invalid size {value!r}") from None
    if not unit and exact != exact.to_integral_value():
        raise ValueError(f"a size without a unit is bytes and must be whole: {value!r}")
    return _at_most_max(int(exact.to_integral_value(ROUND_HALF_EVEN)), value)


def _at_most_max(size: int, given: object) -> int:
    if size > MAX_SIZE:
        raise ValueError(
            f"size {given!r} is too large: at most {MAX_SIZE:,} bytes (just under 8 EiB)"
        )
    return size


def format_bytes(n: int) -> str:
    """Bytes -> a short binary-unit string: 512 -> '512 B', 1610612736 -> '1.5 GiB'.

    One decimal at most (trailing `.0` dropped): for reports, not for exact round trips.
    """
    if n < 0:
        return "-" + format_bytes(-n)
    if n < 1024:
        return f"{n} B"
    index = 0
    value = float(n)
    while value >= 1024 and index < len(_BINARY_DISPLAY) - 1:
        value /= 1024
        index += 1
    if round(value, 1) >= 1024 and index < len(_BINARY_DISPLAY) - 1:
        value /= 1024
        index += 1
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {_BINARY_DISPLAY[index]}"
