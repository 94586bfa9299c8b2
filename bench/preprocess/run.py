"""bench/preprocess: messages/s per core of the vectorised preprocessing vs a straightforward pandas
per-window implementation (the baseline, written here), on a generated CAN file.

End to end (`preprocess_dataset`) runs twice per round: with the pipeline config's default data
settings (`kdgat.config.DataConfig()`: features, calibration windows, profile windows, novelty
history, window and stride, read field by field) and with the paper's features (the same settings
but `features="paper"`, `calibration_windows=0`). Each row says which.

Run from the repo root:  cd python && uv run python ../bench/preprocess/run.py [--messages 5000000]

Every timing runs --repeat times (default 5), the variants interleaved within each round, and is
reported as median [min-max]. The thread count is pinned (--threads, default 1: numpy, torch and
Arrow's pools) and printed, so rates are per core; the CPU seconds of the process are printed beside
the wall-clock ones (on a shared machine CPU < wall means the process waited for a core).

Prints the figures, the ratio, and one JSON line. The baseline runs on the first
--baseline-messages messages of the same file and its rate is extrapolated to the whole file
(it says so); its graphs are checked against ours on that subset so both compute the same thing.
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv: list[str]) -> int:
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 1


# Thread pools size themselves when their library is first imported, so pin them before that.
THREADS = _threads_from_argv(sys.argv[1:])
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = str(THREADS)

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import replace  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TypeVar  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import torch  # noqa: E402

from kdgat.config import DataConfig  # noqa: E402
from kdgat.data import GraphParams, build_window_graphs, preprocess_dataset, read_can_file  # noqa: E402
from kdgat.data.synth import generate_can_traffic, write_can_file  # noqa: E402


def pandas_baseline(path: Path, nrows: int, w: int, s: int) -> list[dict[str, np.ndarray]]:
    """The way one would write it first: pandas for parsing, then a loop over windows with
    groupby for nodes and a loop over edges for the interval statistics."""
    df = pd.read_csv(path, nrows=nrows, dtype={"arbitration_id": str, "data_field": str})
    df["data_field"] = df["data_field"].fillna("")
    df["can_id"] = df["arbitration_id"].apply(lambda h: int(h, 16))
    for k in range(8):
        df[f"b{k}"] = df["data_field"].apply(
            lambda d, k=k: int(d[2 * k : 2 * k + 2], 16) if len(d) >= 2 * k + 2 else 0
        )
    graphs = []
    for start in range(0, len(df) - w + 1, s):
        win = df.iloc[start : start + w].reset_index(drop=True)
        win["pos"] = np.arange(w)
        nodes = win.groupby("can_id").agg(
            **{f"b{k}": (f"b{k}", "mean") for k in range(8)},
            count=("pos", "size"),
            last=("pos", "max"),
        )
        x = np.zeros((len(nodes), 11))
        x[:, 1:9] = nodes[[f"b{k}" for k in range(8)]].to_numpy() / 255.0
        x[:, 9] = nodes["count"].to_numpy()
        x[:, 10] = nodes["last"].to_numpy() / (w - 1)
        index = {cid: i for i, cid in enumerate(nodes.index)}
        trans = pd.DataFrame(
            {
                "src": win["can_id"].to_numpy()[:-1],
                "dst": win["can_id"].to_numpy()[1:],
                "pos": np.arange(w - 1),
            }
        )
        degree = trans["src"].value_counts().add(trans["dst"].value_counts(), fill_value=0)
        pairs = set(zip(trans["src"], trans["dst"], strict=True))
        edges, attrs = [], []
        for (a, b), grp in trans.groupby(["src", "dst"]):
            p = grp["pos"].to_numpy()
            c = len(p)
            gaps = np.diff(p)
            mean = gaps.mean() if c > 1 else 0.0
            std = gaps.std() if c > 1 else 0.0
            edges.append((index[a], index[b]))
            attrs.append(
                [
                    c,
                    c / w,
                    mean,
                    std,
                    1 / (1 + std) if c > 1 else 0.0,
                    p[0] / w,
                    p[-1] / w,
                    (p[-1] - p[0]) / w,
                    float((b, a) in pairs),
                    degree[a] * degree[b],
                    degree[a] / degree[b],
                ]
            )
        graphs.append(
            {
                "x": x,
                "edge_index": np.array(edges).T,
                "edge_attr": np.array(attrs),
                "y": int(win["attack"].any()),
            }
        )
    return graphs


T = TypeVar("T")


def default_params() -> GraphParams:
    """The graph parameters of a run with the default config: every field from ``DataConfig()``
    (whatever ``GraphParams``' own defaults are)."""
    d = DataConfig()
    return GraphParams(
        window_size=d.window_size,
        stride=d.stride,
        val_fraction=d.val_fraction,
        test_fraction=d.test_fraction,
        split_seed=d.split_seed,
        features=d.features,
        novelty_history=d.novelty_history,
        calibration_windows=d.calibration_windows,
        profile_windows=d.profile_windows,
    )


def describe(params: GraphParams) -> str:
    """``features=..., calibration=...`` of a variant, as its rows print it."""
    text = f"features={params.features}, "
    text += (
        f"calibration={params.calibration_windows} windows per recording"
        if params.calibration_windows
        else "calibration=benign training windows"
    )
    if params.features == "payload":
        text += f", profile={params.profile_windows} windows"
    if params.features != "paper":
        text += f", novelty history={params.novelty_history}"
    return text


class Timings:
    """Wall-clock and CPU seconds of repeated runs of one variant."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn: Callable[[], T]) -> T:
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        self.wall.append(time.perf_counter() - w0)
        self.cpu.append(time.process_time() - c0)
        return out

    def rate(self, messages: int) -> tuple[float, float, float]:
        """Messages/s per core: median, min, max over the runs."""
        rates = [messages / (s * THREADS) for s in self.wall]
        return statistics.median(rates), min(rates), max(rates)

    def line(self, label: str, messages: int, note: str = "") -> str:
        med, lo, hi = self.rate(messages)
        return (
            f"{label:<20s} {statistics.median(self.wall):7.2f}s (cpu {statistics.median(self.cpu):6.2f}s)  "
            f"{med:11,.0f} msg/s/core [{lo:,.0f}-{hi:,.0f}]{note}"
        )

    def to_json(self, messages: int) -> dict[str, object]:
        med, lo, hi = self.rate(messages)
        return {
            "seconds": [round(s, 3) for s in self.wall],
            "cpu_seconds": [round(s, 3) for s in self.cpu],
            "msgs_per_s_per_core": {"median": round(med), "min": round(lo), "max": round(hi)},
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=5_000_000)
    ap.add_argument("--baseline-messages", type=int, default=100_000)
    ap.add_argument("--attack", default="fuzzy", help="attack injected in the generated file")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of timings (at least 5 advised)")
    ap.add_argument("--threads", type=int, default=1, help="threads of numpy/torch/Arrow (default 1)")
    ap.add_argument(
        "--workdir", type=Path, default=None, help="where to write the file (default: a temp dir)"
    )
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    pa.set_cpu_count(THREADS)
    pa.set_io_thread_count(THREADS)
    params = default_params()
    paper = replace(params, features="paper", calibration_windows=0)
    w, s = params.window_size, params.stride
    n = args.messages
    nb = min(args.baseline_messages, n)

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        raw = Path(tmp) / "raw"
        path = raw / "train_bench.csv"
        t0 = time.perf_counter()
        messages = generate_can_traffic(n, seed=11, attack=args.attack)
        write_can_file(path, messages, "csv")
        del messages
        gen_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        print(f"generated {n:,} messages ({args.attack}) -> {path.name}, {size_mb:.0f} MB in {gen_s:.1f}s")

        # One round runs every variant once; rounds repeat, so a slow spell of the shared
        # machine hits all variants alike. preprocess_dataset gets a fresh cache each time.
        parse_t, graph_t, both_t, base_t = Timings(), Timings(), Timings(), Timings()
        e2e_t, paper_t = Timings(), Timings()
        for r in range(args.repeat):
            parsed, report = parse_t.run(partial(read_can_file, path))
            graphs = graph_t.run(
                partial(build_window_graphs, parsed.can_id, parsed.payload, parsed.label, w, s)
            )
            both_t.wall.append(parse_t.wall[-1] + graph_t.wall[-1])
            both_t.cpu.append(parse_t.cpu[-1] + graph_t.cpu[-1])
            # ours, end to end: sha256 fingerprint, parse, graphs, feature columns, vocab,
            # normalisation or calibration, torch.save; the default settings and the paper's, in
            # turn first (fresh caches)
            runs = [(e2e_t, params, "default"), (paper_t, paper, "paper")]
            for timings, p, name in runs if r % 2 == 0 else runs[::-1]:
                cache = Path(tmp) / f"cache-{name}{r}"
                info = timings.run(partial(preprocess_dataset, "bench", p, workers=1, raw=raw, cache=cache))
                assert report.malformed == 0 and not info.hit
            # baseline on a prefix, extrapolated
            base = base_t.run(partial(pandas_baseline, path, nb, w, s))
            print(
                f"round {r + 1}/{args.repeat}: parse {parse_t.wall[-1]:.2f}s, "
                f"graphs {graph_t.wall[-1]:.2f}s, end to end {e2e_t.wall[-1]:.2f}s (default settings), "
                f"{paper_t.wall[-1]:.2f}s (paper features), baseline {base_t.wall[-1]:.2f}s",
                flush=True,
            )

        # same results on the prefix
        for g, ref in enumerate(base):
            a, b = graphs.node_ptr[g], graphs.node_ptr[g + 1]
            c, d = graphs.edge_ptr[g], graphs.edge_ptr[g + 1]
            np.testing.assert_allclose(graphs.x[a:b, 1:], ref["x"][:, 1:], rtol=1e-5, atol=1e-5)
            assert np.array_equal(graphs.edge_index[:, c:d], ref["edge_index"])
            np.testing.assert_allclose(graphs.edge_attr[c:d], ref["edge_attr"], rtol=1e-5, atol=1e-5)
            assert graphs.y[g] == ref["y"]

    ours_rate = both_t.rate(n)[0]
    e2e_rate = e2e_t.rate(n)[0]
    paper_rate = paper_t.rate(n)[0]
    base_rate = base_t.rate(nb)[0]
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"threads {THREADS} (rates are per core: messages / (seconds x threads)); "
        f"numpy {np.__version__}, pandas {pd.__version__}, pyarrow {pa.__version__}"
    )
    print(f"{args.repeat} rounds, median [min-max] over the rounds; {n:,} messages")
    print(parse_t.line("ours parse", n))
    print(graph_t.line("ours graphs", n, f"  ({graphs.num_graphs:,} windows)"))
    print(both_t.line("ours parse+graphs", n))
    print(f"default settings (DataConfig()): {describe(params)}")
    print(f"paper features: {describe(paper)}")
    print(
        e2e_t.line("ours end to end", n)
        + "  default settings (preprocess_dataset: hash, parse, graphs, features, vocab, calibration, save)"
    )
    print(
        paper_t.line("ours end to end", n)
        + "  paper features (preprocess_dataset: hash, parse, graphs, vocab, normalise, save)"
    )
    print(
        base_t.line("pandas baseline", nb)
        + f"  measured on the first {nb:,} messages ({len(base):,} windows); "
        f"extrapolated to {n:,}: {n / base_rate:,.0f}s"
    )
    print(
        f"ratio (ours / pandas baseline, medians): parse+graphs {ours_rate / base_rate:,.0f}x; "
        f"end to end {e2e_rate / base_rate:,.0f}x (default settings), "
        f"{paper_rate / base_rate:,.0f}x (paper features)"
    )
    print(f"baseline graphs identical to ours on the prefix: {len(base)} windows checked")
    print(
        json.dumps(
            {
                "messages": n,
                "baseline_messages": nb,
                "threads": THREADS,
                "repeat": args.repeat,
                "ours_msgs_per_s_per_core": round(ours_rate),
                "default_params": params.to_json(),
                "paper_params": paper.to_json(),
                "ours_end_to_end_msgs_per_s_per_core": round(e2e_rate),
                "ours_end_to_end_paper_msgs_per_s_per_core": round(paper_rate),
                "baseline_msgs_per_s_per_core": round(base_rate),
                "ratio": round(ours_rate / base_rate, 1),
                "ratio_end_to_end": round(e2e_rate / base_rate, 1),
                "ratio_end_to_end_paper": round(paper_rate / base_rate, 1),
                "parse": parse_t.to_json(n),
                "graphs": graph_t.to_json(n),
                "parse_graphs": both_t.to_json(n),
                "end_to_end": e2e_t.to_json(n),
                "end_to_end_paper": paper_t.to_json(n),
                "baseline": base_t.to_json(nb),
                "baseline_extrapolated": nb < n,
            }
        )
    )


if __name__ == "__main__":
    main()
