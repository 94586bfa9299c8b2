"""How a window is scored: the GAT, the VGAE's anomaly score, or a fusion of both (and, in
``novelty_timing``, a timing rule on the payload features) (``evaluation.scoring``), with every
parameter and threshold fitted on validation windows; and the event-level figures of scored windows
(episodes detected, delay to each window's verdict time, false alarms per hour, per recording too:
``events``); window F1 (``metrics``: the one
implementation, the benches' too)."""

from kdgat.scoring.events import EventFigures, event_figures, false_alarms_by_recording, window_times
from kdgat.scoring.fusion import (
    SCORING_MODES,
    Scorer,
    best_f1_threshold,
    fit_scorer,
    gat_threshold,
    needs_timing,
    novelty_bar,
    vgae_pools,
)
from kdgat.scoring.metrics import binary_counts, f1_from_counts, f1_score
from kdgat.scoring.outputs import gat_probabilities, timing_scores, window_ranks

__all__ = [
    "SCORING_MODES",
    "EventFigures",
    "Scorer",
    "best_f1_threshold",
    "binary_counts",
    "event_figures",
    "f1_from_counts",
    "f1_score",
    "false_alarms_by_recording",
    "fit_scorer",
    "gat_probabilities",
    "gat_threshold",
    "needs_timing",
    "novelty_bar",
    "timing_scores",
    "vgae_pools",
    "window_ranks",
    "window_times",
]
