"""How counts read in messages and reasons: "1 object", "2 objects", never "2 object(s)".

Shared by every layer (plan reasons, apply results, CLI lines), so it lives outside the CLI.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun in the number it takes: "1 root", "2 roots", "1,234 objects"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def shown(text: str, *, newlines: bool = False) -> str:
    """`text` as a person's screen or page should show it: every invisible character
    that changes what is shown, written as its escape (`\\x1b`, `\\u202e`). Control
    characters (an ESC sequence in a folder name moves the cursor and redraws a table
    row: a run named `prod\\x1b[4Dtmp` read as `tmp`), format characters (a right-to-left
    override shows `checkpoint-1000` backwards; a zero-width space makes `zw\\u200bsp`
    read as `zwsp`) and line separators; `newlines` keeps `\\n` (a tooltip's lines).
    Names are shown as typed, not as a terminal or a browser would redraw them; JSON and
    CSV keep them raw."""
    if text.isascii() and text.isprintable():  # (the usual name: no work)
        return text
    pattern = _invisible()
    if newlines:
        return pattern.sub(lambda m: m[0] if m[0] == "\n" else _escape(m[0]), text)
    return pattern.sub(lambda m: _escape(m[0]), text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@cache
def _invisible() -> re.Pattern[str]:
    """Every character of category Cc (controls), Cf (format: bidi controls, zero-width
    characters, tags), Zl or Zp (line and paragraph separators)."""
    ranges: list[str] = []
    start = None
    for code in range(0x110000):
        hidden = unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp")
        if hidden and start is None:
            start = code
        elif not hidden and start is not None:
            ranges.append(_range(start, code - 1))
            start = None
    if start is not None:
        ranges.append(_range(start, 0x10FFFF))
    return re.compile(f"[{''.join(ranges)}]")


def _range(first: int, last: int) -> str:
    return (
        re.escape(chr(first))
        if first == last
        else f"{re.escape(chr(first))}-{re.escape(chr(last))}"
    )
