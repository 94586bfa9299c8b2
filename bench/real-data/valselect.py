"""bench/real-data/valselect.py: which of two trained runs would the validation windows alone choose?

Reads the per-window outputs that ``run.py --scores DIR`` saved for two runs of the same scenarios and
seed (say ``--max-train 4000`` and ``8000``) and, per scenario, cross-fits a scoring mode on the
validation windows (windows of the training recordings, never trained on). ``--folds recordings``
(the default, for outputs that name each validation window's recording): leave one training
recording out — the mode fitted on the validation windows of the other training recordings and
applied to that recording's, for each in turn, so each pick is judged on recordings its fit did not
see; ``--folds halvings`` (and outputs saved before the recordings were): fitted on one random half
of the validation windows and applied to the other half, both ways, over ``--halvings`` random
halvings. It prints each run's out-of-fold F1 and the run with the higher one. The pick
(:func:`pick`) loads only the ``val_*`` arrays of the saved outputs: no test window, label or
output enters it (``python/tests/test_bench_selection.py`` shuffles the test labels and replaces
the test outputs, and the picks stay the same). ``--test`` then reports what the pick is worth,
read only after every pick is made: each run's test F1 and the picked run's test figures (the mode
fitted on all the run's validation windows, as ``run.py`` scores it: F1, precision, recall,
specificity, episodes detected, delay to the verdict time, false alarms an hour); ``--json`` also
writes them.

    cd python && uv run python ../bench/real-data/valselect.py --a DIR [DIR ...] --b DIR [DIR ...] \
        [--test] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from kdgat.scoring import SCORING_MODES, f1_score, fit_scorer, needs_timing, vgae_pools

sys.path.insert(0, str(Path(__file__).parent))
from run import TABLE_HEAD, score_modes, table_row  # the bench's own module, beside this file


def outputs(dirs: list[Path]) -> dict[str, Path]:
    """``<scenario>__<variant>`` -> its saved outputs, over ``dirs`` (a later folder wins)."""
    return {f.stem: f for d in dirs for f in sorted(d.glob("*__*.npz"))}


def rows(t: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor | None:
    return None if t is None else t[mask]


class Validation(NamedTuple):
    """One run's saved outputs on its validation windows, as ``mode`` reads them; ``recording``:
    each window's training recording (None in outputs saved before run.py kept it)."""

    y: torch.Tensor
    gat: torch.Tensor
    vgae: torch.Tensor | None
    timing: torch.Tensor | None
    recording: torch.Tensor | None = None


def validation(path: Path, mode: str) -> Validation:
    """The ``val_*`` arrays of one run's saved outputs (nothing else is loaded) as ``mode`` reads them."""
    with np.load(path) as z:
        v = {k[4:]: torch.from_numpy(z[k]) for k in z.files if k.startswith("val_")}
    pools = vgae_pools(mode)
    vgae = None
    if len(pools) == 1:
        vgae = v[f"vgae_{pools[0]}"]
    elif pools:
        vgae = torch.stack([v[f"vgae_{p}"] for p in pools], 1)
    timing = v["timing"] if needs_timing(mode) else None
    return Validation(v["y"].long(), v["gat"], vgae, timing, v.get("recording"))


def _out_of_fold(val: Validation, mode: str, fit: torch.Tensor, pred: torch.Tensor) -> None:
    """``pred`` of the windows not in ``fit`` by ``mode`` fitted on those in it."""
    judge = ~fit
    scorer = fit_scorer(mode, val.y[fit], gat_prob=val.gat[fit], vgae_score=rows(val.vgae, fit))
    pred[judge] = scorer.predict(val.gat[judge], rows(val.vgae, judge), rows(val.timing, judge))


def crossfit_f1(
    path: Path, mode: str, halvings: int, seed: int, folds: str = "recordings"
) -> tuple[float, int, int, str]:
    """Out-of-fold F1 of ``mode`` on the validation windows of one run; also their count, how many
    are attack windows, and the folds used: ``recordings`` (leave one training recording out, when
    the outputs name at least two) or ``halvings`` (the mean over random halvings)."""
    val = validation(path, mode)
    y = val.y
    if folds == "recordings" and val.recording is not None and len(torch.unique(val.recording)) >= 2:
        pred = torch.zeros_like(y)
        for r in torch.unique(val.recording).tolist():
            _out_of_fold(val, mode, val.recording != r, pred)
        return f1_score(pred, y), len(y), int(y.sum()), "recordings"
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(halvings):
        first = torch.from_numpy(rng.random(len(y)) < 0.5)
        pred = torch.zeros_like(y)
        _out_of_fold(val, mode, first, pred)
        _out_of_fold(val, mode, ~first, pred)
        scores.append(f1_score(pred, y))
    return float(np.mean(scores)), len(y), int(y.sum()), "halvings"


def pick(
    a: dict[str, Path], b: dict[str, Path], mode: str, halvings: int, seed: int, folds: str = "recordings"
) -> dict[str, dict[str, Any]]:
    """Per run in both ``a`` and ``b``: each one's out-of-fold validation F1 and the higher
    (``higher``: ``A``, ``B`` or ``equal``). Reads the ``val_*`` arrays only (:func:`validation`)."""
    runs: dict[str, dict[str, Any]] = {}
    for k in [k for k in a if k in b]:
        fa, n, na, how = crossfit_f1(a[k], mode, halvings, seed, folds)
        fb, n_b, nb, how_b = crossfit_f1(b[k], mode, halvings, seed, folds)
        if (n, na) != (n_b, nb):
            raise ValueError(f"{k}: A and B differ in validation windows ({n}/{na}, {n_b}/{nb})")
        higher = "A" if fa > fb else "B" if fb > fa else "equal"
        runs[k] = {
            "val_windows": n,
            "val_attack": na,
            "folds": how if how == how_b else f"{how}/{how_b}",
            "oof_f1_a": fa,
            "oof_f1_b": fb,
            "higher": higher,
        }
    return runs


def test_figures(path: Path, mode: str, merge_gap_s: float) -> dict[str, Any]:
    """``mode`` fitted on all the run's validation windows and applied to its test windows, as
    ``run.py`` scores it (the VGAE's mean pool, no warm-up)."""
    with np.load(path) as z:
        saved = {k: z[k] for k in z.files}
    return score_modes(saved, vgae_pool="mean", merge_gap_s=merge_gap_s, warmup=0)[mode]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, nargs="+", required=True, help="run A's --scores folder(s)")
    ap.add_argument("--b", type=Path, nargs="+", required=True, help="run B's --scores folder(s)")
    ap.add_argument("--mode", default="novelty_timing", choices=SCORING_MODES)
    ap.add_argument(
        "--folds",
        choices=["recordings", "halvings"],
        default="recordings",
        help="leave one training recording out (outputs that name them), or random halvings",
    )
    ap.add_argument("--halvings", type=int, default=20, help="random halvings of the validation windows")
    ap.add_argument("--seed", type=int, default=12345, help="seed of the halvings (the same for A and B)")
    ap.add_argument(
        "--test",
        action="store_true",
        help="after every pick: each run's test F1, the picked run's figures",
    )
    ap.add_argument("--merge-gap-s", type=float, default=2.0, help="as run.py's: one episode's largest gap")
    ap.add_argument("--json", type=Path, default=None, help="write the picks (and with --test the figures)")
    args = ap.parse_args()
    a, b = outputs(args.a), outputs(args.b)
    both = [k for k in a if k in b]
    if not both:
        print(f"no <scenario>__<variant>.npz is in both {args.a} and {args.b}", file=sys.stderr)
        return 2
    try:
        runs = pick(a, b, args.mode, args.halvings, args.seed, args.folds)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(
        "| run | validation windows (attack) | folds | A: out-of-fold F1 | B | higher |\n"
        "|---|---:|---|---:|---:|---|"
    )
    for k, r in runs.items():
        print(
            f"| {k} | {r['val_windows']} ({r['val_attack']}) | {r['folds']} | {r['oof_f1_a']:.4f} "
            f"| {r['oof_f1_b']:.4f} | {r['higher']} |"
        )
    if args.test:
        # the test windows are read only now, once every pick above is made; "equal" keeps A
        print("\n| run | test F1, A | B | picked |\n|---|---:|---:|---|")
        for k, r in runs.items():
            r["a"], r["b"] = (test_figures(x[k], args.mode, args.merge_gap_s) for x in (a, b))
            r["picked"] = "b" if r["higher"] == "B" else "a"
            print(f"| {k} | {r['a']['f1']:.4f} | {r['b']['f1']:.4f} | {r['picked'].upper()} |")
        print("\nthe picked runs:\n" + TABLE_HEAD)
        for k, r in runs.items():
            scenario, variant = k.split("__")
            print(table_row(scenario, variant, args.mode, r[r["picked"]]))
    if args.json:
        doc = {"mode": args.mode, "folds": args.folds, "halvings": args.halvings, "seed": args.seed}
        doc |= {"a": [str(d) for d in args.a]}
        doc |= {"b": [str(d) for d in args.b], "runs": runs}
        args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
