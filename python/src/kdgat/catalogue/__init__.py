"""One table of all runs: every finished stage (a sweep's array task, a study's trial too) adds one row
under the runs root, ``<runs root>/catalogue/`` — a folder of Parquet files, one row each, that pandas
(``pandas.read_parquet(dir)``), pyarrow (``pyarrow.dataset.dataset(dir)``) and DuckDB
(``SELECT * FROM read_parquet('<dir>/*.parquet')``) read as one table. The columns are the run
contract's (``catalogue.columns`` of ``kdgat/contract/run_contract.json``).

Who writes a row (one writer, :func:`record_stage`):

- ``python -m kdgat <stage>`` when the stage returns (COMPLETED) or raises (FAILED);
- the study worker after each trial (COMPLETED, PRUNED or FAILED; :mod:`kdgat.tune.worker`);
- the job's epilog, ``python -m kdgat catalogue-append --unless-recorded``, with the job's final
  state: the row of a stage whose pipeline never got to write one (killed, cancelled, the time
  limit; a requeued job writes none — its next attempt does).

Each writer compacts the folder as rows accumulate (:mod:`kdgat.catalogue.store`): under 64 one-row
files and a few merged parts at any size, so a reader opens about a hundred files at 100,000 rows.

Who reads it: ``python -m kdgat runs`` (:mod:`kdgat.catalogue.cli`), the runner's ``runner runs`` and
the run report's "in the catalogue" table.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kdgat.catalogue.row import STATES, NotAStage, locate, stage_row
from kdgat.catalogue.schema import COLUMNS, SCHEMA, SCORE_COLUMNS
from kdgat.catalogue.store import compact, read_rows, read_table, recorded_state, write_row

log = logging.getLogger("kdgat.catalogue")


def record_stage(
    stage_dir: Path,
    state: str,
    *,
    elapsed_s: float | None = None,
    trial: int | None = None,
    point: dict[str, Any] | None = None,
    recorded_by: str = "pipeline",
    unless_recorded: bool = False,
) -> Path | None:
    """Adds the row of the stage whose run dir is ``stage_dir`` to its catalogue; returns its file.

    ``unless_recorded``: write nothing when the catalogue already holds this stage run in ``state``
    (the epilog after a pipeline that wrote its own row). Returns None when nothing was written.
    See :func:`kdgat.catalogue.row.stage_row` for the arguments.
    """
    loc, row = stage_row(
        stage_dir, state, elapsed_s=elapsed_s, trial=trial, point=point, recorded_by=recorded_by
    )
    if unless_recorded and recorded_state(loc.catalogue, row) == state:
        return None
    return write_row(loc.catalogue, row)


def try_record_stage(stage_dir: Path, state: str, **kwargs: Any) -> Path | None:
    """:func:`record_stage` for the pipeline itself: a catalogue that cannot be written is said in the
    log, and never fails the stage."""
    try:
        path = record_stage(stage_dir, state, **kwargs)
    except NotAStage:
        return None
    except Exception as e:
        log.warning("the catalogue row of %s was not written: %s: %s", stage_dir, type(e).__name__, e)
        return None
    if path is not None:
        log.info("catalogue: %s %s -> %s", stage_dir, state, path)
    return path


__all__ = [
    "COLUMNS",
    "SCHEMA",
    "SCORE_COLUMNS",
    "STATES",
    "NotAStage",
    "compact",
    "locate",
    "read_rows",
    "read_table",
    "record_stage",
    "stage_row",
    "try_record_stage",
    "write_row",
]
