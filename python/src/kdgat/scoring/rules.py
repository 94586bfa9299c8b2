"""A declared rule checked against the models, recording by recording: ``novelty_timing``'s timing
rule (flag a window where two messages of a periodic ID came closer than half its period) is not
fitted, so nothing on the training side bounds its false alarms; these figures show, per recording,
where it raises false alarms that the models do not, and what it earns there.

Per recording, on its benign windows from window ``after`` on (``after`` = the profile windows:
the traffic the recording's payload profile was learned from is left out, so the figures are on
benign traffic the rule was not fitted on), false alarms per hour of benign traffic
(:func:`kdgat.scoring.events.false_alarms_by_recording`) of

- ``models``: the windows the models flag (``novelty_timing`` without its rule: the GAT at its bar
  or the VGAE's novelty by either pooled score),
- ``rule``: the windows the timing rule flags,
- ``rule_only``: those the rule flags and the models do not (the alarms the rule adds);

and, on the recording's attack windows (all of them), ``attack_windows`` and
``rule_only_attack_windows`` (the attack windows only the rule finds). :func:`rule_by_recording`
takes a fitted scorer; :func:`rule_validation` fits the models' part on the validation windows of
every training recording but one and applies it to that one's, for each in turn (leave one
recording out): a check on the training side that reads no test window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from kdgat.scoring.events import false_alarms_by_recording
from kdgat.scoring.fusion import Scorer, fit_scorer

#: The mode whose rule these figures check.
RULE_MODE = "novelty_timing"


def rule_by_recording(
    scorer: Scorer,
    *,
    recording: npt.ArrayLike,
    window: npt.ArrayLike,
    y: npt.ArrayLike,
    t_first: npt.ArrayLike,
    t_last: npt.ArrayLike,
    gat_prob: Tensor,
    vgae_score: Tensor,
    timing: Tensor,
    rank: Tensor | None = None,
    after: int = 0,
) -> dict[int, dict[str, Any]]:
    """The module docstring's figures of a fitted ``novelty_timing`` scorer on scored windows (one
    entry per window; ``window``: its index in its recording; ``rank``: as the scorer's warm-up
    reads it, None without one), by recording."""
    rec, win, lab = np.asarray(recording, np.int64), np.asarray(window, np.int64), np.asarray(y).astype(bool)
    judged = ~scorer.in_warmup(rank, len(rec))
    models = ((scorer.by_gat(gat_prob) | scorer.novel(vgae_score)) & judged).numpy()
    rule = (scorer.timed(timing) & judged).numpy()
    parts = {"models": models, "rule": rule, "rule_only": rule & ~models}
    late = win >= after
    keep = {"recording": rec[late], "y": lab[late], "t_first": np.asarray(t_first)[late]}
    keep["t_last"] = np.asarray(t_last)[late]
    out: dict[int, dict[str, Any]] = {}
    for part, flagged in parts.items():
        for r, f in false_alarms_by_recording(**keep, pred=flagged[late]).items():
            row = out.setdefault(
                r, {"benign_windows": f["benign_windows"], "benign_hours": f["benign_hours"]}
            )
            row[f"{part}_false_alarms_per_hour"] = f["false_alarms_per_hour"]
    for r in np.unique(rec[lab]).tolist():
        mine = lab & (rec == r)
        row = out.setdefault(int(r), {"benign_windows": 0, "benign_hours": 0.0})
        row["attack_windows"] = int(mine.sum())
        row["rule_only_attack_windows"] = int((parts["rule_only"] & mine).sum())
    return out


def rule_validation(
    *,
    recording: npt.ArrayLike,
    window: npt.ArrayLike,
    y: Tensor,
    t_first: npt.ArrayLike,
    t_last: npt.ArrayLike,
    gat_prob: Tensor,
    vgae_score: Tensor,
    timing: Tensor,
    after: int = 0,
) -> dict[int, dict[str, Any]]:
    """:func:`rule_by_recording` on each training recording's validation windows, the scorer fitted
    on the other training recordings' validation windows (``vgae_score``: ``[N, 2]``, the pools of
    ``novelty_timing``). A recording without benign validation windows, or the only one, is left
    out (nothing to fit on without it)."""
    rec = np.asarray(recording, np.int64)
    yv = y.long().view(-1)
    out: dict[int, dict[str, Any]] = {}
    for r in np.unique(rec).tolist():
        held = rec == r
        h, rest = torch.from_numpy(held), torch.from_numpy(~held)
        if not bool(rest.any()) or not bool((yv[h] == 0).any()):
            continue
        scorer = fit_scorer(RULE_MODE, yv[rest], gat_prob=gat_prob[rest], vgae_score=vgae_score[rest])
        out |= rule_by_recording(
            scorer,
            recording=rec[held],
            window=np.asarray(window)[held],
            y=yv[h].numpy(),
            t_first=np.asarray(t_first)[held],
            t_last=np.asarray(t_last)[held],
            gat_prob=gat_prob[h],
            vgae_score=vgae_score[h],
            timing=timing[h],
            after=after,
        )
    return out
