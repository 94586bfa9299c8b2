"""What the stages share: model files, inputs of earlier stages, metrics.json, the graphs batch sizing
tries, the losses it tries them with and the class weights."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch_geometric.data import Batch, Data

from kdgat import paths
from kdgat.config import PipelineConfig
from kdgat.contract import METRICS_FILE, MODEL_FILE
from kdgat.data import GraphParams, GraphSet, GraphSplits, load_graphs
from kdgat.models import GATWithJK, GraphAutoencoderNeighborhood, build_model
from kdgat.tracking.redact import redact_uri
from kdgat.training.fit import FitResult

log = logging.getLogger("kdgat.stages")


class StageInputError(RuntimeError):
    """An input of a stage is missing: names the stage (and command) to run first."""


def graph_params(cfg: PipelineConfig) -> GraphParams:
    return GraphParams.from_config(cfg.data)


def load_splits(dataset: str, cfg: PipelineConfig) -> GraphSplits:
    return load_graphs(dataset, graph_params(cfg))


def graph_cache_record(meta: dict[str, Any]) -> dict[str, Any]:
    """What ``metrics.json`` keeps of the graph cache a stage read (key ``graph_cache``): the
    runner compares it before a later run reads this stage's model (same parameters, same files)."""
    return {
        "params_digest": meta.get("params_digest"),
        "source_digest": meta.get("source_digest"),
        "params": meta.get("params"),
    }


def save_model(
    run_dir: Path,
    model: torch.nn.Module,
    *,
    model_name: str,
    scale: str,
    cfg: PipelineConfig,
    vocab_size: int,
) -> Path:
    path = run_dir / MODEL_FILE
    if not is_rank_zero():
        return path
    torch.save(
        {
            "state_dict": model.state_dict(),
            "model": model_name,
            "scale": scale,
            "config": stored_config_json(cfg),
            "vocab_size": vocab_size,
        },
        path,
    )
    return path


def stored_config_json(cfg: PipelineConfig) -> str:
    """The config as kept in a model file (read back by :func:`load_model`): the MLflow URI without
    its credentials (:mod:`kdgat.tracking.redact`); a model file is no place for a password."""
    doc = cfg.model_dump(mode="json")
    uri = doc["tracking"]["mlflow"]["uri"]
    if uri:
        doc["tracking"]["mlflow"]["uri"] = redact_uri(uri)
    return json.dumps(doc)


def load_model(path: Path) -> GATWithJK | GraphAutoencoderNeighborhood:
    blob = torch.load(path, weights_only=True, map_location="cpu")
    cfg = PipelineConfig.model_validate_json(blob["config"])
    model = build_model(blob["model"], cfg, vocab_size=int(blob["vocab_size"]))
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def require_model(
    run_root: str | None,
    dataset: str,
    model: str,
    scales: tuple[str, ...],
    stage: str,
    needed_by: str,
) -> Path:
    """The model file an earlier stage wrote, or a StageInputError saying which stage to run."""
    for scale in scales:
        p = paths.run_dir(run_root, dataset, model, scale, stage) / MODEL_FILE
        if p.exists():
            return p
    where = paths.run_dir(run_root, dataset, model, scales[0], stage)
    raise StageInputError(
        f"{needed_by} needs the {model} model of stage `{stage}` ({where / MODEL_FILE} is missing): "
        f"run `python -m kdgat {stage} --model {model} --scale {scales[0]} --dataset {dataset}` first"
    )


def is_rank_zero() -> bool:
    """False on every DDP rank but the first: only rank 0 writes the run's files."""
    return getattr(rank_zero_only, "rank", 0) == 0


def write_metrics(run_dir: Path, base: dict[str, Any], fit: FitResult | None = None, **extra: Any) -> Path:
    """Writes ``metrics.json`` atomically (rank 0 only under DDP)."""
    path = run_dir / METRICS_FILE
    if not is_rank_zero():
        return path
    doc: dict[str, Any] = {**base, "status": "complete", "finished_at": time.time()}
    if fit is not None:
        doc.update(
            epochs=fit.epochs,
            graphs_per_sec=round(fit.graphs_per_sec, 2),
            data_wait_fraction=round(fit.data_wait_fraction, 4),
            peak_cpu_rss_mb=round(fit.peak_cpu_rss_mb, 1),
            peak_gpu_mem_mb=None if fit.peak_gpu_mem_mb is None else round(fit.peak_gpu_mem_mb, 1),
            batch_size=fit.batch.batch_size,
            batch_size_mode=fit.batch.mode,
            batch_size_trial={"max_fit": fit.batch.max_fit, "trials": fit.batch.trials}
            if fit.batch.mode == "trial"
            else None,
            timings={"fit_seconds": round(fit.seconds, 2)},
            precision={
                "requested": fit.precision.requested,
                "used": fit.precision.used,
                "reason": fit.precision.reason,
            },
            fit_attempts=fit.attempts,
            oom_backoffs=sum(1 for a in fit.attempts if a.get("outcome") == "oom"),
            memory_snapshot=fit.memory_snapshot,
            world_size=fit.world_size,
            val_loss=None if fit.val_loss is None else round(fit.val_loss, 6),
        )
    doc.update(extra)
    tmp = path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(doc, indent=2, default=_default))
    tmp.replace(path)
    log.info("metrics written to %s", path)
    return path


def _default(o: Any) -> Any:
    if hasattr(o, "__dataclass_fields__"):
        return asdict(o)
    if isinstance(o, torch.Tensor):
        return o.tolist()
    raise TypeError(type(o))


def samples(data: GraphSet, n: int = 64) -> list[Data]:
    """The graphs batch sizing runs its trial passes on."""
    return [data[i] for i in range(min(n, len(data)))]


def classifier_loss(m: torch.nn.Module, b: Batch) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(m(b.x, b.edge_index, b.edge_attr, b.batch), b.y.view(-1))


def vgae_loss(m: torch.nn.Module, b: Batch) -> torch.Tensor:
    assert isinstance(m, GraphAutoencoderNeighborhood)
    return m.loss(b.x, b.edge_index, b.edge_attr, b.batch)


def class_weight(y: torch.Tensor) -> torch.Tensor:
    counts = torch.bincount(y.long(), minlength=2).float().clamp(min=1)
    return counts.sum() / (2 * counts)
