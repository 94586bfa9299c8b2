"""``python -m kdgat.report --input report-input.json --out DIR``: the run report (run by
``kdgat-runner report``). Its own entry point so that drawing a report never imports torch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kdgat.report.run_report import main_run_report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kdgat.report", description=__doc__)
    p.add_argument(
        "--input", required=True, type=Path, help="report-input.json written by kdgat-runner report"
    )
    p.add_argument("--out", required=True, type=Path, help="directory for report.html and the PNGs")
    args = p.parse_args(argv)
    return main_run_report(args.input, args.out)


if __name__ == "__main__":
    sys.exit(main())
