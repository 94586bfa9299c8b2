"""``python -m kdgat <stage> --model … --scale … --dataset … [-O key value]…`` and the helpers
``schema`` (the config's JSON Schema), ``synth`` (a synthetic data set), ``--param-counts`` and the
catalogue's ``runs``, ``catalogue-append``, ``catalogue-compact`` (:mod:`kdgat.catalogue.cli`; ``python -m
kdgat`` answers those before importing the pipeline)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from kdgat import paths
from kdgat.catalogue import cli as catalogue_cli
from kdgat.config import ConfigError, PipelineConfig, build_config, json_schema
from kdgat.data import DataError, write_synthetic_dataset
from kdgat.stages import STAGES, StageInputError, run_stage
from kdgat.training import requeue

USER_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kdgat", description="KD-GAT CAN intrusion detection pipeline")
    sub = p.add_subparsers(dest="command", required=True)
    for stage in STAGES:
        s = sub.add_parser(stage, help=f"run the {stage} stage")
        s.add_argument("--model", choices=["gat", "vgae"], required=True)
        s.add_argument("--scale", choices=["large", "small"], required=True)
        s.add_argument("--dataset", required=True)
        s.add_argument(
            "--run-root", default=None, help="run root (default $KD_GAT_RUN_ROOT or experimentruns)"
        )
        s.add_argument(
            "-O",
            dest="overrides",
            nargs=2,
            action="append",
            default=[],
            metavar=("KEY", "VALUE"),
            help="config override, e.g. -O training.lr 0.001",
        )
    sc = sub.add_parser("schema", help="print a JSON Schema: the pipeline config's, or study.json's")
    sc.add_argument("which", nargs="?", choices=["pipeline", "study"], default="pipeline")
    sy = sub.add_parser("synth", help="write a synthetic CAN data set")
    sy.add_argument("--out", required=True, type=Path)
    sy.add_argument("--messages", type=int, default=200_000)
    sy.add_argument("--seed", type=int, default=0)
    sy.add_argument("--format", choices=["csv", "hcrl", "parquet"], default="csv")
    tu = sub.add_parser("tune", help="work on a hyperparameter study until it has nTrials finished")
    tu.add_argument(
        "--study-dir", required=True, type=Path, help="the study directory (study.json, journal.log)"
    )
    tu.add_argument("--run-root", default=None, help="this worker's run root (worker.json, requeue ack)")
    tr = sub.add_parser(
        "tune-report", help="trial counts, pruning rate, durations and the best trial of a study"
    )
    tr.add_argument("--study-dir", required=True, type=Path)
    tr.add_argument("--json", action="store_true", help="print the report as JSON")
    tr.add_argument("--out", type=Path, default=None, help="where the plots go (default: <study-dir>/report)")
    tr.add_argument("--no-plots", action="store_true")
    pc = sub.add_parser("param-counts", help="parameter counts of the presets vs the published ones")
    pc.add_argument("--vocab-size", type=int, default=50)
    ts = sub.add_parser(
        "tracking-sync", help="upload the offline W&B runs below a run directory (wandb sync)"
    )
    ts.add_argument("--run-dir", required=True, type=Path, help="a run directory (or any folder above runs)")
    ts.add_argument("--dry-run", action="store_true", help="list what would be uploaded, upload nothing")
    catalogue_cli.add_commands(sub)
    return p


def _test_faults_from_env() -> None:
    # A test that starts the pipeline as a subprocess switches the simulated CUDA OOM on this way;
    # otherwise the test-only module is never imported.
    if os.environ.get("HPC_TEST_OOM_ABOVE", "").strip():
        from kdgat.testing.faults import install_from_env

        install_from_env()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--param-counts":
        argv[0] = "param-counts"
    args = _parser().parse_args(argv)
    _test_faults_from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "schema":
            if args.which == "study":
                from kdgat.tune.study import study_json_schema

                print(json.dumps(study_json_schema(), indent=2, sort_keys=True))
            else:
                print(json.dumps(json_schema(), indent=2, sort_keys=True))
            return 0
        if args.command == "synth":
            out = write_synthetic_dataset(args.out, n_messages=args.messages, seed=args.seed, fmt=args.format)
            print(f"synthetic data set written to {out}")
            return 0
        if args.command == "param-counts":
            from kdgat.models import PUBLISHED_PARAMETERS, parameter_count

            for (model, scale), published in PUBLISHED_PARAMETERS.items():
                ours = parameter_count(model, scale, vocab_size=args.vocab_size)
                ratio = ours / published
                print(
                    f"{model:5s} {scale:6s} ours {ours:>9,d}  published {published:>9,d}  ratio {ratio:.2f}"
                )
            return 0
        if args.command in STAGES or args.command == "tune":
            from kdgat.training.threads import match_threads_to_allocation

            match_threads_to_allocation()
        if args.command == "tune":
            from kdgat.tune.worker import Worker

            return Worker(args.study_dir, None if args.run_root is None else Path(args.run_root)).run()
        if args.command == "tune-report":
            return _tune_report(args)
        if args.command == "tracking-sync":
            from kdgat.tracking.sync import wandb_sync

            return wandb_sync(args.run_dir, dry_run=args.dry_run)
        if args.command in catalogue_cli.COMMANDS:
            return catalogue_cli.run(args)
        cfg = build_config(args.scale, dict(args.overrides))
        result = _run_stage_catalogued(args, cfg)
        print(
            json.dumps(
                {
                    "stage": args.command,
                    **{k: v for k, v in result.items() if not isinstance(v, dict)},
                }
            )
        )
        return 0
    except requeue.RequeueRequested as e:
        print(
            f"kdgat: checkpointed to {e} on the requeue signal; exiting {requeue.EXIT_STATUS} for a requeue",
            file=sys.stderr,
        )
        return requeue.EXIT_STATUS
    except (ConfigError, DataError, StageInputError, ValueError) as e:  # StudyError is a ValueError
        print(f"kdgat: error: {e}", file=sys.stderr)
        return USER_ERROR


def _run_stage_catalogued(args: argparse.Namespace, cfg: PipelineConfig) -> dict[str, Any]:
    """Runs the stage and adds its row to the catalogue (:mod:`kdgat.catalogue`): COMPLETED, or FAILED
    when it raised; none on the requeue signal (the requeued job's run writes it). Rank 0 only."""
    from kdgat.catalogue import try_record_stage
    from kdgat.stages.common import is_rank_zero

    def record(state: str) -> None:
        if not is_rank_zero():
            return
        try:
            stage_dir = paths.run_dir(args.run_root, args.dataset, args.model, args.scale, args.command)
        except ValueError:
            return  # a name that is no directory name: the stage refused it already
        try_record_stage(stage_dir, state, elapsed_s=time.monotonic() - t0)

    t0 = time.monotonic()
    try:
        result = run_stage(
            args.command,
            cfg,
            dataset=args.dataset,
            model=args.model,
            scale=args.scale,
            run_root=args.run_root,
        )
    except requeue.RequeueRequested:
        raise
    except Exception:
        record("FAILED")
        raise
    record("COMPLETED")
    return result


def _tune_report(args: argparse.Namespace) -> int:
    from kdgat.tune.report import format_report, load_study, study_report, write_plots
    from kdgat.tune.study import HyperbandSpec, read_config

    cfg = read_config(args.study_dir)
    study = load_study(args.study_dir)
    min_resource = cfg.pruner.min_resource if isinstance(cfg.pruner, HyperbandSpec) else None
    report = study_report(study, objective_metric=cfg.objective.metric, min_resource=min_resource)
    report["study_dir"] = str(args.study_dir)
    if not args.no_plots:
        out = args.out or args.study_dir / "report"
        out.mkdir(parents=True, exist_ok=True)
        report["plots"] = [str(p) for p in write_plots(study, out)]
        (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_report(report))
        for p in report.get("plots", []):
            print(f"plot: {p}")
    return 0
