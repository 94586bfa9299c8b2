"""The hyperparameter-study report: what a study's journal says about its trials, and two plots.

A study directory holds ``journal.log`` (Optuna's journal file storage, written by every worker)
and ``study.json`` (the study's name, objective and pruner). :func:`load_study` opens it,
:func:`study_report` condenses it into a JSON-serialisable dict, :func:`format_report` turns that
dict into the text the CLI prints, and :func:`write_plots` draws the optimisation history and the
learning curves.

Trial system attrs set by our workers (any may be absent): ``kdgat_worker`` (``"<array job>_<task>"``),
``kdgat_stale`` (failed by another worker after its own stopped heart-beating), ``kdgat_retry_of``
(number of the trial this one retries) and ``kdgat_failure`` (why it failed).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import statistics
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

JOURNAL_FILE = "journal.log"
STUDY_FILE = "study.json"

WORKER_ATTR = "kdgat_worker"
STALE_ATTR = "kdgat_stale"
RETRY_OF_ATTR = "kdgat_retry_of"

REPORTED_STATES = (
    TrialState.COMPLETE,
    TrialState.PRUNED,
    TrialState.FAIL,
    TrialState.RUNNING,
    TrialState.WAITING,
)
TIMED_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)

PLOT_FILES = ("optimization_history.png", "intermediate_values.png")


def load_study(study_dir: Path) -> optuna.Study:
    """Open the study recorded in ``study_dir`` (``journal.log`` + ``study.json``).

    Nothing is written: the journal is only read until a caller adds to the study.
    Raises ``ValueError`` naming the path when either file is missing or unreadable, or when the
    journal holds no study of the name ``study.json`` gives.
    """
    study_dir = Path(study_dir)
    journal_path = study_dir / JOURNAL_FILE
    spec_path = study_dir / STUDY_FILE
    for path in (spec_path, journal_path):
        if not path.is_file():
            raise ValueError(
                f"{path} does not exist: {study_dir} is not a study directory "
                f"(it needs {STUDY_FILE} and {JOURNAL_FILE}); pass the directory the study was created in"
            )
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
        study_name = spec["study"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(
            f'{spec_path} is not a study description (JSON with a "study" name): {err}; '
            "recreate the study or fix the file"
        ) from err
    if not isinstance(study_name, str):
        raise ValueError(f'{spec_path}: "study" must be a string, got {study_name!r}')

    # The backend would create a missing journal; it exists by now, so opening it only reads.
    storage = JournalStorage(JournalFileBackend(str(journal_path)))
    try:
        return optuna.load_study(study_name=study_name, storage=storage)
    except KeyError as err:
        known = sorted(s.study_name for s in storage.get_all_studies())
        raise ValueError(
            f"{journal_path} has no study named {study_name!r} (it has {known or 'none'}); "
            f"check the name in {spec_path} or point at the right study directory"
        ) from err


def study_report(
    study: optuna.Study, *, objective_metric: str, min_resource: int | None = None
) -> dict[str, Any]:
    """Condense ``study`` into a JSON-serialisable dict (see the module docstring for the attrs).

    ``min_resource`` is the pruner's minimum number of steps; when given, the report counts the
    pruned trials that stopped before it (there should be none).
    """
    trials = study.get_trials(deepcopy=False)
    by_state = Counter(t.state for t in trials)
    counts = {state.name: by_state.get(state, 0) for state in REPORTED_STATES}
    counts["total"] = len(trials)

    judged = counts["COMPLETE"] + counts["PRUNED"]
    prune_steps = [s for t in trials if t.state == TrialState.PRUNED and (s := _last_step(t)) is not None]
    workers = Counter(str(t.system_attrs[WORKER_ATTR]) for t in trials if WORKER_ATTR in t.system_attrs)

    return {
        "study": study.study_name,
        "objective_metric": objective_metric,
        "direction": study.direction.name.lower(),
        "counts": counts,
        "pruning_rate": counts["PRUNED"] / judged if judged else None,
        "stale_failures": sum(
            1 for t in trials if t.state == TrialState.FAIL and t.system_attrs.get(STALE_ATTR) is True
        ),
        # A retry still WAITING carries the mark as a user attr (enqueue_trial takes no system attrs).
        "retries": sum(
            1
            for t in trials
            if t.system_attrs.get(RETRY_OF_ATTR, t.user_attrs.get(RETRY_OF_ATTR)) is not None
        ),
        "durations": {state.name: _duration_summary(trials, state) for state in TIMED_STATES},
        "epochs_at_prune": (
            {"min": min(prune_steps), "max": max(prune_steps), "mean": statistics.fmean(prune_steps)}
            if prune_steps
            else None
        ),
        "pruned_before_min_resource": (
            sum(1 for step in prune_steps if step < min_resource) if min_resource is not None else None
        ),
        "best": _best_trial(study, trials),
        "workers": {w: workers[w] for w in sorted(workers, key=_natural_key)},
    }


def format_report(report: dict[str, Any]) -> str:
    """The report as plain text for a terminal."""
    lines = [
        f"study {report['study']}: {report['direction']} {report['objective_metric']}",
        "",
        f"{'state':<10} {'trials':>6} {'mean s':>9} {'p50 s':>9}",
    ]
    for state, n in report["counts"].items():
        timing = report["durations"].get(state)
        mean = _seconds(timing["mean_s"]) if timing else ""
        p50 = _seconds(timing["p50_s"]) if timing else ""
        label = "total" if state == "total" else state.lower()
        lines.append(f"{label:<10} {n:>6} {mean:>9} {p50:>9}".rstrip())

    rate = report["pruning_rate"]
    lines += ["", f"pruning rate:      {'-' if rate is None else f'{rate:.1%}'} of finished trials pruned"]
    steps = report["epochs_at_prune"]
    if steps is None:
        lines.append("epochs at prune:   -")
    else:
        lines.append(f"epochs at prune:   min {steps['min']}, mean {steps['mean']:.1f}, max {steps['max']}")
    if report["pruned_before_min_resource"] is not None:
        lines.append(f"pruned too early:  {report['pruned_before_min_resource']} (before min_resource)")
    lines += [
        f"stale failures:    {report['stale_failures']}",
        f"retries:           {report['retries']}",
        "",
    ]

    workers = report["workers"]
    if workers:
        width = max(len(w) for w in workers)
        lines.append(f"workers ({len(workers)}):")
        lines += [f"  {w:<{width}}  {n:>4} trials" for w, n in workers.items()]
    else:
        lines.append("workers: none recorded")
    lines.append("")

    best = report["best"]
    if best is None:
        lines.append("best trial: none (no complete trials yet)")
    else:
        lines.append(f"best trial: #{best['number']}  {report['objective_metric']} = {best['value']:.6g}")
        lines.append(f"  worker:   {best['worker'] or '-'}")
        lines.append(f"  duration: {_seconds(best['duration_s'])} s")
        lines.append("  params:")
        lines += [f"    {key} = {value}" for key, value in best["params"].items()]
    return "\n".join(lines) + "\n"


def write_plots(study: optuna.Study, out_dir: Path) -> list[Path]:
    """Write ``optimization_history.png`` and ``intermediate_values.png`` into ``out_dir``.

    Drawn on Agg figures without pyplot, so no display is needed and the caller's backend is left
    alone. Each file is replaced atomically; a study with no complete trial still gets both files,
    saying so.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    figures = (_optimization_history(study, trials), _intermediate_values(trials))
    written = []
    for name, figure in zip(PLOT_FILES, figures, strict=True):
        path = out_dir / name
        _save_atomically(figure, path)
        written.append(path)
    return written


def _last_step(trial: FrozenTrial) -> int | None:
    return max(trial.intermediate_values) if trial.intermediate_values else None


def _duration_s(trial: FrozenTrial) -> float | None:
    if trial.datetime_start is None or trial.datetime_complete is None:
        return None
    return (trial.datetime_complete - trial.datetime_start).total_seconds()


def _duration_summary(trials: list[FrozenTrial], state: TrialState) -> dict[str, Any]:
    seconds = [d for t in trials if t.state == state and (d := _duration_s(t)) is not None]
    return {
        "n": len(seconds),
        "mean_s": statistics.fmean(seconds) if seconds else None,
        "p50_s": statistics.median(seconds) if seconds else None,
    }


def _scored_trials(trials: list[FrozenTrial]) -> list[tuple[FrozenTrial, float]]:
    """The complete trials with their objective values, in trial-number order."""
    scored = [(t, t.value) for t in trials if t.state == TrialState.COMPLETE]
    return sorted(((t, v) for t, v in scored if v is not None), key=lambda pair: pair[0].number)


def _better(study: optuna.Study) -> Any:
    """``min`` or ``max``, whichever picks the better objective value for this study."""
    return min if study.direction == optuna.study.StudyDirection.MINIMIZE else max


def _best_trial(study: optuna.Study, trials: list[FrozenTrial]) -> dict[str, Any] | None:
    scored = _scored_trials(trials)
    if not scored:
        return None
    best, _ = _better(study)(scored, key=lambda pair: pair[1])  # first of equals, like Optuna
    worker = best.system_attrs.get(WORKER_ATTR)
    return {
        "number": best.number,
        "value": best.value,
        "params": dict(best.params),
        "worker": None if worker is None else str(worker),
        "duration_s": _duration_s(best),
    }


def _natural_key(worker: str) -> list[str | int]:
    """``1234_2`` before ``1234_10``: digit runs compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", worker)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _placeholder(ax: Any, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _optimization_history(study: optuna.Study, trials: list[FrozenTrial]) -> Figure:
    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    ax.set_title(f"Optimization history: {study.study_name}")
    scored = _scored_trials(trials)
    if not scored:
        _placeholder(ax, "no complete trials yet")
        return figure
    numbers = [t.number for t, _ in scored]
    values = [v for _, v in scored]
    better = _better(study)
    best_so_far = list(itertools.accumulate(values, better))
    ax.scatter(numbers, values, s=16, color="tab:blue", label="objective value")
    ax.step(numbers, best_so_far, where="post", color="tab:red", label="best value")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("objective value")
    ax.legend()
    return figure


def _intermediate_values(trials: list[FrozenTrial]) -> Figure:
    figure = Figure(figsize=(8, 5), layout="constrained")
    ax = figure.add_subplot()
    ax.set_title("Intermediate values")
    # Learning curves of every trial, coloured by how it ended, so pruning decisions are visible.
    colours = {TrialState.COMPLETE: "tab:blue", TrialState.PRUNED: "tab:orange", TrialState.FAIL: "tab:red"}
    labelled: set[TrialState] = set()
    for trial in trials:
        if not trial.intermediate_values:
            continue
        steps = sorted(trial.intermediate_values)
        label = None if trial.state in labelled else trial.state.name.lower()
        labelled.add(trial.state)
        ax.plot(
            steps,
            [trial.intermediate_values[s] for s in steps],
            marker=".",
            linewidth=1,
            alpha=0.7,
            color=colours.get(trial.state, "tab:gray"),
            label=label,
        )
    if not labelled:
        _placeholder(ax, "no complete trials yet" if not _scored_trials(trials) else "no intermediate values")
        return figure
    if not _scored_trials(trials):
        ax.set_title("Intermediate values (no complete trials yet)")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("intermediate value")
    ax.legend()
    return figure


def _save_atomically(figure: Figure, path: Path) -> None:
    FigureCanvasAgg(figure)
    # Not tempfile.mkstemp: its 0600 mode would survive the rename and hide the plot from the group.
    tmp_path = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        figure.savefig(tmp_path, format="png", dpi=100)
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
