"""The leaderboard's questions: ``--where`` (a small filter language, parsed here, never evaluated as
code), ``--sort`` and ``--columns``, and the table text.

``--where``: conditions joined by ``,`` (AND); several ``--where`` options are ANDed too::

    dataset=hcrl_sa            equal (a number column compares as a number: f1=0.9)
    state!=COMPLETED           not equal
    f1>0.9   f1>=0.9   elapsed_s<600   finished_at>=2026-11-01
    experiment~sweep-*         a glob on a text column (* any text, ? one character)
    f1=null   f1!=null         absent / present

A null value matches no comparison but ``=null``. A value cannot hold a comma.
``--sort f1:desc,elapsed_s``: keys in order, ascending unless ``:desc``; nulls last either way
(``runs`` without ``--sort``: by ``finished_at``).
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kdgat.catalogue.schema import COLUMNS, TYPES

#: What ``runs`` shows without ``--columns`` (columns that are null in every row shown are left out).
DEFAULT_COLUMNS: tuple[str, ...] = (
    "experiment",
    "run_id",
    "stage_id",
    "point_index",
    "trial",
    "point",
    "state",
    "f1",
    "accuracy",
    "auroc",
    "anomaly_auroc",
    "val_loss",
    "elapsed_s",
    "cost_expected",
    "cost_unit",
    "git_commit",
    "finished_at",
)

_CONDITION = re.compile(r"^\s*([a-z][a-z0-9_]*)\s*(>=|<=|!=|=|>|<|~)\s*(.*?)\s*$")
_NUMERIC = {"int64", "float64"}


class QueryError(ValueError):
    """A --where, --sort or --columns the catalogue cannot answer; the message says what to write."""


@dataclass(frozen=True)
class Condition:
    column: str
    op: str
    value: Any  # None for null

    def __call__(self, row: dict[str, Any]) -> bool:
        v = row.get(self.column)
        if isinstance(v, float) and math.isnan(v):
            v = None
        if self.value is None:
            return (v is None) == (self.op == "=")
        if v is None:
            return False
        if self.op == "~":
            return fnmatch.fnmatchcase(str(v), str(self.value))
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "=": lambda a, b: a == b,
            "!=": lambda a, b: a != b,
            ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b,
            "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b,
        }
        return ops[self.op](v, self.value)

    def mask(self, table: pa.Table) -> pa.ChunkedArray:
        """Where the condition holds in ``table`` (no nulls: a null is False), as :meth:`__call__`
        says for one row. NaN reads as null."""
        col = _nan_as_null(table.column(self.column))
        if self.value is None:
            absent = pc.is_null(col)
            return absent if self.op == "=" else pc.invert(absent)
        if self.op == "~":
            # A glob on the column's distinct values (fnmatch's own rules), then membership.
            values = pc.unique(col).drop_null().to_pylist()
            hits = [v for v in values if fnmatch.fnmatchcase(str(v), str(self.value))]
            return pc.fill_null(pc.is_in(col, value_set=pa.array(hits, type=col.type)), False)
        kernels = {
            "=": pc.equal,
            "!=": pc.not_equal,
            ">": pc.greater,
            ">=": pc.greater_equal,
            "<": pc.less,
            "<=": pc.less_equal,
        }
        value = pa.scalar(self.value, type=pa.float64() if TYPES[self.column] in _NUMERIC else col.type)
        if TYPES[self.column] in _NUMERIC:
            col = pc.cast(col, pa.float64())
        return pc.fill_null(kernels[self.op](col, value), False)


def _column(name: str, what: str) -> str:
    if name not in TYPES:
        raise QueryError(f"{what}: no column {name!r}; the columns are {', '.join(COLUMNS)}")
    return name


def _value(column: str, op: str, text: str) -> Any:
    kind = TYPES[column]
    if text == "null":
        if op not in ("=", "!="):
            raise QueryError(f"--where {column}{op}null: null goes with = or != only")
        return None
    if op == "~":
        if kind != "string":
            raise QueryError(f"--where {column}~{text}: ~ (a glob) is for text columns; {column} is {kind}")
        return text
    if kind in _NUMERIC:
        try:
            return float(text)
        except ValueError:
            raise QueryError(f"--where {column}{op}{text}: {column} is a number, {text!r} is not") from None
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise QueryError(f"--where {column}{op}{text}: {column} is true or false")
        if op not in ("=", "!="):
            raise QueryError(f"--where {column}{op}{text}: a true/false column takes = or != only")
        return text.lower() == "true"
    if kind == "timestamp":
        try:
            t = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(
                f"--where {column}{op}{text}: expected a date or time like 2026-11-01 or 2026-11-01T12:00"
            ) from None
        return t if t.tzinfo else t.replace(tzinfo=UTC)
    return text


def parse_where(expressions: Iterable[str]) -> list[Condition]:
    """``["dataset=hcrl_sa,f1>0.9", "state=COMPLETED"]`` -> three conditions (all must hold)."""
    out: list[Condition] = []
    for expr in expressions:
        for part in expr.split(","):
            if not part.strip():
                continue
            m = _CONDITION.match(part)
            if not m:
                raise QueryError(
                    f"--where {part.strip()!r}: expected COLUMN OP VALUE with OP one of = != > >= < <= ~ "
                    "(e.g. dataset=hcrl_sa, f1>0.9, experiment~sweep-*)"
                )
            column = _column(m.group(1), "--where")
            if m.group(3) == "":
                raise QueryError(
                    f"--where {part.strip()!r}: no value (write {column}=null for an absent one)"
                )
            out.append(Condition(column, m.group(2), _value(column, m.group(2), m.group(3))))
    return out


def parse_sort(text: str | None) -> list[tuple[str, bool]]:
    """``"f1:desc,elapsed_s"`` -> [("f1", True), ("elapsed_s", False)] (column, descending)."""
    keys: list[tuple[str, bool]] = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, _, order = part.strip().partition(":")
        if order not in ("", "asc", "desc"):
            raise QueryError(f"--sort {part.strip()}: the order is asc or desc")
        keys.append((_column(name, "--sort"), order == "desc"))
    return keys


def parse_columns(text: str | None) -> list[str] | None:
    """``"experiment,f1"`` -> the columns to show; ``all`` -> every column; None -> the default."""
    if text is None or not text.strip():
        return None
    if text.strip() == "all":
        return list(COLUMNS)
    return [_column(c.strip(), "--columns") for c in text.split(",") if c.strip()]


def select(
    rows: Sequence[dict[str, Any]], where: Sequence[Condition], sort: Sequence[tuple[str, bool]]
) -> list[dict[str, Any]]:
    """The rows every condition holds for, sorted by the keys (stable; nulls last)."""
    out = [r for r in rows if all(c(r) for c in where)]
    for column, desc in reversed(sort):
        present = [r for r in out if not _is_null(r.get(column))]
        absent = [r for r in out if _is_null(r.get(column))]
        out = sorted(present, key=_by(column), reverse=desc) + absent
    return out


def _nan_as_null(col: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_floating(col.type):
        return pc.if_else(pc.is_nan(col), pa.scalar(None, type=col.type), col)
    return col


def select_table(table: pa.Table, where: Sequence[Condition], sort: Sequence[tuple[str, bool]]) -> pa.Table:
    """:func:`select` on a whole table at once (Arrow's kernels, no row objects): the same rows in the
    same order (a stable sort, nulls and NaN last for each key)."""
    for c in where:
        table = table.filter(c.mask(table))
    if sort and table.num_rows > 1:
        keyed = table.select([c for c, _ in sort])
        keyed = pa.table({c: _nan_as_null(keyed.column(c)) for c in keyed.column_names})
        order = pc.sort_indices(
            keyed,
            sort_keys=[(c, "descending" if desc else "ascending", "at_end") for c, desc in sort],
        )
        table = table.take(order)
    return table


def _by(column: str) -> Callable[[dict[str, Any]], Any]:
    return lambda row: row[column]


def _is_null(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def shown_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return list(columns)
    return [c for c in DEFAULT_COLUMNS if any(not _is_null(r.get(c)) for r in rows)] or [
        "experiment",
        "state",
    ]


def shown_columns_of_table(table: pa.Table, columns: Sequence[str] | None) -> list[str]:
    """:func:`shown_columns` of a table's rows."""
    if columns is not None:
        return list(columns)
    present = [c for c in DEFAULT_COLUMNS if _nan_as_null(table.column(c)).null_count < table.num_rows]
    return present or ["experiment", "state"]


_SHORT = {"git_commit": 10, "spec_hash": 10, "environment_lock_hash": 10, "row_key": 16}


def format_cell(column: str, v: Any) -> str:
    """One value as the table prints it: - for null, times to the second, hashes shortened."""
    if _is_null(v):
        return "-"
    if isinstance(v, datetime):
        return v.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.1f}" if column == "elapsed_s" else f"{v:.4g}"
    text = str(v)
    if column in _SHORT:
        return text[: _SHORT[column]]
    return text


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A fixed-width text table, numbers right-aligned."""
    cells = [[format_cell(c, r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    right = [TYPES[c] in _NUMERIC for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    return "\n".join([line(columns), *(line(r) for r in cells)])


def _cells(column: str, values: pa.ChunkedArray) -> pa.Array:
    """:func:`format_cell` of every value of a column, as Arrow strings: a kernel per column where
    Arrow has one, else each distinct value formatted once."""
    values = _nan_as_null(values)
    kind = TYPES[column]
    if kind == "timestamp":
        # To the second (Arrow's %S of a microsecond timestamp carries the fraction).
        seconds = pc.cast(pc.floor_temporal(values, unit="second"), pa.timestamp("s", tz="UTC"))
        text = pc.strftime(seconds, format="%Y-%m-%d %H:%M:%S", locale="C")
    elif kind == "int64":
        text = pc.cast(values, pa.string())
    elif kind == "bool":
        text = pc.if_else(values, "true", "false")
    elif kind == "string":
        text = pc.utf8_slice_codeunits(values, 0, _SHORT[column]) if column in _SHORT else values
    else:
        distinct = pc.unique(values).drop_null()
        spec = ".1f" if column == "elapsed_s" else ".4g"
        shown = pa.array([format(v, spec) for v in distinct.to_pylist()], type=pa.string())
        text = pc.take(shown, pc.index_in(values, value_set=distinct))
    text = pc.fill_null(text, "-")
    return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text


def format_table_of(table: pa.Table, columns: Sequence[str]) -> str:
    """:func:`format_table` of a table's rows (what ``runs`` prints), column by column with Arrow's
    string kernels: the same text."""
    head: list[str] = []
    padded: list[pa.Array] = []
    for c in columns:
        cells = _cells(c, table.column(c))
        width = max(len(c), pc.max(pc.utf8_length(cells)).as_py() or 0)
        numeric = TYPES[c] in _NUMERIC
        head.append(c.rjust(width) if numeric else c.ljust(width))
        padded.append(pc.utf8_lpad(cells, width) if numeric else pc.utf8_rpad(cells, width))
    lines = pc.utf8_rtrim_whitespace(pc.binary_join_element_wise(*padded, "  "))
    return "\n".join(["  ".join(head).rstrip(), *lines.to_pylist()])
