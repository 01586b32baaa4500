"""Tables that fit the terminal without cutting what must be read whole.

Left to itself, rich squeezes a table that is too wide by shrinking columns evenly, and
ends a shrunk cell with `…`: a piped `govern plans` showed `$0.2` for `$0.20`, and two
runs `llama-1b-a` and `llama-1b-b` both as `llama-1…`. `fit_table` decides every
column's width itself before rich sees the table:

- a `no_wrap` column (a number, a date, a status, a plan id) gets its widest cell and
  header, never less;
- every other column (identifiers with `overflow="fold"`, free text that wraps) shares
  what is left, each up to its widest cell and at least its `min_width` (else
  `FLOOR`): it takes more lines, never loses characters.

When the `no_wrap` columns and the others' floors need more than the terminal has,
`print_fitted` prints the table that wide, uncropped: a long line beats a cut number.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from governance.wording import shown

FLOOR = 8
"""The narrowest a folding or wrapping column gets (unless its `min_width` says)."""
_NATURAL = 10_000
"""A width to measure cells at: wide enough that nothing is wrapped."""


def fit_table(table: Table, width: int, console: Console) -> int:
    """Fix every column's width so that `table` fits `width` columns where it can (see
    the module docstring); returns the width it takes, more than `width` only when its
    `no_wrap` columns and the others' floors do not fit."""
    options = console.options.update_width(_NATURAL)
    columns = table.columns
    pads = [table._get_padding_width(i) for i in range(len(columns))]
    wants: list[int] = []
    floors: list[int] = []
    for column in columns:
        cells = [_measure(console, options, c) for c in column.cells]
        head = _measure(console, options, column.header)
        widest = max((m.maximum for m in cells), default=0)
        if column.no_wrap:
            want = max(widest, head.maximum, 1)
            floor = want
        else:
            want = max(widest, head.minimum, 1)
            floor = min(want, max(column.min_width or FLOOR, head.minimum))
            column.overflow = "fold"  # a word longer than the column: folded, never `…`
        wants.append(want)
        floors.append(floor)
    room = width - table._extra_width - sum(pads)
    widths = _share(room, wants, floors)
    for column, w in zip(columns, widths, strict=True):
        column.width = w
        column.min_width = column.max_width = None
    return sum(widths) + sum(pads) + table._extra_width


def print_fitted(console: Console, table: Table, *, width: int | None = None) -> None:
    """`table` fitted to the console (or `width`) and printed; wider and uncropped when
    its columns that must not be cut need more room than there is."""
    width = console.width if width is None else width
    need = fit_table(table, width, console)
    if need <= console.width:
        console.print(table)
        return
    lines = console.render_lines(table, console.options.update_width(need), pad=False)
    segments = [s for line in lines for s in (*line, Segment.line())]
    console.print(Segments(segments), soft_wrap=True, end="")


def _measure(console: Console, options: ConsoleOptions, renderable: RenderableType) -> Measurement:
    if renderable == "" or renderable is None:
        return Measurement(0, 0)
    return Measurement.get(console, options, renderable)


def _share(room: int, wants: list[int], floors: list[int]) -> list[int]:
    """Widths for columns that want `wants` (the fixed ones have floor == want): each its
    want when all fit; else each its floor, then a column that needs no more than an
    equal share of what is left gets all it wants (so short identifiers stay whole), and
    the rest is shared in proportion to what the others want (the widest take the folds).

    >>> _share(25, [5, 30, 10], [5, 8, 8])
    [5, 10, 10]
    >>> _share(40, [5, 60, 30], [5, 8, 8])
    [5, 21, 14]
    """
    if sum(wants) <= room:
        return list(wants)
    widths = list(floors)
    spare = room - sum(widths)
    active = [i for i, w in enumerate(widths) if w < wants[i]]
    while spare > 0 and active:
        equal = spare / len(active)
        whole = [i for i in active if wants[i] - widths[i] <= equal]
        if whole:  # these fit in their share: give them all they want, share the rest again
            for i in whole:
                spare -= wants[i] - widths[i]
                widths[i] = wants[i]
            active = [i for i in active if i not in whole]
            continue
        total = sum(wants[i] for i in active)
        share = {i: spare * wants[i] / total for i in active}
        given = {i: int(share[i]) for i in active}
        for i in active:
            widths[i] += given[i]
        spare -= sum(given.values())
        for i in sorted(active, key=lambda j: (share[j] - given[j], wants[j]), reverse=True):
            if spare <= 0:
                break
            widths[i] += 1
            spare -= 1
        break
    return widths


class Packed:
    """Pieces of text on as few lines as the width allows, `sep` between them on a line,
    each piece whole (one wider than the line alone wraps): a narrow terminal never
    leaves part of one, such as the `by` of "made by alice" or the `0` of "0 archived",
    at the end of a line and the rest on the next.

    >>> console = Console(width=24, color_system=None)
    >>> console.print(Packed([Text("3 kept"), Text("0 archived"), Text("11 deleted")], ", "))
    3 kept, 0 archived,
    11 deleted
    """

    def __init__(self, pieces: list[Text], sep: str) -> None:
        self.pieces = pieces
        self.sep = sep

    def _units(self) -> tuple[list[Text], str]:
        """Each piece with the separator's mark that ends it (`,` of `, `), and the space
        that joins two on a line."""
        mark = self.sep.rstrip()
        units = [p + mark if i < len(self.pieces) - 1 else p for i, p in enumerate(self.pieces)]
        return units, self.sep[len(mark) :]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        units, join = self._units()
        line = Text()
        for unit in units:
            if line and len(line) + len(join) + len(unit) > options.max_width:
                yield line
                line = Text()
            elif line:
                line.append(join)
            line.append_text(unit)
        if line:
            yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        units, join = self._units()
        widest = max((len(u) for u in units), default=0)
        whole = sum(len(u) for u in units) + len(join) * max(0, len(units) - 1)
        return Measurement(widest, whole)


def shown_text(value: str, style: str = "") -> Text:
    """Text a person reads, from a name, a key or a reason anyone could have written:
    its invisible characters (an ESC sequence, a right-to-left override) shown as
    escapes (`wording.shown`), so no terminal redraws it as something else."""
    return Text(shown(value), style=style)
