"""The five stages of the KD-GAT pipeline. Each reads its inputs from the run-dir layout
(``<run_root>/<dataset>/<model>_<scale>_<stage>/``) and writes ``metrics.json`` there.

preprocess   raw CAN files -> graph cache (data.preprocess_dataset)
autoencoder  VGAE on benign training windows; anomaly score per window
curriculum   GAT classifier trained easy -> hard, difficulty from the VGAE's anomaly score
distillation small GAT student from the large GAT teacher (KD loss, T and alpha)
evaluation   accuracy, precision, recall, F1, AUROC overall and per attack type -> metrics.json
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from kdgat import paths
from kdgat.config import PipelineConfig, default_num_workers
from kdgat.data import GraphSet, preprocess_dataset
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood, build_model
from kdgat.stages.common import (
    graph_cache_record,
    graph_params,
    load_model,
    load_splits,
    require_model,
    save_model,
    write_metrics,
)
from kdgat.stages.scoring import binary_scores, majority_baseline, scores_by_attack
from kdgat.training.modules import ClassifierModule, VGAEModule
from kdgat.training.run import choose_batch_size, fit, make_loader

log = logging.getLogger("kdgat.stages")


def _base(stage: str, model: str, scale: str, dataset: str) -> dict[str, Any]:
    return {"stage": stage, "model": model, "scale": scale, "dataset": dataset}


def run_preprocess(
    cfg: PipelineConfig, *, dataset: str, run_dir: Path, model: str, scale: str
) -> dict[str, Any]:
    d = cfg.data
    workers = default_num_workers() if d.num_workers is None else d.num_workers
    info = preprocess_dataset(dataset, graph_params(cfg), workers=max(1, workers))
    print(info.summary())
    write_metrics(
        run_dir,
        _base("preprocess", model, scale, dataset),
        None,
        cache_hit=info.hit,
        cache=str(info.path),
        graph_cache={
            "params_digest": info.params_digest,
            "source_digest": info.source_digest,
            "params": graph_params(cfg).to_json(),
        },
        graphs=info.graphs,
        messages=info.messages,
        malformed_rows=sum(int(f.get("malformed", 0)) for f in info.files),
        timings={"preprocess_seconds": round(info.seconds, 2)},
    )
    return {"cache_hit": info.hit}


@torch.no_grad()
def _anomaly_scores(vgae: GraphAutoencoderNeighborhood, data: GraphSet, cfg: PipelineConfig) -> torch.Tensor:
    loader = DataLoader(data, batch_size=256, shuffle=False)  # type: ignore[arg-type]
    return torch.cat([vgae.anomaly_score(b.x, b.edge_index, b.edge_attr, b.batch) for b in loader])


def _samples(data: GraphSet, n: int = 64) -> list[Data]:
    """The graphs batch sizing runs its trial passes on."""
    return [data[i] for i in range(min(n, len(data)))]


def _classifier_loss(m: torch.nn.Module, b: Batch) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(m(b.x, b.edge_index, b.edge_attr, b.batch), b.y.view(-1))


def _vgae_loss(m: torch.nn.Module, b: Batch) -> torch.Tensor:
    assert isinstance(m, GraphAutoencoderNeighborhood)
    return m.loss(b.x, b.edge_index, b.edge_attr, b.batch)


def run_autoencoder(
    cfg: PipelineConfig, *, dataset: str, run_dir: Path, model: str, scale: str
) -> dict[str, Any]:
    if model != "vgae":
        raise ValueError("the autoencoder stage trains the VGAE: use --model vgae")
    splits = load_splits(dataset, cfg)
    benign = splits.train.subset(torch.nonzero(splits.train.y == 0).view(-1))
    val_benign = splits.val.subset(torch.nonzero(splits.val.y == 0).view(-1))
    net = build_model("vgae", cfg, vocab_size=splits.vocab_size)
    assert isinstance(net, GraphAutoencoderNeighborhood)
    batch = choose_batch_size(cfg, net, _samples(benign), _vgae_loss)
    result = fit(
        VGAEModule(net, cfg.training.lr),
        cfg=cfg,
        run_dir=run_dir,
        train=benign,
        val=val_benign,
        batch=batch,
    )
    save_model(run_dir, net, model_name="vgae", scale=scale, cfg=cfg, vocab_size=splits.vocab_size)
    scores = _anomaly_scores(net.eval(), splits.test, cfg)
    y = splits.test.y.float()
    auroc = binary_scores(torch.sigmoid((scores - scores.mean()) / (scores.std() + 1e-6)), y)["auroc"]
    write_metrics(
        run_dir,
        _base("autoencoder", model, scale, dataset),
        result,
        scores={"anomaly_auroc": auroc},
        graph_cache=graph_cache_record(splits.meta),
    )
    return {"anomaly_auroc": auroc}


class CurriculumModule(ClassifierModule):
    """Trains on the easiest windows first and adds harder ones each epoch: from half the training
    set in the first epoch to all of it by the last. Difficulty: how wrong the VGAE's anomaly score
    is about a window (a benign window that reconstructs badly, an attack that reconstructs well)."""

    def __init__(
        self,
        model: GATWithJK,
        lr: float,
        *,
        train: GraphSet,
        order: torch.Tensor,
        cfg: PipelineConfig,
        class_weight: torch.Tensor,
    ) -> None:
        super().__init__(model, lr, class_weight=class_weight)
        self.train_set = train
        self.order = order
        self.cfg = cfg
        self.batch_size = cfg.training.batch_size

    def train_dataloader(self) -> DataLoader:
        epochs = max(1, self.cfg.training.max_epochs - 1)
        share = min(1.0, 0.5 + 0.5 * self.current_epoch / epochs)
        n = max(1, math.ceil(share * len(self.order)))
        return make_loader(self.train_set.subset(self.order[:n]), self.cfg, self.batch_size, shuffle=True)


def _class_weight(y: torch.Tensor) -> torch.Tensor:
    counts = torch.bincount(y.long(), minlength=2).float().clamp(min=1)
    return counts.sum() / (2 * counts)


def run_curriculum(
    cfg: PipelineConfig,
    *,
    dataset: str,
    run_dir: Path,
    model: str,
    scale: str,
    run_root: str | None,
) -> dict[str, Any]:
    if model != "gat":
        raise ValueError("the curriculum stage trains the GAT classifier: use --model gat")
    vgae_path = require_model(
        run_root, dataset, "vgae", (scale, "large", "small"), "autoencoder", "curriculum"
    )
    vgae = load_model(vgae_path)
    assert isinstance(vgae, GraphAutoencoderNeighborhood)
    splits = load_splits(dataset, cfg)
    scores = _anomaly_scores(vgae, splits.train, cfg)
    z = (scores - scores.median()) / (scores.std() + 1e-6)
    y = splits.train.y.float()
    difficulty = torch.where(y == 1, -z, z)  # attacks should score high, benign low
    order = torch.argsort(difficulty)
    net = build_model("gat", cfg, vocab_size=splits.vocab_size)
    assert isinstance(net, GATWithJK)
    module = CurriculumModule(
        net,
        cfg.training.lr,
        train=splits.train,
        order=order,
        cfg=cfg,
        class_weight=_class_weight(splits.train.y),
    )
    batch = choose_batch_size(cfg, net, _samples(splits.train), _classifier_loss)
    result = fit(module, cfg=cfg, run_dir=run_dir, train=None, val=splits.val, batch=batch)
    save_model(run_dir, net, model_name="gat", scale=scale, cfg=cfg, vocab_size=splits.vocab_size)
    scores_out = _evaluate(net, splits.test, splits.attack_types)
    write_metrics(
        run_dir,
        _base("curriculum", model, scale, dataset),
        result,
        scores=scores_out["overall"],
        graph_cache=graph_cache_record(splits.meta),
    )
    return scores_out["overall"]


def run_distillation(
    cfg: PipelineConfig,
    *,
    dataset: str,
    run_dir: Path,
    model: str,
    scale: str,
    run_root: str | None,
) -> dict[str, Any]:
    if model != "gat" or scale != "small":
        raise ValueError("distillation trains the small GAT student: use --model gat --scale small")
    teacher = load_model(require_model(run_root, dataset, "gat", ("large",), "curriculum", "distillation"))
    assert isinstance(teacher, GATWithJK)
    splits = load_splits(dataset, cfg)
    student = build_model("gat", cfg, vocab_size=splits.vocab_size)
    assert isinstance(student, GATWithJK)
    module = ClassifierModule(
        student,
        cfg.training.lr,
        class_weight=_class_weight(splits.train.y),
        teacher=teacher,
        temperature=cfg.kd.temperature,
        alpha=cfg.kd.alpha,
    )
    batch = choose_batch_size(cfg, student, _samples(splits.train), _classifier_loss)
    result = fit(module, cfg=cfg, run_dir=run_dir, train=splits.train, val=splits.val, batch=batch)
    save_model(run_dir, student, model_name="gat", scale=scale, cfg=cfg, vocab_size=splits.vocab_size)
    size = sum(p.numel() for p in student.parameters()) / sum(p.numel() for p in teacher.parameters())
    scores_out = _evaluate(student, splits.test, splits.attack_types)
    write_metrics(
        run_dir,
        _base("distillation", model, scale, dataset),
        result,
        scores=scores_out["overall"],
        student_to_teacher_size=round(size, 4),
        graph_cache=graph_cache_record(splits.meta),
    )
    return scores_out["overall"]


@torch.no_grad()
def _evaluate(net: GATWithJK, data: GraphSet, names: tuple[str, ...]) -> dict[str, Any]:
    net.eval()
    loader = DataLoader(data, batch_size=256, shuffle=False)  # type: ignore[arg-type]
    probs = []
    for b in loader:
        assert isinstance(b, Batch)
        probs.append(torch.softmax(net(b.x, b.edge_index, b.edge_attr, b.batch), -1)[:, 1])
    prob = torch.cat(probs)
    y, attack = data.y.view(-1), data.attack_type.view(-1)
    return {
        "overall": binary_scores(prob, y),
        "by_attack": scores_by_attack(prob, y, attack, names),
        "baseline": majority_baseline(y),
    }


def run_evaluation(
    cfg: PipelineConfig,
    *,
    dataset: str,
    run_dir: Path,
    model: str,
    scale: str,
    run_root: str | None,
) -> dict[str, Any]:
    if model != "gat":
        raise ValueError("evaluation scores the GAT classifier: use --model gat")
    source = "distillation" if scale == "small" else "curriculum"
    path = require_model(run_root, dataset, "gat", (scale,), source, "evaluation")
    net = load_model(path)
    assert isinstance(net, GATWithJK)
    splits = load_splits(dataset, cfg)
    out = _evaluate(net, splits.test, splits.attack_types)
    write_metrics(
        run_dir,
        _base("evaluation", model, scale, dataset),
        None,
        scores=out["overall"],
        scores_by_attack=out["by_attack"],
        baseline_majority=out["baseline"],
        evaluated_model=str(path),
        graph_cache=graph_cache_record(splits.meta),
    )
    return out["overall"]


def run_stage(
    stage: str, cfg: PipelineConfig, *, dataset: str, model: str, scale: str, run_root: str | None
) -> dict[str, Any]:
    run_dir = paths.run_dir(run_root, dataset, model, scale, stage)
    run_dir.mkdir(parents=True, exist_ok=True)
    L.seed_everything(cfg.training.seed, workers=True, verbose=False)
    if stage == "preprocess":
        return run_preprocess(cfg, dataset=dataset, run_dir=run_dir, model=model, scale=scale)
    if stage == "autoencoder":
        return run_autoencoder(cfg, dataset=dataset, run_dir=run_dir, model=model, scale=scale)
    runners = {
        "curriculum": run_curriculum,
        "distillation": run_distillation,
        "evaluation": run_evaluation,
    }
    if stage not in runners:
        raise ValueError(f"stage {stage!r} is unknown")
    return runners[stage](cfg, dataset=dataset, run_dir=run_dir, model=model, scale=scale, run_root=run_root)
