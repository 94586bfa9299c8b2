"""A run's report: ``report.html`` and PNGs beside it, from the report input the runner writes
(``report-input.json``: the manifest summary, every task's pipeline dir with its job records, and the
verdicts). Self-contained: no script, no stylesheet or font from the network; images are files in the
same directory. Drawn with matplotlib's Agg canvas (no display needed).

Per stage: training curves (loss and validation metric per epoch, from ``history.csv``), throughput
and data-wait per epoch, GPU utilisation over time (``gpu_samples.csv`` timestamps), peak memory
against the request, the verdicts with their fix. A sweep adds its metric per point and the best point;
a study links its tune report.
"""

from __future__ import annotations

import csv
import html
import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

REPORT_FILE = "report.html"


def _read_history(path: str | None) -> list[dict[str, float | None]]:
    """One row per epoch: kdgat's history.csv as it is; a CSV with several rows per epoch (Lightning's
    CSVLogger writes the training and the validation values of an epoch on rows of their own) merged,
    the last value of each column winning."""
    if not path or not Path(path).exists():
        return []
    rows: list[dict[str, float | None]] = []
    by_epoch: dict[float, dict[str, float | None]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = {k: (float(v) if v not in ("", None) else None) for k, v in r.items() if k}
            epoch = row.get("epoch")
            if epoch is None:
                rows.append(row)
                continue
            merged = by_epoch.get(epoch)
            if merged is None:
                by_epoch[epoch] = merged = dict(row)
                rows.append(merged)
            else:
                merged.update({k: v for k, v in row.items() if v is not None})
    return rows


def _read_gpu_samples(path: str | None) -> list[tuple[float, float]]:
    """(seconds since the first sample, utilisation %) from an nvidia-smi CSV with timestamps."""
    if not path or not Path(path).exists():
        return []
    out: list[tuple[float, float]] = []
    for line in Path(path).read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[1].endswith("%"):
            continue  # header, or a file without timestamps
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, float(parts[1].rstrip(" %"))))
        except ValueError:
            continue
    if not out:
        return []
    t0 = out[0][0]
    return [(t - t0, u) for t, u in out]


def _save(fig: Figure, out: Path, name: str) -> str:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(out / name, dpi=90)
    return name


def _label(task: dict[str, Any]) -> str:
    if task.get("index") is None:
        return "run"
    point = task.get("point") or {}
    return f"#{task['index']} " + ", ".join(f"{k}={v}" for k, v in point.items())


def _legend(ax: Any, n: int) -> None:
    """One entry per task; beside the plot when there are many (a sweep)."""
    if n <= 4:
        ax.legend(fontsize=7)
    else:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _curves(stage: dict[str, Any], tasks: list[dict[str, Any]], out: Path) -> str | None:
    histories = [(t, _read_history(t.get("history"))) for t in tasks]
    histories = [(t, h) for t, h in histories if h][:24]
    if not histories:
        return None
    fig = Figure(figsize=(12, 3.8))
    ax_loss, ax_val = fig.subplots(1, 2)
    has_val = False
    metric = "val_loss"
    for i, (t, h) in enumerate(histories):
        colour = f"C{i % 10}"
        ep = [r["epoch"] for r in h]
        ax_loss.plot(ep, [r.get("train_loss") for r in h], marker=".", color=colour)
        if any(r.get("val_loss") is not None for r in h):
            ax_loss.plot(ep, [r.get("val_loss") for r in h], linestyle="--", color=colour)
        metric = "val_acc" if any(r.get("val_acc") is not None for r in h) else "val_loss"
        if any(r.get(metric) is not None for r in h):
            has_val = True
            ax_val.plot(ep, [r.get(metric) for r in h], marker=".", color=colour, label=_label(t))
    ax_loss.set_title(f"{stage['id']}: loss per epoch (solid train, dashed validation)")
    ax_loss.set_xlabel("epoch")
    ax_val.set_title(f"{stage['id']}: validation metric per epoch")
    ax_val.set_xlabel("epoch")
    if has_val:
        ax_val.set_ylabel(metric)
        _legend(ax_val, len(histories))
    else:
        ax_val.text(
            0.5, 0.5, "no validation metric logged", ha="center", va="center", transform=ax_val.transAxes
        )
    return _save(fig, out, f"{stage['id']}-curves.png")


def _throughput(stage: dict[str, Any], tasks: list[dict[str, Any]], out: Path) -> str | None:
    histories = [(t, _read_history(t.get("history"))) for t in tasks]
    histories = [(t, h) for t, h in histories if h]
    if not histories:
        return None
    fig = Figure(figsize=(12, 3.4))
    ax_g, ax_w = fig.subplots(1, 2)
    histories = histories[:24]
    for i, (t, h) in enumerate(histories):
        ep = [r["epoch"] for r in h]
        waits = [r.get("data_wait_fraction") for r in h]
        ax_g.plot(ep, [r.get("graphs_per_sec") for r in h], marker=".", color=f"C{i % 10}")
        ax_w.plot(
            ep,
            [None if w is None else 100 * w for w in waits],
            marker=".",
            color=f"C{i % 10}",
            label=_label(t),
        )
    ax_g.set_title(f"{stage['id']}: throughput (graphs/s)")
    ax_g.set_xlabel("epoch")
    ax_w.set_title(f"{stage['id']}: data-wait (% of step time)")
    ax_w.set_xlabel("epoch")
    ax_w.axhline(
        100 * stage["thresholds"]["dataWaitHigh"],
        color="red",
        linewidth=0.8,
        linestyle=":",
        label="verdict threshold",
    )
    _legend(ax_w, len(histories) + 1)
    return _save(fig, out, f"{stage['id']}-throughput.png")


def _gpu(stage: dict[str, Any], tasks: list[dict[str, Any]], out: Path) -> str | None:
    series = [(t, _read_gpu_samples(t.get("gpuSamples"))) for t in tasks]
    series = [(t, s) for t, s in series if s]
    if not series:
        return None
    fig = Figure(figsize=(12, 3.2))
    ax = fig.subplots()
    series = series[:24]
    for i, (t, s) in enumerate(series):
        ax.plot([x / 60 for x, _ in s], [u for _, u in s], color=f"C{i % 10}", label=_label(t))
    ax.axhline(10, color="red", linewidth=0.8, linestyle=":", label="idle (< 10%)")
    ax.set_ylim(0, 105)
    ax.set_xlabel("minutes since the first sample")
    ax.set_ylabel("GPU utilisation %")
    ax.set_title(f"{stage['id']}: GPU utilisation over time")
    _legend(ax, len(series) + 1)
    return _save(fig, out, f"{stage['id']}-gpu.png")


def _memory(stage: dict[str, Any], tasks: list[dict[str, Any]], out: Path) -> str | None:
    used: list[tuple[dict[str, Any], float]] = [
        (t, float(u)) for t in tasks if (u := (t.get("usage") or {}).get("peakRssMB")) is not None
    ]
    if not used:
        return None
    fig = Figure(figsize=(12, 0.8 + 0.25 * max(4, len(used))))
    ax = fig.subplots()
    labels = [_label(t) for t, _ in used]
    ax.barh(labels, [u / 1024 for _, u in used], color="#4c72b0", label="peak RSS")
    request = stage["request"]["memGB"]
    ax.axvline(request, color="black", linestyle="--", label=f"requested {request} GB")
    sized = (stage.get("sizing") or {}).get("memGB")
    if sized:
        ax.axvline(sized["value"], color="green", linestyle=":", label=f"right-sized {sized['value']} GB")
    ax.set_xlabel("GB")
    ax.set_title(f"{stage['id']}: peak memory against the request")
    ax.legend(fontsize=7)
    return _save(fig, out, f"{stage['id']}-memory.png")


def point_metric(task: dict[str, Any]) -> tuple[str, float, bool] | None:
    """(name, value, higher is better) of a finished task: F1 from metrics.json, else the best
    validation accuracy, else the lowest validation loss of its history."""
    scores = (task.get("metrics") or {}).get("scores") or {}
    if isinstance(scores.get("f1"), (int, float)):
        return ("f1", float(scores["f1"]), True)
    h = _read_history(task.get("history"))
    acc = [v for r in h if (v := r.get("val_acc")) is not None]
    if acc:
        return ("val_acc", max(acc), True)
    loss = [v for r in h if (v := r.get("val_loss")) is not None]
    if loss:
        return ("val_loss", min(loss), False)
    return None


def _sweep(
    stage: dict[str, Any], tasks: list[dict[str, Any]], out: Path
) -> tuple[str | None, dict[str, Any] | None]:
    points = [(t, point_metric(t)) for t in tasks if t.get("index") is not None]
    scored = [(t, m) for t, m in points if m is not None]
    if not scored:
        return None, None
    name, _, higher = scored[0][1]
    scored = [(t, m) for t, m in scored if m[0] == name]
    best_t, best_m = (max if higher else min)(scored, key=lambda x: x[1][1])
    fig = Figure(figsize=(12, 3.2))
    ax = fig.subplots()
    xs = [t["index"] for t, _ in scored]
    ys = [m[1] for _, m in scored]
    ax.bar(xs, ys, color=["#dd8452" if t is best_t else "#4c72b0" for t, _ in scored])
    ax.set_xlabel("sweep point")
    ax.set_ylabel(name)
    ax.set_title(f"{stage['id']}: {name} per point (best: #{best_t['index']})")
    lo, hi = min(ys), max(ys)
    if math.isfinite(lo) and hi > lo:
        pad = (hi - lo) * 0.2
        ax.set_ylim(lo - pad, hi + pad)
    best = {"index": best_t["index"], "point": best_t.get("point") or {}, "metric": name, "value": best_m[1]}
    return _save(fig, out, f"{stage['id']}-sweep.png"), best


def _e(x: Any) -> str:
    return html.escape(str(x))


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return _e(x)


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
th{background:#f4f4f4}img{max-width:100%;display:block;margin:.5rem 0}.ok{color:#2a7a2a}
.finding{border-left:4px solid #c0392b;background:#fdf2f1;padding:.4rem .8rem;margin:.4rem 0}
.finding b{color:#c0392b}.muted{color:#777}code{background:#f4f4f4;padding:0 .2rem}
"""


#: The catalogue's columns the report shows for the run's rows (the leaderboard has them all).
CATALOGUE_COLUMNS = (
    "stage_id",
    "point_index",
    "trial",
    "state",
    "f1",
    "accuracy",
    "auroc",
    "anomaly_auroc",
    "val_loss",
    "elapsed_s",
    "cost_expected",
    "finished_at",
)


def _catalogue(ref: dict[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    """The run's rows of the catalogue of all runs (:mod:`kdgat.catalogue`), and where it is."""
    if not ref:
        return [], {"dir": None, "rows": 0}
    from kdgat.catalogue import read_table
    from kdgat.catalogue.query import Condition, format_cell, select_table

    folder = Path(ref["dir"])
    head = "<h2>In the catalogue</h2>"
    try:
        run = [
            Condition("experiment", "=", ref.get("experiment")),
            Condition("run_id", "=", ref.get("runId")),
        ]
        rows = select_table(read_table(folder), run, []).to_pylist()
    except Exception as e:  # a damaged file must not cost the report
        why = f"{type(e).__name__}: {e}"
        return [head, f"<p class='muted'>the catalogue {_e(folder)} could not be read: {_e(why)}</p>"], {
            "dir": str(folder),
            "rows": 0,
        }
    rows.sort(key=lambda r: (r["stage_id"] or "", r["point_index"] or 0, r["trial"] or 0))
    out = [
        head,
        f"<p>{len(rows)} row(s) of this run in the catalogue of all runs, <code>{_e(folder)}</code> "
        "(one Parquet file per finished stage; pandas, pyarrow and DuckDB read the folder as one table; "
        f"every run: <code>runner runs --where run_id={_e(ref.get('runId'))}</code>).</p>",
    ]
    if rows:
        out.append("<table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in CATALOGUE_COLUMNS) + "</tr>")
        for r in rows:
            out.append(
                "<tr>" + "".join(f"<td>{_e(format_cell(c, r[c]))}</td>" for c in CATALOGUE_COLUMNS) + "</tr>"
            )
        out.append("</table>")
    return out, {"dir": str(folder), "rows": len(rows)}


def write_run_report(data: dict[str, Any], out: Path) -> dict[str, Any]:
    """Writes report.html and the PNGs into ``out``; returns {"html": path, "plots": [paths], "best": …}."""
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    m = data["manifest"]
    plots: list[str] = []
    body: list[str] = [f"<h1>Run report: {_e(m['experiment'])}</h1>"]
    body.append("<h2>Manifest</h2><table>")
    rows = [
        ("run dir", m.get("runDir")),
        ("created", m.get("createdAt")),
        ("spec hash", m.get("specHash")),
        ("git commit", f"{m.get('commit') or 'unknown'}{' (dirty)' if m.get('dirty') else ''}"),
        (
            "environment",
            f"{m.get('environment', {}).get('name')} (lock {m.get('environment', {}).get('lockHash')})",
        ),
        ("stack / scheduler", f"{m.get('stack')} / {m.get('scheduler')}"),
        ("pipeline", m.get("pipeline") or "kdgat"),
        ("job ids", ", ".join(f"{j['key']}={j.get('jobId') or '-'}" for j in m.get("jobs", []))),
    ]
    cost = m.get("cost")
    if cost:
        unit = cost.get("unit") or ""
        w, e = cost["worst"], cost["expected"]
        rows.append(
            (
                "estimated cost",
                f"worst {_fmt(w.get('units'), 4)} {unit}, {_fmt(w['gpuHours'], 3)} GPU-h; "
                f"expected {_fmt(e.get('units'), 4)} {unit}, {_fmt(e['gpuHours'], 3)} GPU-h",
            )
        )
    if m.get("rightSized"):
        rows.append(
            (
                "right-sized",
                "; ".join(
                    f"{k}: {v['cpus']} cpus, {v['memGB']} GB, {v['time']}" for k, v in m["rightSized"].items()
                ),
            )
        )
    body += [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows]
    body.append("</table>")
    notes = m.get("pipelineNotes") or []
    if notes:
        # A declared pipeline (not kdgat): what of this report its files could give.
        body.append(f"<h2>Pipeline {_e(m.get('pipeline'))}</h2><ul>")
        body += [f"<li>{_e(n)}</li>" for n in notes]
        body.append("</ul>")
    catalogue_html, catalogue = _catalogue(data.get("catalogue"))
    body += catalogue_html

    verdicts = [f for s in data["stages"] for f in s.get("verdicts", [])]
    body.append("<h2>Verdict</h2>")
    if verdicts:
        for f in verdicts:
            body.append(
                f"<div class='finding'><b>{_e(f['code'])}</b> {_e(f['evidence'])}"
                f"<br>fix: {_e(f['fix'])}</div>"
            )
    else:
        body.append("<p class='ok'>No bottleneck in the records (thresholds: see the runner README).</p>")

    bests: dict[str, Any] = {}
    for stage in data["stages"]:
        tasks = stage["tasks"]
        body.append(
            f"<h2>Stage {_e(stage['id'])} <span class='muted'>({_e(stage['stage'])}, "
            f"{_e(stage['model'])} {_e(stage['scale'])}, {_e(stage['dataset'])})</span></h2>"
        )
        r = stage["request"]
        env = stage.get("environment") or m.get("environment") or {}
        body.append(
            f"<p>requested: {_e(r['cpus'])} cpus, {_e(r['memGB'])} GB, {_e(r.get('gpus'))} GPU(s), "
            f"{_e(r['time'])} on {_e(r.get('partition'))}; environment {_e(env.get('name'))} "
            f"(lock {_e((env.get('lockHash') or '')[:12] or 'unknown')})</p>"
        )
        columns = [
            "task",
            "state",
            "elapsed s",
            "limit s",
            "cores busy",
            "peak RSS MB",
            "GPU mem MB",
            "GPU util %",
            "idle share",
            "data-wait",
            "attempts",
        ]
        body.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>")
        for t in tasks:
            u = t.get("usage") or {}
            g = u.get("gpu") or {}
            final = u.get("final") or {}
            body.append(
                "<tr>"
                + "".join(
                    f"<td>{c}</td>"
                    for c in (
                        _e(_label(t)),
                        _e(final.get("state", "no record")),
                        _fmt(u.get("elapsedSeconds"), 0),
                        _fmt((u.get("requested") or {}).get("timeSeconds"), 0),
                        _fmt(u.get("meanCpus")),
                        _fmt(u.get("peakRssMB"), 1),
                        _fmt(u.get("peakGpuMemMB"), 1),
                        _fmt(g.get("meanUtil"), 1),
                        _fmt(g.get("idleShare")),
                        _fmt(u.get("dataWaitFraction"), 3),
                        _e(len(u.get("attempts", []))),
                    )
                )
                + "</tr>"
            )
        body.append("</table>")
        for draw in (_curves, _throughput, _gpu, _memory):
            name = draw(stage, tasks, out)
            if name:
                plots.append(str(out / name))
                body.append(f"<img src='{_e(name)}' alt='{_e(name)}'>")
        if not any(Path(t.get("gpuSamples") or "").exists() for t in tasks):
            body.append("<p class='muted'>No GPU samples (no nvidia-smi on the node).</p>")
        if any(t.get("index") is not None for t in tasks):
            name, best = _sweep(stage, tasks, out)
            if name and best:
                plots.append(str(out / name))
                bests[stage["id"]] = best
                body.append(f"<img src='{_e(name)}' alt='{_e(name)}'>")
                pt = ", ".join(f"{k}={v}" for k, v in best["point"].items())
                body.append(
                    f"<p><b>best point</b>: #{best['index']} ({_e(pt)}): "
                    f"{_e(best['metric'])} = {_e(best['value'])}</p>"
                )
        sizing = stage.get("sizing") or {}
        if any(sizing.get(k) for k in ("cpus", "memGB", "time")):
            body.append(
                "<p>sized from this run: "
                + "; ".join(
                    f"{k} {_e(sizing[k]['current'])} → {_e(sizing[k]['value'])}"
                    for k in ("cpus", "memGB", "time")
                    if sizing.get(k)
                )
                + "</p>"
            )

    study = data.get("study")
    if study:
        body.append("<h2>Study</h2>")
        body.append(
            f"<p>study <b>{_e(study['name'])}</b>: <a href='{_e(study['reportHref'])}'>tune report</a> "
            f"({_e(study['reportDir'])})</p>"
        )
        for p in study.get("plots", []):
            body.append(f"<img src='{_e(p)}' alt='{_e(p)}'>")
    seconds = time.perf_counter() - t0
    body.append(f"<p class='muted'>written by kdgat-runner report in {seconds:.1f} s</p>")
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(m['experiment'])} — run report</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
    (out / REPORT_FILE).write_text(page)
    return {"html": str(out / REPORT_FILE), "plots": plots, "best": bests, "catalogue": catalogue}


def main_run_report(input_path: Path, out: Path) -> int:
    data = json.loads(input_path.read_text())
    result = write_run_report(data, out)
    print(json.dumps(result))
    return 0
