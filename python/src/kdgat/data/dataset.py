"""The loaded graph cache of a data set: its three splits as :class:`GraphSet` (``Dataset[Data]``
views of the memory-mapped ``graphs.pt``) in a :class:`GraphSplits` (the cache's layout:
:mod:`kdgat.data.cache`; building it: :mod:`kdgat.data.build`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import Dataset
from torch_geometric.data import Data

from kdgat import paths
from kdgat.data.cache import GRAPHS_FILE, SPLIT_CODES, read_meta
from kdgat.data.errors import DataError
from kdgat.data.graphs import NUM_EDGE_FEATURES, NUM_NODE_FEATURES
from kdgat.data.params import ATTACK_TYPES, CACHE_FORMAT_VERSION, GraphParams


class GraphSet(Dataset[Data]):
    """A split: ``len(ds)`` graphs, ``ds[i]`` a :class:`torch_geometric.data.Data` with
    ``x`` float32[n, 11] (column 0 the CAN-ID vocabulary index, integer-valued; 1..10 normalised),
    ``edge_index`` int64[2, e], ``edge_attr`` float32[e, 11], ``y`` int64[1] (1 = attack window),
    ``attack_type`` int64[1] (index into ``ATTACK_TYPES``), ``num_nodes`` = n.

    Tensors are views of the (memory-mapped) cache; ``Data.to()`` replaces attributes on the
    returned object only, so samples are safe to move. ``y`` / ``attack_type`` give the labels of
    the whole split at once (int64[len]); ``subset(idx)`` selects graphs (e.g. for curricula).

    Pickling (a worker started by ``spawn``) sends the cache file's path and the indices, not
    the tensors: each worker memory-maps ``graphs.pt`` itself, once per process.
    """

    def __init__(self, store: dict[str, torch.Tensor], index: torch.Tensor, path: Path | None = None):
        self._store: dict[str, torch.Tensor] | None = store
        self._path = path
        self.index = index.to(torch.long)

    @property
    def store(self) -> dict[str, torch.Tensor]:
        if self._store is None:
            assert self._path is not None
            self._store = _open_store(self._path)
        return self._store

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._path is not None:
            state["_store"] = None
        return state

    def __len__(self) -> int:
        return int(self.index.numel())

    def __getitem__(self, i: int) -> Data:
        if not -len(self) <= i < len(self):
            raise IndexError(f"graph {i} out of range for a split of {len(self)} graphs")
        g = int(self.index[i])
        s = self.store
        a, b = int(s["node_ptr"][g]), int(s["node_ptr"][g + 1])
        c, d = int(s["edge_ptr"][g]), int(s["edge_ptr"][g + 1])
        return Data(
            x=s["x"][a:b],
            edge_index=s["edge_index"][:, c:d],
            edge_attr=s["edge_attr"][c:d],
            y=s["y"][g : g + 1],
            attack_type=s["attack_type"][g : g + 1],
            num_nodes=b - a,
        )

    def __iter__(self) -> Iterator[Data]:
        for i in range(len(self)):
            yield self[i]

    @property
    def y(self) -> torch.Tensor:
        return self.store["y"][self.index]

    @property
    def attack_type(self) -> torch.Tensor:
        return self.store["attack_type"][self.index]

    @property
    def window_times(self) -> torch.Tensor:
        """float64[len, 4] per graph: its first and last message's timestamp, its first injected
        message's (+inf in a benign window) and its verdict time (:mod:`kdgat.data.verdict`)."""
        return self.store["window_times"][self.index]

    @property
    def file_index(self) -> torch.Tensor:
        """int64[len]: the source file (recording) of each graph, in the cache's file order."""
        return self.store["file_index"][self.index]

    def subset(self, idx: Sequence[int] | torch.Tensor | npt.NDArray[np.int64]) -> GraphSet:
        return GraphSet(self.store, self.index[torch.as_tensor(idx, dtype=torch.long)], self._path)


@dataclass(frozen=True)
class GraphSplits:
    """The three splits of a cached data set plus what a model needs to know about it."""

    train: GraphSet
    val: GraphSet
    test: GraphSet
    vocab_size: int
    attack_types: tuple[str, ...] = ATTACK_TYPES
    num_node_features: int = NUM_NODE_FEATURES
    num_edge_features: int = NUM_EDGE_FEATURES
    cache_dir: Path = Path()
    meta: dict[str, Any] = field(default_factory=dict)


_OPEN_STORES: dict[tuple[str, int, int], dict[str, torch.Tensor]] = {}


def _open_store(path: Path) -> dict[str, torch.Tensor]:
    """``graphs.pt`` memory-mapped, once per process and file version."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _OPEN_STORES:
        _OPEN_STORES[key] = torch.load(path, weights_only=True, mmap=True)
    return _OPEN_STORES[key]


def load_graphs(
    dataset: str,
    params: GraphParams,
    *,
    cache: Path | None = None,
    mmap: bool = True,
) -> GraphSplits:
    """Load the cached graphs of ``dataset`` (``paths.cache_dir(dataset)`` unless ``cache``).

    Raises :class:`DataError` naming the preprocess command when there is no cache or when it was
    built with other parameters than ``params``. The raw files are not needed (a cache staged to
    node-local disk loads on its own). ``params`` has no default on purpose: a cache is read with the
    parameters it was built with (the pipeline's: ``kdgat.stages.common.graph_params(config)``)."""
    cache = Path(cache) if cache is not None else paths.cache_dir(dataset)
    meta = read_meta(cache)
    hint = f"run `python -m kdgat preprocess --dataset {dataset}` with the same data.* settings first"
    if meta is None or not (cache / GRAPHS_FILE).is_file():
        raise DataError(f"no graph cache for data set {dataset} at {cache}: {hint}")
    if meta.get("params_digest") != params.digest():
        raise DataError(
            f"graph cache at {cache} was built with parameters {meta.get('params')} "
            f"(format {meta.get('format_version')}), not the requested {params.to_json()} "
            f"(format {CACHE_FORMAT_VERSION}): {hint}"
        )
    path = cache / GRAPHS_FILE
    store = _open_store(path) if mmap else torch.load(path, weights_only=True)
    split = store["split"]
    sets = {
        name: GraphSet(store, torch.nonzero(split == code, as_tuple=False).flatten(), path if mmap else None)
        for name, code in SPLIT_CODES.items()
    }
    return GraphSplits(
        train=sets["train"],
        val=sets["val"],
        test=sets["test"],
        vocab_size=int(meta["vocab_size"]),
        attack_types=tuple(meta["attack_types"]),
        num_node_features=int(store["x"].shape[1]),
        num_edge_features=int(store["edge_attr"].shape[1]),
        cache_dir=cache,
        meta=meta,
    )
