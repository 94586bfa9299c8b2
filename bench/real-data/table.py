"""Markdown tables from bench/real-data JSONs (``run.py --json``; several files' scenarios are
merged, e.g. the two halves of a run split to keep each command short).

  uv run python ../bench/real-data/table.py /tmp/real.json [/tmp/real-2.json ...]

1. F1 of every variant x scoring mode per scenario (the winner per scenario in bold);
2. per scenario, for the pairs named by ``--pairs variant:mode,...`` (or every pair with
   ``--full``): window F1, precision, recall, specificity, and the event figures of
   ``kdgat.scoring.events`` (episodes detected, median delay to the verdict time, false alarms per
   hour of benign traffic);
3. which part of ``fusion_max`` / ``fusion_novelty`` / ``novelty_mean_or_max`` /
   ``novelty_timing`` flagged the test windows (``--decided``; the timing rule's column only for
   ``novelty_timing``);
4. ``--by-recording``: for those pairs, each test recording's false alarms per hour of its benign
   traffic; and for ``novelty_timing``, per recording, on its benign windows after the first
   PROFILE_WINDOWS (the traffic its payload profile was learned from), the false alarms per hour of
   the models, of the timing rule alone and of the windows only the rule flags, and the attack
   windows only the rule flags — on the test recordings (``timing_rule_test``) and on each training
   recording's validation windows with the models' bars fitted on the other training recordings'
   (``timing_rule_validation``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from run import TABLE_HEAD, table_row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", type=Path, nargs="+")
    ap.add_argument("--pairs", default="vi+calib:fusion_max,payload+calib:fusion_novelty")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--decided", action="store_true")
    ap.add_argument("--by-recording", action="store_true")
    a = ap.parse_args()
    res: dict[str, dict] = {}
    for path in a.json:
        res.update(json.loads(path.read_text())["results"])
    scen = list(res)
    variants = list(res[scen[0]])
    # a mode a variant does not score (novelty_timing without the payload features) is left out
    cols = [(v, m) for v in variants for m, r in res[scen[0]][v].items() if isinstance(r, dict)]
    print("| scenario | " + " | ".join(f"{v} {m}" for v, m in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for s in scen:
        f1 = [res[s].get(v, {}).get(m, {}).get("f1", float("nan")) for v, m in cols]
        best = max(x for x in f1 if x == x)
        cells = [f"**{x:.3f}**" if x == best else f"{x:.3f}" for x in f1]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()
    pairs = cols if a.full else [tuple(p.split(":")) for p in a.pairs.split(",")]
    print(TABLE_HEAD)
    for s in scen:
        for v, m in pairs:
            if m in res[s].get(v, {}):
                print(table_row(s, v, m, res[s][v][m]))
    if a.decided:
        print()
        print(
            "| scenario | variant | scoring | GAT only (attack) | VGAE only (attack) | both (attack) "
            "| timing rule only (attack) |"
        )
        print("|---|---|---|---:|---:|---:|---:|")
        for s in scen:
            for v, m in pairs:
                d = res[s].get(v, {}).get(m, {}).get("decided_by")
                if d:
                    timed = f"{d['timing_only']} ({d['timing_only_attack']})" if "timing_only" in d else "-"
                    print(
                        f"| {s} | {v} | {m} | {d['gat_only']} ({d['gat_only_attack']}) "
                        f"| {d['vgae_only']} ({d['vgae_only_attack']}) | {d['both']} ({d['both_attack']}) "
                        f"| {timed} |"
                    )
    if a.by_recording:
        by_recording(res, scen, pairs)


def _per_hour(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def by_recording(res: dict[str, dict], scen: list[str], pairs: list) -> None:
    """Section 4 of the module docstring."""
    print("\n| scenario | variant | scoring | test recording | benign hours | false alarms / h |")
    print("|---|---|---|---|---:|---:|")
    for s in scen:
        for v, m in pairs:
            for name, f in res[s].get(v, {}).get(m, {}).get("false_alarms_by_recording", {}).items():
                fa = _per_hour(f["false_alarms_per_hour"])
                print(f"| {s} | {v} | {m} | {name} | {f['benign_hours']:.3f} | {fa} |")
    for key, what in (("timing_rule_test", "test"), ("timing_rule_validation", "validation (leave one out)")):
        print(
            f"\n| scenario | variant | {what} recording | benign hours | models' false alarms / h "
            "| timing rule's | rule only | rule-only attack windows |"
        )
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for s in scen:
            for v in res[s]:
                rows = res[s][v].get("novelty_timing", {}).get(key, {})
                for name, r in rows.items():
                    attack = (
                        f"{r['rule_only_attack_windows']} of {r['attack_windows']}"
                        if "attack_windows" in r
                        else "-"
                    )
                    print(
                        f"| {s} | {v} | {name} | {r['benign_hours']:.3f} "
                        f"| {_per_hour(r.get('models_false_alarms_per_hour'))} "
                        f"| {_per_hour(r.get('rule_false_alarms_per_hour'))} "
                        f"| {_per_hour(r.get('rule_only_false_alarms_per_hour'))} | {attack} |"
                    )


if __name__ == "__main__":
    main()
