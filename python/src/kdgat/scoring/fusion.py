"""Window scoring modes and their fitting on validation windows of the training recordings.

``gat``              the GAT's attack probability, threshold 0.5 (the published classifier)
``vgae``             the VGAE's anomaly score, standardised by the benign validation windows
                     (median, std) and squashed with a sigmoid; threshold = the one with the best
                     F1 on the validation windows
``fusion_learned``   logistic regression on [logit(GAT probability), standardised VGAE score]
                     fitted (class-balanced) on the validation windows; threshold as for ``vgae``
``fusion_weighted``  a * GAT probability + (1 - a) * sigmoid(standardised VGAE score), the
                     score-level weighted average of the published KD-GAT code; a from
                     0, 0.1, ..., 1 and the threshold chosen together by validation F1
``fusion_max``       attack when either model says so: max of the GAT's decision score (threshold
                     0.5) and the VGAE's (threshold as for ``vgae``), each mapped so that its
                     threshold is 0.5 — the classifier for the attacks it was trained on, the
                     autoencoder for what it never saw
``fusion_novelty``   ``fusion_max`` with the VGAE's threshold beyond the benign validation
                     windows' tail instead of its best-F1 threshold (:func:`novelty_bar`: the
                     highest benign score plus its distance to the tenth highest): the GAT decides
                     what it was trained on, the VGAE adds only windows more novel than the benign
                     traffic it was checked on, with room for the larger benign traffic it will
                     judge (no attack label picks that threshold, so it does not trade the GAT's
                     known attacks against the VGAE's false alarms). The
                     GAT's own threshold is 0.5 unless the validation windows say a higher one
                     flags them better (:func:`gat_threshold`): a GAT that calls benign windows of
                     its own recordings attacks is held to a stricter bar; never a lower one, since
                     no validation window shows what a lower bar would add on unseen attacks
``novelty_mean_or_max``  ``fusion_novelty`` on two VGAE scores of each window, OR-ed: the mean of
                     its node losses and the largest (one spoofed ID among thirty moves the mean
                     little and the largest much; random-ID fuzzing of a new vehicle the reverse).
                     Its VGAE input is ``[N, 2]``: column 0 the mean-pooled score, 1 the max-pooled
                     (:func:`vgae_pools` says which a mode needs); still no threshold picked by an
                     attack label
``novelty_timing``   ``novelty_mean_or_max``, plus every window whose *timing score* is above
                     ``timing_threshold`` (0): with the payload features, the window's most negative
                     ``period_ratio`` column, negated — above 0 when two consecutive messages of one
                     of its IDs came closer than half that ID's profiled period, which periodic
                     traffic does not do and an injected extra message of a legitimate ID (spoofing,
                     targeted fuzzing) does. A declared rule, not fitted: the half period is the
                     column's own definition (:mod:`kdgat.data.features_payload`); its timing input
                     is ``[N]`` (:func:`kdgat.scoring.outputs.timing_scores`)

Every mode but ``gat`` can have a *warm-up* (``Scorer.warmup_windows``, ``evaluation.warmup_windows``;
opt-in, 0 by default): the first windows of each recording get no verdict (score 0, benign). There
an ID's first message in the stream has no earlier one, so its period, regularity and payload
change are unknown, and with per-recording calibration they are the reference traffic that the
calibration already takes as attack-free. The scorer reads each window's position in its recording
(:func:`kdgat.scoring.outputs.window_ranks`), never a label; an attack inside the warm-up is missed.

Nothing here sees a test label: :func:`fit_scorer` takes the validation windows' scores and labels
and returns a frozen :class:`Scorer` that is then applied to any other windows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, get_args

import torch
from torch import Tensor

from kdgat.config import ScoringMode
from kdgat.scoring.metrics import f1_from_counts, f1_score

#: The modes the pipeline config offers (``evaluation.scoring``), each fitted by :func:`fit_scorer`.
SCORING_MODES: tuple[str, ...] = get_args(ScoringMode)
#: The modes that read the VGAE's mean and largest node loss, and the one that also reads timing.
_BY_MEAN_OR_MAX = ("novelty_mean_or_max", "novelty_timing")
_NOVELTY = ("fusion_novelty", *_BY_MEAN_OR_MAX)
_EPS = 1e-6


def needs_timing(mode: str) -> bool:
    """Whether ``mode`` reads the windows' timing scores (and so the payload features)."""
    return mode == "novelty_timing"


def vgae_pools(mode: str) -> tuple[str, ...]:
    """The VGAE scores a mode reads, in the column order of its ``vgae_score``: none for ``gat``,
    the mean node loss for the others, and the mean and the largest for ``novelty_mean_or_max``."""
    if mode == "gat":
        return ()
    return ("mean", "max") if mode in _BY_MEAN_OR_MAX else ("mean",)


def _cuts(score: Tensor, y: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    """``score`` sorted descending, and for each position the F1 of flagging every window up to it
    (``pos`` attack windows in all); -1 where the next score is the same (ties go together)."""
    order = torch.argsort(score, descending=True)
    s, t = score[order], y[order]
    tp = torch.cumsum(t, 0)  # attack windows among the first k flagged
    flagged = torch.arange(1, len(t) + 1)
    f1 = f1_from_counts(tp, flagged - tp, pos - tp)
    last_of_tie = torch.ones(len(s), dtype=torch.bool)
    last_of_tie[:-1] = s[1:] != s[:-1]
    return s, torch.where(last_of_tie, f1, torch.full_like(f1, -1.0))


def best_f1_threshold(score: Tensor, y: Tensor) -> float:
    """The threshold ``t`` (predict attack when ``score >= t``) with the highest F1 on (score, y);
    a midpoint between neighbouring distinct scores. 0.5 when ``y`` has no attack window."""
    score, y = score.double().flatten(), y.long().flatten()
    pos = int(y.sum())
    if pos == 0 or len(y) == 0:
        return 0.5
    s, f1 = _cuts(score, y, pos)
    i = int(torch.argmax(f1))
    if i + 1 < len(s):
        return float((s[i] + s[i + 1]) / 2)
    return float(s[i] - _EPS)


#: How far down the benign validation windows' tail :func:`novelty_bar` measures its spacing.
NOVELTY_TAIL_RANK = 10


def novelty_bar(benign_z: Tensor, rank: int = NOVELTY_TAIL_RANK) -> float:
    """The novelty threshold on standardised VGAE scores of benign validation windows: the highest
    plus its distance to the ``rank``-th highest (the lowest, with fewer windows).

    The highest of n benign windows is itself exceeded by about one benign window in n, so on test
    traffic larger than the validation set some benign windows pass it by chance. The spacing of the
    top scores measures the tail's own scale: on an exponential tail the distance from the highest to
    the tenth is that scale times 1 + 1/2 + ... + 1/9 (2.83), and one such distance above the highest
    is exceeded by one benign window in about 17 n (e^2.83; the median over validation draws, in a
    simulation of 2,000 draws of 3,000 windows; the mean is one in 5.5 n). Reads benign scores only."""
    if rank < 1:
        raise ValueError(f"novelty_bar rank {rank} is invalid: expected the rank of a window, >= 1")
    z = benign_z.double().flatten().sort(descending=True).values
    if len(z) == 0:
        raise ValueError("novelty_bar needs at least one benign validation window's score")
    top = float(z[0])
    return top + (top - float(z[min(rank, len(z)) - 1]))


def gat_threshold(gat_prob: Tensor, y: Tensor) -> float:
    """The GAT's threshold for the novelty modes: among 0.5 and the midpoints between neighbouring
    distinct validation probabilities above it, the one whose "attack when ``p >= t``" has the best
    F1 on (gat_prob, y); of equal F1s the lowest, so 0.5 unless a higher bar flags the validation
    windows strictly better. 0.5 when ``y`` has no attack window or no probability reaches 0.5."""
    p, y = gat_prob.double().flatten(), y.long().flatten()
    pos, keep = int(y.sum()), p >= 0.5
    if pos == 0 or not bool(keep.any()):
        return 0.5
    s, f1 = _cuts(p[keep], y[keep], pos)  # the last cut flags every window >= 0.5: t = 0.5
    i = len(f1) - 1 - int(torch.argmax(f1.flip(0)))  # the last best cut: the lowest threshold
    return 0.5 if i == len(s) - 1 else float((s[i] + s[i + 1]) / 2)


def _threshold_at_half(s: Tensor, t: float) -> Tensor:
    """``s`` in [0, 1] mapped monotonically (piecewise linear) so that the threshold ``t`` lands on
    0.5: ``s >= t`` exactly where the result is ``>= 0.5``."""
    return torch.where(s < t, 0.5 * s / max(t, _EPS), 0.5 + 0.5 * (s - t) / max(1 - t, _EPS))


def _logit(p: Tensor) -> Tensor:
    p = p.double().clamp(_EPS, 1 - _EPS)
    return torch.log(p) - torch.log1p(-p)


@dataclass(frozen=True)
class Scorer:
    """A fitted scoring mode: ``score(gat_prob, vgae_score)`` in [0, 1], attack when ``>= threshold``."""

    mode: str
    threshold: float = 0.5
    vgae_centre: float = 0.0
    vgae_scale: float = 1.0
    alpha: float = 1.0
    weights: tuple[float, float, float] = (1.0, 0.0, 0.0)
    vgae_threshold: float = 0.5
    # novelty_mean_or_max: the max-pooled VGAE score's centre, scale and novelty threshold
    max_centre: float = 0.0
    max_scale: float = 1.0
    max_threshold: float = 0.5
    # novelty_timing: a window is flagged when its timing score is above this
    timing_threshold: float = 0.0
    # the novelty modes: the GAT flags a window when its probability is at least this
    gat_threshold: float = 0.5
    # a recording's first this many windows get no verdict (score 0): the detector's warm-up
    warmup_windows: int = 0

    def _z(self, vgae_score: Tensor) -> Tensor:
        return (vgae_score.double() - self.vgae_centre) / self.vgae_scale

    def novel(self, vgae_score: Tensor) -> Tensor:
        """``fusion_novelty`` / ``novelty_mean_or_max``: the windows beyond the benign validation
        windows' tail (:func:`novelty_bar`; by either pooled score for the latter), bool ``[N]``."""
        if self.mode in _BY_MEAN_OR_MAX:
            mean, top = vgae_score[:, 0], vgae_score[:, 1]
            by_max = (top.double() - self.max_centre) / self.max_scale > self.max_threshold
            return (self._z(mean) > self.vgae_threshold) | by_max
        return self._z(vgae_score) > self.vgae_threshold

    def by_gat(self, gat_prob: Tensor) -> Tensor:
        """The windows the GAT flags, bool ``[N]``: probability at least ``gat_threshold`` (0.5
        but in the novelty modes, whose fit may raise it)."""
        return gat_prob.double() >= self.gat_threshold

    def _gat_decision(self, gat_prob: Tensor) -> Tensor:
        # the GAT's probability with gat_threshold moved to 0.5 (the identity at 0.5)
        return _threshold_at_half(gat_prob.double(), self.gat_threshold)

    def timed(self, timing: Tensor) -> Tensor:
        """``novelty_timing``: the windows whose timing score is above the threshold, bool ``[N]``."""
        return timing.double() > self.timing_threshold

    def timed_benign_share(self, timing: Tensor, y: Tensor) -> float:
        """The share of the benign windows (``y == 0``) that the timing rule flags: on validation
        windows, the false alarms the declared rule adds (0 when there is no benign window)."""
        benign = y.view(-1) == 0
        return float(self.timed(timing)[benign].double().mean()) if bool(benign.any()) else 0.0

    def in_warmup(self, rank: Tensor | None, n: int) -> Tensor:
        """The windows inside their recording's warm-up (``rank``: each window's position in its
        recording, 0 = first), bool ``[n]``; none when the scorer has no warm-up."""
        if self.warmup_windows == 0:
            return torch.zeros(n, dtype=torch.bool)
        if rank is None:
            raise ValueError(
                f"this scorer has a warm-up of {self.warmup_windows} windows and needs each window's "
                "position in its recording (rank=; kdgat.scoring.outputs.window_ranks)"
            )
        return rank.view(-1) < self.warmup_windows

    def score(
        self,
        gat_prob: Tensor | None,
        vgae_score: Tensor | None,
        timing: Tensor | None = None,
        rank: Tensor | None = None,
    ) -> Tensor:
        """Each window's score in [0, 1] (attack when ``>= threshold``); 0 inside the warm-up."""
        out = self._score(gat_prob, vgae_score, timing)
        return torch.where(self.in_warmup(rank, len(out)), torch.zeros_like(out), out)

    def _score(self, gat_prob: Tensor | None, vgae_score: Tensor | None, timing: Tensor | None) -> Tensor:
        if self.mode in _NOVELTY:
            assert gat_prob is not None and vgae_score is not None, f"{self.mode} needs both models"
            # vgae_threshold is here novelty_bar of the benign validation windows' standardised scores
            out = torch.maximum(self._gat_decision(gat_prob), self.novel(vgae_score).double())
            if needs_timing(self.mode):
                assert timing is not None, f"{self.mode} needs the windows' timing scores"
                out = torch.maximum(out, self.timed(timing).double())
            return out
        if self.mode == "fusion_max":
            assert gat_prob is not None and vgae_score is not None, "fusion_max needs both models"
            v = Scorer("vgae", self.vgae_threshold, self.vgae_centre, self.vgae_scale)
            return torch.maximum(gat_prob.double(), v.decision_score(None, vgae_score).double())
        if self.mode == "gat":
            assert gat_prob is not None, "scoring gat needs the GAT's probabilities"
            return gat_prob.double()
        assert vgae_score is not None, f"scoring {self.mode} needs the VGAE's anomaly scores"
        if self.mode == "vgae":
            return torch.sigmoid(self._z(vgae_score))
        assert gat_prob is not None, f"scoring {self.mode} needs the GAT's probabilities"
        if self.mode == "fusion_weighted":
            return self.alpha * gat_prob.double() + (1 - self.alpha) * torch.sigmoid(self._z(vgae_score))
        w0, w1, b = self.weights
        return torch.sigmoid(w0 * _logit(gat_prob) + w1 * self._z(vgae_score) + b)

    def decision_score(
        self,
        gat_prob: Tensor | None,
        vgae_score: Tensor | None,
        timing: Tensor | None = None,
        rank: Tensor | None = None,
    ) -> Tensor:
        """:meth:`score` mapped monotonically (piecewise linear) so that the threshold lands on 0.5:
        the same ranking (AUROC), and "attack when >= 0.5" is this scorer's decision."""
        s = self.score(gat_prob, vgae_score, timing, rank)
        return _threshold_at_half(s, self.threshold).clamp(0, 1).float()

    def predict(
        self,
        gat_prob: Tensor | None,
        vgae_score: Tensor | None,
        timing: Tensor | None = None,
        rank: Tensor | None = None,
    ) -> Tensor:
        return (self.score(gat_prob, vgae_score, timing, rank) >= self.threshold).long()

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _logistic(features: Tensor, y: Tensor, steps: int = 200) -> tuple[float, float, float]:
    """Class-balanced logistic regression (L2 1e-3) by LBFGS: weights of 2 features and a bias."""
    y = y.double()
    pos = y.sum().clamp(min=1)
    neg = (1 - y).sum().clamp(min=1)
    sample_w = torch.where(y == 1, 0.5 / pos, 0.5 / neg)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")
    f = features.double()

    def closure() -> Tensor:
        opt.zero_grad()
        z = f @ w[:2] + w[2]
        loss = (sample_w * torch.nn.functional.binary_cross_entropy_with_logits(z, y, reduction="none")).sum()
        loss = loss + 1e-3 * (w[:2] ** 2).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    with torch.enable_grad():
        opt.step(closure)  # type: ignore[no-untyped-call]
    a, b, c = (float(v) for v in w.detach())
    return a, b, c


def fit_scorer(
    mode: str,
    y_val: Tensor,
    gat_prob: Tensor | None = None,
    vgae_score: Tensor | None = None,
    *,
    warmup_windows: int = 0,
) -> Scorer:
    """Fit ``mode`` on the validation windows (labels ``y_val``, the models' outputs on them).
    ``warmup_windows``: the scorer's warm-up (every mode but ``gat``, the published classifier, which
    judges every window); the fit itself reads every validation window."""
    if warmup_windows < 0:
        raise ValueError(f"warmup_windows {warmup_windows} is invalid: expected >= 0 windows")
    scorer = _fit(mode, y_val, gat_prob, vgae_score)
    return scorer if mode == "gat" else replace(scorer, warmup_windows=warmup_windows)


def _fit(mode: str, y_val: Tensor, gat_prob: Tensor | None, vgae_score: Tensor | None) -> Scorer:
    if mode not in SCORING_MODES:
        raise ValueError(f"scoring mode {mode!r} is unknown; expected one of {', '.join(SCORING_MODES)}")
    if mode == "gat":
        return Scorer("gat")
    if vgae_score is None:
        raise ValueError(f"scoring {mode} needs the VGAE's anomaly scores of the validation windows")
    if mode in _BY_MEAN_OR_MAX:
        if vgae_score.dim() != 2 or vgae_score.shape[1] != 2:
            raise ValueError(f"scoring {mode} needs [N, 2] VGAE scores (mean, max pooled)")
        by_mean = _fit("fusion_novelty", y_val, gat_prob, vgae_score[:, 0])
        by_max = _fit("fusion_novelty", y_val, gat_prob, vgae_score[:, 1])
        # novelty_timing's timing threshold is declared (Scorer.timing_threshold), not fitted
        return Scorer(
            mode,
            threshold=0.5,
            gat_threshold=by_mean.gat_threshold,
            vgae_centre=by_mean.vgae_centre,
            vgae_scale=by_mean.vgae_scale,
            vgae_threshold=by_mean.vgae_threshold,
            max_centre=by_max.vgae_centre,
            max_scale=by_max.vgae_scale,
            max_threshold=by_max.vgae_threshold,
        )
    y = y_val.long().flatten()
    benign = vgae_score.double()[y == 0]
    ref = benign if len(benign) >= 2 else vgae_score.double()
    centre = float(ref.median())
    scale = float(ref.std()) if len(ref) >= 2 and float(ref.std()) > _EPS else 1.0
    base = Scorer(mode, vgae_centre=centre, vgae_scale=scale)
    vgae_t = best_f1_threshold(
        Scorer("vgae", vgae_centre=centre, vgae_scale=scale).score(None, vgae_score), y
    )
    if mode == "vgae":
        return Scorer(**{**base.to_json(), "threshold": vgae_t})
    if gat_prob is None:
        raise ValueError(f"scoring {mode} needs the GAT's probabilities of the validation windows")
    if mode == "fusion_max":
        return Scorer(mode, threshold=0.5, vgae_centre=centre, vgae_scale=scale, vgae_threshold=vgae_t)
    if mode == "fusion_novelty":
        bar = novelty_bar((ref - centre) / scale)
        return Scorer(
            mode,
            threshold=0.5,
            vgae_centre=centre,
            vgae_scale=scale,
            vgae_threshold=bar,
            gat_threshold=gat_threshold(gat_prob, y),
        )
    if mode == "fusion_weighted":
        best: tuple[float, float, float] = (-1.0, 1.0, 0.5)
        for a in [i / 10 for i in range(11)]:
            cand = Scorer(mode, vgae_centre=centre, vgae_scale=scale, alpha=a)
            s = cand.score(gat_prob, vgae_score)
            t = best_f1_threshold(s, y)
            f1 = f1_score(s >= t, y)
            if f1 > best[0] + 1e-12:
                best = (f1, a, t)
        return Scorer(mode, threshold=best[2], vgae_centre=centre, vgae_scale=scale, alpha=best[1])
    feats = torch.stack([_logit(gat_prob), (vgae_score.double() - centre) / scale], dim=1)
    weights = _logistic(feats, y)
    fitted = Scorer(mode, vgae_centre=centre, vgae_scale=scale, weights=weights)
    return Scorer(
        **{**fitted.to_json(), "threshold": best_f1_threshold(fitted.score(gat_prob, vgae_score), y)}
    )
