"""The benchmarks' tables, printed as Markdown (benchmarks/README.md shows them as printed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

_RULES = {"<": "---", ">": "---:"}


def table_header(columns: Sequence[str], align: str) -> list[str]:
    """The header line and its rule. `align` has a character per column, as in a format spec:
    `<` left, `>` right (numbers)."""
    if len(align) != len(columns) or set(align) - set(_RULES):
        raise ValueError(f"align {align!r} does not fit {len(columns)} columns")
    return [table_row(columns), table_row([_RULES[a] for a in align])]


def table_row(cells: Sequence[object]) -> str:
    """One line of a table; cells are printed with `str` (format figures before)."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def print_table(
    columns: Sequence[str], align: str, rows: Iterable[Sequence[object]], flush: bool = False
) -> None:
    """The header, then each row as `rows` yields it (so a long run shows its rows as they
    come; with `flush`, at once). Every row must have a cell per column."""
    for line in table_header(columns, align):
        print(line, flush=flush)
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{len(row)} cells for {len(columns)} columns: {row!r}")
        print(table_row(row), flush=flush)


def per_operation(calls: Mapping[str, int], per: float, spec: str) -> str:
    """`GetItem 1.50, PutItem 2.00`: each operation's calls divided by `per` (the appends or
    messages they served), formatted with `spec`, by operation name."""
    return ", ".join(f"{name} {count / per:{spec}}" for name, count in sorted(calls.items()))
