"""The one way the benchmarks write a Markdown table: a header, rows of cells, and each column's alignment.

Every table of the results pages goes through :func:`markdown_table`, so they share one
layout (``| a | b |`` rows under a ``|---|---:|`` rule) and a cell is formatted where its
figure is chosen, not here.

>>> print(markdown_table(["run", "speedup"], [["baseline", "1.00x"], ["e=2", "1.84x"]], align="lr"))
| run | speedup |
|---|---:|
| baseline | 1.00x |
| e=2 | 1.84x |
"""

from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["markdown_table"]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """The table's lines, joined: ``header``, a rule, then each row's cells (``str()`` of each; an empty cell is ``| |``).

    Args:
      header: the column names.
      rows: each row's cells, as many as ``header``.
      align: one letter a column, ``l`` (left, the default for a column not given) or
        ``r`` (right, for figures).

    Raises:
      ValueError: a row with another number of cells than the header, or an alignment
        letter other than ``l`` and ``r``, naming it.
    """
    if len(align) > len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align: expected up to {len(header)} letters l or r, got {align!r}")
    rule = ["---:" if letter == "r" else "---" for letter in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|"]
    for row in rows:
        cells = [str(cell) for cell in row]
        if len(cells) != len(header):
            raise ValueError(f"rows: expected {len(header)} cells a row, got {len(cells)}: {cells!r:.200}")
        lines.append("|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|")
    return "\n".join(lines)
