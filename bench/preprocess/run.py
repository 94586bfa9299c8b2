"""bench/preprocess: messages/s of the vectorised preprocessing vs a straightforward pandas
per-window implementation (the baseline, written here), on a generated CAN file.

Run from the repo root:  cd python && uv run python ../bench/preprocess/run.py [--messages 5000000]

Prints the figures, the ratio, and one JSON line. The baseline runs on the first
--baseline-messages messages of the same file and its rate is extrapolated to the whole file
(it says so); its graphs are checked against ours on that subset so both compute the same thing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from kdgat.data import GraphParams, build_window_graphs, preprocess_dataset, read_can_file
from kdgat.data.synth import generate_can_traffic, write_can_file


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=5_000_000)
    ap.add_argument("--baseline-messages", type=int, default=100_000)
    ap.add_argument("--attack", default="fuzzy", help="attack injected in the generated file")
    ap.add_argument(
        "--workdir", type=Path, default=None, help="where to write the file (default: a temp dir)"
    )
    args = ap.parse_args()
    params = GraphParams()
    w, s = params.window_size, params.stride

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        raw = Path(tmp) / "raw"
        path = raw / "train_bench.csv"
        t0 = time.perf_counter()
        messages = generate_can_traffic(args.messages, seed=11, attack=args.attack)
        write_can_file(path, messages, "csv")
        gen_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        print(
            f"generated {args.messages:,} messages ({args.attack}) -> {path.name}, "
            f"{size_mb:.0f} MB in {gen_s:.1f}s"
        )

        # ours, stage by stage (one process: one file)
        t0 = time.perf_counter()
        parsed, report = read_can_file(path)
        parse_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        graphs = build_window_graphs(parsed.can_id, parsed.payload, parsed.label, w, s)
        graph_s = time.perf_counter() - t0
        # ours, end to end: sha256 fingerprint, parse, graphs, vocab, normalisation, torch.save
        t0 = time.perf_counter()
        info = preprocess_dataset("bench", params, workers=1, raw=raw, cache=Path(tmp) / "cache")
        e2e_s = time.perf_counter() - t0
        assert report.malformed == 0 and not info.hit

        # baseline on a prefix, extrapolated
        nb = min(args.baseline_messages, args.messages)
        t0 = time.perf_counter()
        base = pandas_baseline(path, nb, w, s)
        base_s = time.perf_counter() - t0

        # same results on the prefix
        for g, ref in enumerate(base):
            a, b = graphs.node_ptr[g], graphs.node_ptr[g + 1]
            c, d = graphs.edge_ptr[g], graphs.edge_ptr[g + 1]
            np.testing.assert_allclose(graphs.x[a:b, 1:], ref["x"][:, 1:], rtol=1e-5, atol=1e-5)
            assert np.array_equal(graphs.edge_index[:, c:d], ref["edge_index"])
            np.testing.assert_allclose(
                graphs.edge_attr[c:d], ref["edge_attr"], rtol=1e-5, atol=1e-5
            )
            assert graphs.y[g] == ref["y"]

    n = args.messages
    ours_rate = n / (parse_s + graph_s)
    e2e_rate = n / e2e_s
    base_rate = nb / base_s
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"numpy {np.__version__}, pandas {pd.__version__}"
    )
    print(f"ours   parse      {parse_s:7.2f}s  {n / parse_s:12,.0f} msg/s")
    print(
        f"ours   graphs     {graph_s:7.2f}s  {n / graph_s:12,.0f} msg/s  "
        f"({graphs.num_graphs:,} windows)"
    )
    print(f"ours   parse+graphs {parse_s + graph_s:5.2f}s  {ours_rate:12,.0f} msg/s")
    print(
        f"ours   end to end {e2e_s:7.2f}s  {e2e_rate:12,.0f} msg/s  "
        "(preprocess_dataset: hash, parse, graphs, vocab, normalise, save)"
    )
    print(
        f"pandas baseline   {base_s:7.2f}s  {base_rate:12,.0f} msg/s  "
        f"measured on the first {nb:,} messages "
        f"({len(base):,} windows); extrapolated to {n:,}: {n / base_rate:,.0f}s"
    )
    print(
        f"ratio (ours parse+graphs / pandas baseline): {ours_rate / base_rate:,.0f}x; "
        f"end to end: {e2e_rate / base_rate:,.0f}x"
    )
    print(f"baseline graphs identical to ours on the prefix: {len(base)} windows checked")
    print(
        json.dumps(
            {
                "messages": n,
                "baseline_messages": nb,
                "ours_msgs_per_s": round(ours_rate),
                "ours_end_to_end_msgs_per_s": round(e2e_rate),
                "baseline_msgs_per_s": round(base_rate),
                "ratio": round(ours_rate / base_rate, 1),
                "ratio_end_to_end": round(e2e_rate / base_rate, 1),
                "parse_s": round(parse_s, 3),
                "graphs_s": round(graph_s, 3),
                "end_to_end_s": round(e2e_s, 3),
                "baseline_s": round(base_s, 3),
                "baseline_extrapolated": nb < n,
            }
        )
    )


if __name__ == "__main__":
    main()
