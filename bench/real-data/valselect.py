"""bench/real-data/valselect.py: which of two trained runs would the validation windows alone choose?

Reads the per-window outputs that ``run.py --scores DIR`` saved for two runs of the same scenarios and
seed (say ``--max-train 4000`` and ``8000``) and, per scenario, cross-fits a scoring mode on the
validation windows: fitted on one random half of them, applied to the other half, both ways, over
``--halvings`` random halvings. It prints each run's mean out-of-fold F1 and the run with the higher
one. No test window is read, so the pick is one a choice made on validation data could have made.

    cd python && uv run python ../bench/real-data/valselect.py --a DIR [DIR ...] --b DIR [DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

from kdgat.scoring import SCORING_MODES, fit_scorer, needs_timing, vgae_pools


def outputs(dirs: list[Path]) -> dict[str, Path]:
    """``<scenario>__<variant>`` -> its saved outputs, over ``dirs`` (a later folder wins)."""
    return {f.stem: f for d in dirs for f in sorted(d.glob("*__*.npz"))}


def f1(pred: np.ndarray, y: np.ndarray) -> float:
    tp = int(((pred == 1) & (y == 1)).sum())
    wrong = int((pred != y).sum())
    return 2 * tp / max(2 * tp + wrong, 1)


def rows(t: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor | None:
    return None if t is None else t[mask]


def crossfit_f1(path: Path, mode: str, halvings: int, seed: int) -> tuple[float, int, int]:
    """Mean out-of-fold F1 of ``mode`` on the validation windows of one run; also their count and
    how many are attack windows."""
    with np.load(path) as z:
        v = {k: torch.from_numpy(z[k]) for k in z.files if k.startswith("val_")}
    y = v["val_y"].long()
    pools = vgae_pools(mode)
    vgae = None
    if len(pools) == 1:
        vgae = v[f"val_vgae_{pools[0]}"]
    elif pools:
        vgae = torch.stack([v[f"val_vgae_{p}"] for p in pools], 1)
    timing = v["val_timing"] if needs_timing(mode) else None
    rng = np.random.default_rng(seed)
    scores = []
    for _ in range(halvings):
        first = torch.from_numpy(rng.random(len(y)) < 0.5)
        pred = torch.zeros_like(y)
        for fit, judge in ((first, ~first), (~first, first)):
            scorer = fit_scorer(mode, y[fit], gat_prob=v["val_gat"][fit], vgae_score=rows(vgae, fit))
            pred[judge] = scorer.predict(v["val_gat"][judge], rows(vgae, judge), rows(timing, judge))
        scores.append(f1(pred.numpy(), y.numpy()))
    return float(np.mean(scores)), len(y), int(y.sum())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, nargs="+", required=True, help="run A's --scores folder(s)")
    ap.add_argument("--b", type=Path, nargs="+", required=True, help="run B's --scores folder(s)")
    ap.add_argument("--mode", default="novelty_timing", choices=SCORING_MODES)
    ap.add_argument("--halvings", type=int, default=20, help="random halvings of the validation windows")
    ap.add_argument("--seed", type=int, default=12345, help="seed of the halvings (the same for A and B)")
    args = ap.parse_args()
    a, b = outputs(args.a), outputs(args.b)
    both = [k for k in a if k in b]
    if not both:
        print(f"no <scenario>__<variant>.npz is in both {args.a} and {args.b}", file=sys.stderr)
        return 2
    print("| run | validation windows (attack) | A: out-of-fold F1 | B | higher |\n|---|---:|---:|---:|---|")
    for k in both:
        fa, n, na = crossfit_f1(a[k], args.mode, args.halvings, args.seed)
        fb, n_b, nb = crossfit_f1(b[k], args.mode, args.halvings, args.seed)
        if (n, na) != (n_b, nb):
            print(f"{k}: A and B differ in validation windows ({n}/{na}, {n_b}/{nb})", file=sys.stderr)
            return 2
        higher = "A" if fa > fb else "B" if fb > fa else "equal"
        print(f"| {k} | {n} ({na}) | {fa:.4f} | {fb:.4f} | {higher} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
