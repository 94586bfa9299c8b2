"""The catalogue's columns as Arrow types: read from the run contract (``catalogue.columns`` of
``kdgat/contract/run_contract.json``), never declared here a second time."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from kdgat.contract import CATALOGUE_COLUMNS, CONTRACT

#: Written into every file's schema metadata: what wrote it.
SCHEMA_NAME = CONTRACT.catalogue.schema_name

_ARROW: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}

#: Column names in the contract's order.
COLUMNS: tuple[str, ...] = tuple(c.name for c in CATALOGUE_COLUMNS)
#: name -> contract type (string, int64, float64, bool, timestamp).
TYPES: dict[str, str] = {c.name: c.type for c in CATALOGUE_COLUMNS}
#: The columns read from metrics.json (``scores.<name>``, else the top-level ``<name>``).
SCORE_COLUMNS: tuple[str, ...] = tuple(c.name for c in CATALOGUE_COLUMNS if c.kind == "score")

SCHEMA = pa.schema(
    [pa.field(c.name, _ARROW[c.type], nullable=True) for c in CATALOGUE_COLUMNS],
    metadata={"kdgat.catalogue": SCHEMA_NAME},
)


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """A row as JSON takes it: timestamps in ISO 8601 (UTC, ``Z``), NaN as null."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, datetime):
            v = v.astimezone(UTC).isoformat().replace("+00:00", "Z")
        elif isinstance(v, float) and math.isnan(v):
            v = None
        out[k] = v
    return out
