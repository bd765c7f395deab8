"""A small box-drawn table and wrapped notes in plain text, for the commands whose start-up matters most.

`tokenmath infer` with defaults is the first thing a user runs; rich (~35 ms to import, ~17 ms to lay out one table
on a 2-core machine, issue 23 item 9) was a fifth of its start-up. This draws the same kind of table, in rich's
heavy-head box style, with the standard library only. Colour goes through click.style, which click.echo strips
when the output is not a terminal.
"""
from __future__ import annotations

import os
import textwrap

import click


# Width of an answer that goes to a file or a pipe: wide enough that a table's rows stay whole, and under the 100
# columns a reader's editor or a log shows without wrapping (80 split most rows of `infer` in two)
PIPED_WIDTH = 100


def term_width() -> int:
    """The terminal's columns ($COLUMNS first, as rich reads it), PIPED_WIDTH when not a terminal (shutil's same
    rule costs an 8 ms import)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(1).columns or PIPED_WIDTH
    except OSError:
        return PIPED_WIDTH


def _fit(cells: list[list[str]], widths: list[int], width: int) -> list[int]:
    """Narrow the widest column (never below its longest word) until the table fits `width` columns."""
    widths = list(widths)
    floor = [max((len(w) for row in cells for w in row[i].split()), default=1) for i in range(len(widths))]
    while sum(widths) + 3 * len(widths) + 1 > width:
        i = max(range(len(widths)), key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break
        widths[i] -= 1
    return widths


def box_table(title: str, header: list[str], rows: list[list[str]], right: tuple[int, ...] = (),
              styles: dict | None = None, width: int | None = None) -> str:
    """The table as text: `right` lists the columns aligned right; styles maps (row, col) to click.style keywords
    (applied after padding, so colour never changes the layout). Cells wrap at word boundaries to fit `width`."""
    width = width or term_width()
    cells = [header, *rows]
    widths = _fit(cells, [max(len(r[i]) for r in cells) for i in range(len(header))], width)
    styles = styles or {}

    def line(l, m, r, fill):
        return l + m.join(fill * (w + 2) for w in widths) + r

    def render(row, r_idx, bar):
        parts = [textwrap.wrap(c, w) or [""] for c, w in zip(row, widths)]
        out = []
        for k in range(max(len(p) for p in parts)):
            segs = []
            for i, (p, w) in enumerate(zip(parts, widths)):
                text = p[k] if k < len(p) else ""
                text = text.rjust(w) if i in right else text.ljust(w)
                st = styles.get((r_idx, i))
                segs.append(f" {click.style(text, **st) if st and text.strip() else text} ")
            out.append(bar + bar.join(segs) + bar)
        return out

    total = sum(widths) + 3 * len(widths) + 1
    lines = [title.center(total).rstrip()] if title else []
    lines.append(line("┏", "┳", "┓", "━"))
    lines += render(header, -1, "┃")
    lines.append(line("┡", "╇", "┩", "━"))
    for j, row in enumerate(rows):
        lines += render(row, j, "│")
    lines.append(line("└", "┴", "┘", "─"))
    return "\n".join(lines)


def wrapped(prefix: str, text: str, width: int | None = None) -> str:
    """`prefix text` wrapped to the terminal, continuation lines indented under the text."""
    return textwrap.fill(text, width=(width or term_width()), initial_indent=prefix,
                         subsequent_indent=" " * len(prefix), break_on_hyphens=False)
