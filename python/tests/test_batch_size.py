import logging

import pytest
import torch
import torch.nn.functional as F

from kdgat.config import build_config
from kdgat.data import load_graphs
from kdgat.models import build_model
from kdgat.stages.common import graph_params
from kdgat.training.batch_size import binsearch, trial_batch_size


def test_binsearch_finds_the_largest_fitting_size_like_lightning() -> None:
    calls: list[int] = []

    def fits(b: int) -> bool:
        calls.append(b)
        return b <= 777

    best, trials = binsearch(fits)
    assert best == 777
    # Lightning's BatchSizeFinder(mode="binsearch") from 2: 2..512 fit (9), 1024 fails (1), then
    # bisection of (512, 1024) — the same sequence: 19 trials.
    assert trials == len(calls) == 19
    assert calls[:10] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_binsearch_when_nothing_fits_or_everything_fits() -> None:
    assert binsearch(lambda b: False) == (0, 2)  # 2 fails, then 1 is tried
    assert binsearch(lambda b: True, limit=64)[0] == 64


def _loss(m: torch.nn.Module, b: object) -> torch.Tensor:
    return F.cross_entropy(m(b.x, b.edge_index, b.edge_attr, b.batch), b.y.view(-1))  # type: ignore[attr-defined]


def test_trial_on_cpu_searches_real_passes_against_the_budget(
    pipeline_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    splits = load_graphs("synth", graph_params(build_config("small")))
    samples = [splits.train[i] for i in range(32)]
    model = build_model("gat", build_config("small"), vocab_size=splits.vocab_size)
    with caplog.at_level(logging.INFO, logger="kdgat.training"):
        small = trial_batch_size(model, samples, _loss, device=torch.device("cpu"), budget_mb=64)
        large = trial_batch_size(model, samples, _loss, device=torch.device("cpu"), budget_mb=256)
    assert small.mode == "trial" and small.max_fit is not None and large.max_fit is not None
    assert small.batch_size == int(small.max_fit * 0.85)
    assert 2 <= small.max_fit < large.max_fit  # a bigger budget fits a bigger batch
    assert (
        f"Trial batch size: max_fit={small.max_fit}, safe={small.batch_size} (probe: budget)"
        in caplog.messages
    )


def test_trial_fails_clearly_when_nothing_fits(pipeline_env: dict[str, str]) -> None:
    splits = load_graphs("synth", graph_params(build_config("small")))
    model = build_model("gat", build_config("large"), vocab_size=splits.vocab_size)
    with pytest.raises(RuntimeError, match=r"raise training\.memory_budget_mb"):
        trial_batch_size(model, [splits.train[0]], _loss, device=torch.device("cpu"), budget_mb=1)
