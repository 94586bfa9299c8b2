"""Preprocessing parameters and the data-set conventions (splits by file name, attack types)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import PurePath
from typing import Any

from kdgat.config import DataConfig
from kdgat.data.features_payload import PAYLOAD_FEATURES_VERSION
from kdgat.data.features_vi import VI_FEATURES_VERSION

#: Bump when the cache layout or the meaning of a feature changes: old caches then rebuild.
#: 2: the CAN-ID vocabulary holds the IDs of the benign training windows (after the split), not
#: every benign message of the training files (which, in a random split, read test labels).
#: 3: ``window_times`` per window (first and last message, first injected message, verdict time:
#: :mod:`kdgat.data.verdict`), for the evaluation's delays and false alarms per hour.
CACHE_FORMAT_VERSION = 3

#: Node/edge feature sets a cache can hold (``GraphParams.features``).
FEATURE_SETS: tuple[str, ...] = ("paper", "vehicle_independent", "payload")

#: Index -> name of ``attack_type`` (per window; 0 for benign windows).
ATTACK_TYPES: tuple[str, ...] = ("benign", "dos", "fuzzy", "gear", "rpm", "other")

# File-name keywords -> attack type, checked in this order against the lower-cased relative path.
_ATTACK_KEYWORDS: tuple[tuple[str, int], ...] = (
    ("dos", 1),
    ("fuzz", 2),
    ("gear", 3),
    ("rpm", 4),
)


def _config_default(name: str) -> Any:
    """The pipeline config's default of ``data.<name>`` (:class:`kdgat.config.DataConfig`): the one
    place the data fields' defaults are declared."""
    return DataConfig.model_fields[name].default


#: The fields of :class:`GraphParams` that are ``data.*`` keys of the pipeline config.
CONFIG_FIELDS: tuple[str, ...] = (
    "window_size",
    "stride",
    "val_fraction",
    "test_fraction",
    "split_seed",
    "features",
    "novelty_history",
    "calibration_windows",
    "profile_windows",
)


@dataclass(frozen=True)
class GraphParams:
    """Everything that decides the graphs in a cache (all of it goes into the cache hash).

    Every field but ``max_malformed_fraction`` is a ``data.*`` key of the pipeline config, and its
    default is the config's (:class:`kdgat.config.DataConfig`, read here): ``GraphParams()`` builds
    the graphs a run with the default config reads (the ``payload`` features, calibrated by each
    recording's first 20 windows). The published paper's features are
    ``GraphParams(features="paper", calibration_windows=0)``. :meth:`from_config` maps a run's
    ``DataConfig`` onto it.

    - ``window_size``: messages per window (W, >= 2)
    - ``stride``: messages between window starts (``== window_size``: non-overlapping)
    - ``val_fraction``: share of training windows held out as validation (random, by seed)
    - ``test_fraction``: share of windows held out as test, used only when the data set has no
      test files (see :func:`split_of`)
    - ``split_seed``: seed of those random hold-outs
    - ``max_malformed_fraction``: a file with more malformed rows than this share is refused
      (likely the wrong format) instead of being used with the rows counted
    - ``features``: ``"paper"`` (the published 11 + 11 features, CAN-ID vocabulary index first,
      :mod:`kdgat.data.graphs`) or ``"vehicle_independent"`` (:mod:`kdgat.data.features_vi`)
      or ``"payload"`` (the vehicle-independent set plus six payload-semantics columns measured
      against each ID's own profile, :mod:`kdgat.data.features_payload`)
    - ``novelty_history``: the novelty horizon H in messages (vehicle-independent and payload)
    - ``profile_windows``: payload features only: each recording's per-ID payload profile is
      learned from its own first N windows (unlabelled, like calibration)
    - ``calibration_windows``: 0 = normalise with benign training windows; K > 0 = normalise each
      recording by its own first K windows, unlabelled (:mod:`kdgat.data.calibration`)

    The digest of the paper features without calibration is the one caches had before the other
    feature sets existed (the new fields enter the digest only when they differ from that, and
    ``profile_windows`` only with the payload features). That baseline is the values
    ``features="paper"``, ``calibration_windows=0``, not the defaults: the same values give the
    same digest whatever the defaults are.
    """

    window_size: int = _config_default("window_size")
    stride: int = _config_default("stride")
    val_fraction: float = _config_default("val_fraction")
    test_fraction: float = _config_default("test_fraction")
    split_seed: int = _config_default("split_seed")
    max_malformed_fraction: float = 0.05
    features: str = _config_default("features")
    novelty_history: int = _config_default("novelty_history")
    calibration_windows: int = _config_default("calibration_windows")
    profile_windows: int = _config_default("profile_windows")

    @classmethod
    def from_config(cls, data: DataConfig) -> GraphParams:
        """The graph parameters of a run's ``data`` section (``PipelineConfig.data``)."""
        return cls(**{name: getattr(data, name) for name in CONFIG_FIELDS})

    def __post_init__(self) -> None:
        if not isinstance(self.window_size, int) or self.window_size < 2:
            raise ValueError(f"GraphParams.window_size is {self.window_size!r}; expected an int >= 2")
        if not isinstance(self.stride, int) or self.stride < 1:
            raise ValueError(f"GraphParams.stride is {self.stride!r}; expected an int >= 1")
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"GraphParams.{name} is {value!r}; expected 0 <= value < 1")
        if self.val_fraction + self.test_fraction >= 1.0:
            raise ValueError(
                "GraphParams.val_fraction + test_fraction is "
                f"{self.val_fraction + self.test_fraction}; expected < 1 (training must remain)"
            )
        if not 0.0 <= self.max_malformed_fraction <= 1.0:
            raise ValueError(
                f"GraphParams.max_malformed_fraction is {self.max_malformed_fraction!r}; expected 0..1"
            )
        if self.features not in FEATURE_SETS:
            raise ValueError(
                f"GraphParams.features is {self.features!r}; expected one of {', '.join(FEATURE_SETS)}"
            )
        if not isinstance(self.novelty_history, int) or self.novelty_history < 1:
            raise ValueError(f"GraphParams.novelty_history is {self.novelty_history!r}; expected an int >= 1")
        if not isinstance(self.profile_windows, int) or self.profile_windows < 1:
            raise ValueError(f"GraphParams.profile_windows is {self.profile_windows!r}; expected an int >= 1")
        if not isinstance(self.calibration_windows, int) or self.calibration_windows < 0:
            raise ValueError(
                f"GraphParams.calibration_windows is {self.calibration_windows!r}; expected an int >= 0"
            )

    def to_json(self) -> dict[str, object]:
        doc = asdict(self)
        if self.features == "paper":
            del doc["features"], doc["novelty_history"]
        else:
            doc["vi_version"] = VI_FEATURES_VERSION
        if self.features != "payload":
            del doc["profile_windows"]
        else:
            doc["payload_version"] = PAYLOAD_FEATURES_VERSION
        if self.calibration_windows == 0:
            del doc["calibration_windows"]
        return doc

    def digest(self) -> str:
        """sha256 of the canonical parameters and the cache format version."""
        text = json.dumps({"v": CACHE_FORMAT_VERSION, **self.to_json()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def split_of(relative_path: str | PurePath) -> str:
    """``"test"`` when a component of the path (a folder or the file name) starts with ``test``
    (case-insensitive), else ``"train"``. Examples: ``test_dos.csv``,
    ``test_01_known_vehicle_known_attack/DoS-3.csv`` -> test; ``train_01/DoS-1.csv``,
    ``DoS_dataset.csv`` -> train. Validation windows are always drawn from training windows."""
    parts = PurePath(relative_path).parts
    return "test" if any(p.lower().startswith("test") for p in parts) else "train"


def attack_type_of(relative_path: str | PurePath) -> int:
    """Attack type that the attack windows of a file get, from keywords in its path:
    ``dos`` -> 1, ``fuzz`` -> 2, ``gear`` -> 3, ``rpm`` -> 4, anything else -> 5 (other)."""
    text = str(PurePath(relative_path)).lower()
    for keyword, index in _ATTACK_KEYWORDS:
        if keyword in text:
            return index
    return 5


def node_feature_names(features: str) -> tuple[str, ...]:
    """The node feature columns of a feature set (column 0 the CAN-ID vocabulary index, or 0)."""
    # imported here: those modules build on this one
    from kdgat.data.features_payload import PAYLOAD_NODE_FEATURES
    from kdgat.data.features_vi import VI_NODE_FEATURES
    from kdgat.data.graphs import NODE_FEATURES

    names = {
        "paper": NODE_FEATURES,
        "vehicle_independent": VI_NODE_FEATURES,
        "payload": PAYLOAD_NODE_FEATURES,
    }
    if features not in names:
        raise ValueError(f"features is {features!r}; expected one of {', '.join(FEATURE_SETS)}")
    return names[features]


def node_feature_count(features: str) -> int:
    """Node features per window-graph node of a feature set: 11 for ``paper`` and
    ``vehicle_independent``, 17 for ``payload``. The models are built with it
    (:func:`kdgat.models.build_model`)."""
    return len(node_feature_names(features))
