"""The catalogue's commands, answered without importing torch (``python -m kdgat`` hands them over
before the pipeline is imported):

``python -m kdgat runs --runs-root R [--where EXPR]… [--sort COL[:desc],…] [--columns C,…|all] [--json]``
    the table of all runs (a leaderboard); ``--catalogue DIR`` names the folder itself.
``python -m kdgat catalogue-append --stage-dir D --state S [--elapsed SECONDS] [--unless-recorded]``
    the row of one stage run (what the job epilog calls with the job's final state).
``python -m kdgat catalogue-compact --runs-root R``
    merges every file into one part at once, under the lock (the writers compact as rows accumulate;
    this is for a folder written one file per row before they did).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kdgat.contract import CATALOGUE_DIR

COMMANDS = ("runs", "catalogue-append", "catalogue-compact")
USER_ERROR = 2


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The catalogue's subcommands, on ``python -m kdgat``'s parser."""
    from kdgat.catalogue.row import STATES

    r = sub.add_parser("runs", help="the table of all runs (the catalogue): filter, sort, print")
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("--runs-root", type=Path, help=f"the runs root; its catalogue is <R>/{CATALOGUE_DIR}")
    where.add_argument("--catalogue", type=Path, help="the catalogue folder itself")
    r.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="EXPR",
        help="conditions joined by ',' (AND): dataset=hcrl_sa, f1>0.9, state!=COMPLETED, "
        "experiment~sweep-*, f1=null",
    )
    r.add_argument(
        "--sort", default=None, metavar="COL[:desc],…", help="e.g. f1:desc (nulls last; default finished_at)"
    )
    r.add_argument("--columns", default=None, metavar="C,…", help="the columns to show, or all")
    r.add_argument("--json", action="store_true", help="print the rows as a JSON array")
    a = sub.add_parser("catalogue-append", help="add the row of one finished stage run to its catalogue")
    a.add_argument("--stage-dir", required=True, type=Path, help="the stage's run dir")
    a.add_argument("--state", required=True, choices=STATES)
    a.add_argument("--elapsed", type=float, default=None, help="seconds it ran")
    a.add_argument(
        "--unless-recorded",
        action="store_true",
        help="write nothing when the catalogue holds this stage run in this state already",
    )
    a.add_argument("--recorded-by", default="epilog", choices=["pipeline", "study", "epilog"])
    c = sub.add_parser("catalogue-compact", help="merge the catalogue's row files into one, under a lock")
    c.add_argument("--runs-root", required=True, type=Path)


def run(args: argparse.Namespace) -> int:
    """Runs a parsed catalogue command; 0, or 2 with the reason on stderr."""
    from kdgat.catalogue.query import QueryError

    try:
        if args.command == "runs":
            return _runs(args)
        if args.command == "catalogue-append":
            return _append(args)
        return _compact(args)
    except QueryError as e:
        print(f"kdgat runs: {e}", file=sys.stderr)
        return USER_ERROR


def _runs(args: argparse.Namespace) -> int:
    from kdgat.catalogue.query import (
        DEFAULT_COLUMNS,
        format_table_of,
        parse_columns,
        parse_sort,
        parse_where,
        select_table,
        shown_columns_of_table,
    )
    from kdgat.catalogue.schema import jsonable
    from kdgat.catalogue.store import read_table

    # Without --sort: in the order the stages finished.
    where, sort = parse_where(args.where), parse_sort(args.sort) or [("finished_at", False)]
    columns = parse_columns(args.columns)
    folder: Path = args.catalogue if args.catalogue is not None else args.runs_root / CATALOGUE_DIR
    # Only the columns the answer needs are read: those asked for (all for --json without --columns),
    # those the conditions and the order name.
    shown = columns or (None if args.json else [*DEFAULT_COLUMNS, "experiment", "state"])
    needed = None if shown is None else [*shown, *(c.column for c in where), *(c for c, _ in sort)]
    table = select_table(read_table(folder, columns=needed), where, sort)
    if args.json:
        rows = (table.select(columns) if columns else table).to_pylist()
        print(json.dumps([jsonable(r) for r in rows], indent=2))
        return 0
    if not folder.is_dir():
        print(f"catalogue {folder}: none yet (a stage adds its row when it finishes)")
        return 0
    matching = f" matching {' and '.join(args.where)}" if args.where else ""
    print(f"catalogue {folder}: {table.num_rows} row(s){matching}")
    if table.num_rows:
        shown = shown_columns_of_table(table, columns)
        sys.stdout.write(format_table_of(table, shown) + "\n")
    return 0


def _append(args: argparse.Namespace) -> int:
    from kdgat.catalogue import NotAStage, record_stage

    try:
        path = record_stage(
            args.stage_dir,
            args.state,
            elapsed_s=args.elapsed,
            recorded_by=args.recorded_by,
            unless_recorded=args.unless_recorded,
        )
    except NotAStage as e:
        print(f"catalogue: no row: {e}")
        return 0
    print(f"catalogue: {'already recorded' if path is None else path}")
    return 0


def _compact(args: argparse.Namespace) -> int:
    from kdgat.catalogue.store import compact

    n, merged = compact(args.runs_root / CATALOGUE_DIR)
    print(f"catalogue: {n} file(s) merged into {merged}" if merged else "catalogue: nothing to merge")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m kdgat runs|catalogue-append|catalogue-compact …`` on its own (no pipeline imports)."""
    p = argparse.ArgumentParser(prog="python -m kdgat")
    add_commands(p.add_subparsers(dest="command", required=True))
    return run(p.parse_args(sys.argv[1:] if argv is None else argv))
