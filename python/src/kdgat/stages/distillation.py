"""distillation: the small GAT student from the large GAT teacher (KD loss, T and alpha)."""

from __future__ import annotations

from typing import Any

from kdgat.models import GATWithJK, build_model
from kdgat.stages.common import (
    class_weight,
    classifier_loss,
    graph_cache_record,
    load_model,
    load_splits,
    require_model,
    samples,
    save_model,
    write_metrics,
)
from kdgat.stages.context import StageContext
from kdgat.stages.scoring import evaluate
from kdgat.training.fit import choose_batch_size, fit
from kdgat.training.modules import ClassifierModule


def run(ctx: StageContext) -> dict[str, Any]:
    cfg, dataset = ctx.cfg, ctx.dataset
    if ctx.model != "gat" or ctx.scale != "small":
        raise ValueError("distillation trains the small GAT student: use --model gat --scale small")
    teacher_path = require_model(ctx.run_root, dataset, "gat", ("large",), "curriculum", "distillation")
    teacher = load_model(teacher_path)
    assert isinstance(teacher, GATWithJK)
    splits = load_splits(dataset, cfg)
    student = build_model("gat", cfg, vocab_size=splits.vocab_size)
    assert isinstance(student, GATWithJK)
    module = ClassifierModule(
        student,
        cfg.training.lr,
        class_weight=class_weight(splits.train.y),
        teacher=teacher,
        temperature=cfg.kd.temperature,
        alpha=cfg.kd.alpha,
    )
    batch = choose_batch_size(cfg, student, samples(splits.train), classifier_loss)
    result = fit(module, cfg=cfg, run_dir=ctx.run_dir, train=splits.train, val=splits.val, batch=batch)
    save_model(ctx.run_dir, student, model_name="gat", scale=ctx.scale, cfg=cfg, vocab_size=splits.vocab_size)
    size = sum(p.numel() for p in student.parameters()) / sum(p.numel() for p in teacher.parameters())
    scores_out = evaluate(student, splits.test, splits.attack_types)
    write_metrics(
        ctx.run_dir,
        ctx.identity(),
        result,
        scores=scores_out["overall"],
        student_to_teacher_size=round(size, 4),
        graph_cache=graph_cache_record(splits.meta),
    )
    return scores_out["overall"]
