"""Output helpers: counts in words that agree with the number, and a stream that falls
silent when its reader goes."""

from __future__ import annotations

import io

import pytest

from governance.cli.output import ReaderSafeStream, emit_json_array
from governance.wording import counted


@pytest.mark.parametrize(
    ("n", "noun", "plural", "text"),
    [
        (1, "root", None, "1 root"),
        (2, "root", None, "2 roots"),
        (0, "action", None, "0 actions"),
        (1234, "object", None, "1,234 objects"),
        (1, "symlink", None, "1 symlink"),
        (3, "entry", "entries", "3 entries"),
    ],
)
def test_counted_agrees_with_its_number(n: int, noun: str, plural: str | None, text: str) -> None:
    assert counted(n, noun, plural) == text


class _ClosedPipe(io.StringIO):
    """A stream whose reader left after `room` characters."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room
        self.attempts = 0

    def write(self, s: str) -> int:
        self.attempts += 1
        if self.tell() + len(s) > self.room:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(s)


def test_a_stream_whose_reader_left_drops_the_rest_without_raising(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = _ClosedPipe(room=10)
    stream = ReaderSafeStream(inner)  # type: ignore[arg-type]
    monkeypatch.setattr("sys.stdout", stream)
    rows = ({"i": i} for i in range(1000))
    emit_json_array(rows)  # no BrokenPipeError
    stream.flush()
    assert stream.reader_gone
    assert inner.attempts <= 3  # it stopped writing (and reading rows) at the break
    assert next(rows) == {"i": 2}  # the row it failed on and the next: no more
