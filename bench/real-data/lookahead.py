"""bench/real-data/lookahead.py: how long past its last message each window's verdict waits, on the
real recordings, per feature variant of run.py (``kdgat.data.verdict``: the last message its
features read). No model, no label: the recordings' messages and the features' definitions only.

    cd python && uv run python ../bench/real-data/lookahead.py [--data DIR] [--json OUT]

Per variant, over every window of every distinct recording, the wait ``verdict time - last
message's time`` (s): its median, 90th and 99th percentile and largest value, and the share of
windows that wait at all; separately for a recording's first PROFILE_WINDOWS windows (which wait
for the profile and calibration windows) and for the rest. For the payload features also, over the
windows after the first PROFILE_WINDOWS: the profiled period of the ID whose message the window
reads last (the share of windows per band of periods, and the median wait in those periods).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from run import DATA, PROFILE_WINDOWS, VARIANTS, load_recordings  # the bench's own module, beside this file

from kdgat.data import read_can_file
from kdgat.data.features_payload import payload_profile
from kdgat.data.verdict import period_ratio_reads, profile_head

#: bands of the profiled period (s) of the ID a payload window reads last
BANDS = ((0.0, 0.05), (0.05, 0.2), (0.2, 0.6), (0.6, 2.0), (2.0, float("inf")))


def slowest_ids(paths: list[Path]) -> dict[str, Any]:
    """Per band of ``BANDS``: the share of windows (after the first PROFILE_WINDOWS of each
    recording) whose last read message is of an ID with a profiled period in it, and their median
    wait in periods of that ID."""
    periods, ratios = [], []
    for path in paths:
        m, _ = read_can_file(path)
        head = profile_head(PROFILE_WINDOWS, 100, 100, len(m))
        prof = payload_profile(m.can_id[:head], m.payload[:head], m.timestamp[:head])
        reads = period_ratio_reads(m.can_id, m.timestamp, prof)
        g = (len(m) - 100) // 100 + 1
        msg = (np.arange(g) * 100)[:, None] + np.arange(100)
        last = msg[np.arange(g), reads[msg].argmax(axis=1)][PROFILE_WINDOWS:]
        far = reads[msg].max(axis=1)[PROFILE_WINDOWS:]
        ends = (np.arange(g) * 100 + 99)[PROFILE_WINDOWS:]
        row = np.minimum(np.searchsorted(prof.ids, m.can_id[last]), len(prof.ids) - 1)
        period = prof.period[row]
        periods.append(period)
        ratios.append((m.timestamp[far] - m.timestamp[ends]) / period)
    p, r = np.concatenate(periods), np.concatenate(ratios)
    out = {}
    for lo, hi in BANDS:
        k = (p >= lo) & (p < hi)
        out[f"{lo}-{hi} s"] = {
            "share": float(k.mean()),
            "median_wait_periods": float(np.median(r[k])) if k.any() else None,
        }
    return out


def summary(wait: np.ndarray) -> dict[str, Any]:
    if len(wait) == 0:
        return {"windows": 0}
    return {
        "windows": len(wait),
        "waiting_share": float((wait > 0).mean()),
        "median_s": float(np.median(wait)),
        "p90_s": float(np.quantile(wait, 0.9)),
        "p99_s": float(np.quantile(wait, 0.99)),
        "max_s": float(wait.max()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if not args.data.is_dir():
        # The recordings are not in the repository: the public HCRL and can-train-and-test
        # recordings converted to Parquet (bench/real-data/README.md lists them); development machines
        # keep them in ../shared/data/can-real.
        print(
            f"no recordings at {args.data}: pass --data DIR, the public HCRL and can-train-and-test "
            "recordings as Parquet (bench/real-data/README.md; dev machines: ../shared/data/can-real)",
            file=sys.stderr,
        )
        return 2
    recs = load_recordings(args.data, 1000)
    kept = {r.name for r in recs}
    out: dict[str, Any] = {}
    print("| variant | windows | part | waiting | median wait (s) | p90 | p99 | largest |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for variant in VARIANTS:
        head, rest = [], []
        for r in recs:
            wait = r.verdict[variant] - r.times[1]
            head.append(wait[:PROFILE_WINDOWS])
            rest.append(wait[PROFILE_WINDOWS:])
        parts = {
            f"first {PROFILE_WINDOWS} windows": summary(np.concatenate(head)),
            "after them": summary(np.concatenate(rest)),
        }
        out[variant] = parts
        for part, s in parts.items():
            if s["windows"]:
                print(
                    f"| {variant} | {s['windows']} | {part} | {s['waiting_share']:.1%} | {s['median_s']:.4f} "
                    f"| {s['p90_s']:.4f} | {s['p99_s']:.4f} | {s['max_s']:.3f} |"
                )
    slow = slowest_ids([p for p in sorted(args.data.glob("*.parquet")) if p.stem in kept])
    print(
        "\n| payload window: period of the ID read last | windows | median wait (periods) |\n|---|---:|---:|"
    )
    for band, s in slow.items():
        wait = "-" if s["median_wait_periods"] is None else f"{s['median_wait_periods']:.2f}"
        print(f"| {band} | {s['share']:.1%} | {wait} |")
    if args.json:
        doc = {"recordings": len(recs), "variants": out, "payload_slowest_id": slow}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
