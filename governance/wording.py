"""How counts read in messages and reasons: "1 object", "2 objects", never "2 object(s)".

Shared by every layer (plan reasons, apply results, CLI lines), so it lives outside the CLI.
"""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun in the number it takes: "1 root", "2 roots", "1,234 objects"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
