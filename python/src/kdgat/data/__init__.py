"""KD-GAT data: CAN log readers, synthetic traffic, window graphs and the per-data-set cache.

Public API (shapes in the docstrings of each name):

- :class:`GraphParams` — preprocessing parameters (window_size, stride, val_fraction,
  test_fraction, split_seed, max_malformed_fraction, features, novelty_history,
  calibration_windows, profile_windows); frozen; ``digest()`` keys the cache; the defaults are the
  pipeline config's (``DataConfig``), ``GraphParams.from_config(cfg.data)`` a run's.
- :func:`preprocess_dataset` ``(dataset, params, *, workers, raw=None, cache=None, force=False,
  from_shards=False) -> CacheInfo`` — raw files -> ``graphs.pt`` + ``vocab.json`` + ``meta.json``;
  reused when unchanged; ``from_shards``: joined from the shard store of a sharded preprocess
  (:mod:`kdgat.data.shards`: ``build_shard``, one array task's share).
- :func:`load_graphs` ``(dataset, params, *, cache=None) -> GraphSplits`` — ``.train/.val/.test``
  are :class:`GraphSet` (``Dataset[Data]``), plus ``vocab_size`` and ``attack_types``.
- :func:`write_synthetic_dataset` — a labelled synthetic CAN data set on disk.
- :func:`read_can_file` — one file -> (:class:`CanMessages`, :class:`ParseReport`).
- :func:`build_window_graphs` — messages -> collated :class:`WindowGraphs` (raw features).
"""

from kdgat.data.build import list_sources, preprocess_dataset
from kdgat.data.cache import CacheInfo
from kdgat.data.dataset import GraphSet, GraphSplits, load_graphs
from kdgat.data.errors import DataError
from kdgat.data.graphs import (
    EDGE_FEATURES,
    NODE_FEATURES,
    NUM_EDGE_FEATURES,
    NUM_NODE_FEATURES,
    WindowGraphs,
    build_window_graphs,
)
from kdgat.data.messages import CanMessages, ParseReport
from kdgat.data.params import ATTACK_TYPES, GraphParams, attack_type_of, split_of
from kdgat.data.readers import FORMATS, detect_format, read_can_file
from kdgat.data.synth import (
    ATTACKS,
    SYNTH_FORMATS,
    generate_can_traffic,
    write_can_file,
    write_synthetic_dataset,
)
from kdgat.data.vocab import CanIdVocab

__all__ = [
    "ATTACKS",
    "ATTACK_TYPES",
    "EDGE_FEATURES",
    "FORMATS",
    "NODE_FEATURES",
    "NUM_EDGE_FEATURES",
    "NUM_NODE_FEATURES",
    "SYNTH_FORMATS",
    "CacheInfo",
    "CanIdVocab",
    "CanMessages",
    "DataError",
    "GraphParams",
    "GraphSet",
    "GraphSplits",
    "ParseReport",
    "WindowGraphs",
    "attack_type_of",
    "build_window_graphs",
    "detect_format",
    "generate_can_traffic",
    "list_sources",
    "load_graphs",
    "preprocess_dataset",
    "read_can_file",
    "split_of",
    "write_can_file",
    "write_synthetic_dataset",
]
