"""Pipeline configuration: frozen pydantic models, presets per (model, scale), ``-O`` overrides.

``PipelineConfig`` is what every stage reads. ``python -m kdgat schema`` prints its JSON Schema,
which the runner (``@kdgat/config``) uses to check overrides before anything is queued.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

Precision = Literal["32", "16-mixed", "bf16-mixed"]
#: How the evaluation stage scores a window; kdgat.scoring fits each (its SCORING_MODES is this list).
ScoringMode = Literal[
    "gat",
    "vgae",
    "fusion_learned",
    "fusion_weighted",
    "fusion_max",
    "fusion_novelty",
    "novelty_mean_or_max",
    "novelty_timing",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TrainingConfig(_Frozen):
    lr: float = Field(1e-3, gt=0)
    max_epochs: int = Field(20, ge=1)
    batch_size: int = Field(64, ge=1)
    limit_train_batches: int | None = Field(
        64,
        ge=1,
        description="at most this many training batches per epoch, a fresh shuffled draw each epoch "
        "(Lightning's limit_train_batches); null: every training window each epoch. The default 64 "
        "(4,096 windows at batch 64) trains the chain at scale large on the 18 real recordings in "
        "about 11 minutes on 2 CPU cores, where full epochs take over 23 (python/README.md)",
    )
    precision: Precision = "16-mixed"
    precision_fallback: Literal["32", "bf16-mixed"] = Field(
        "32",
        description="what runs instead when precision is 16-mixed and there is no CUDA device "
        "(fp16 autocast needs a GPU); metrics.json records the precision that ran",
    )
    seed: int = Field(42, ge=0)
    patience: int = Field(10, ge=0, description="early-stopping patience in epochs (0: off)")
    profile: bool = False
    profile_steps: int = Field(5, ge=1)
    memory_estimation: Literal["heuristic", "trial", "fixed"] = "fixed"
    memory_budget_mb: int = Field(
        2048, ge=16, description="trial batch sizing on CPU: activation memory budget (MB)"
    )
    safety_factor: float = Field(0.85, gt=0, le=1)
    gradient_checkpointing: bool = False
    max_oom_retries: int = Field(3, ge=0)

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_text(cls, v: Any) -> Any:
        # ``-O training.precision 32`` arrives as the number 32.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    memory_snapshot: bool = Field(
        False,
        description="record the CUDA allocator history around the fit and write "
        "memory_snapshot.pickle in the run dir (open at pytorch.org/memory_viz); no-op without CUDA",
    )


class DataConfig(_Frozen):
    num_workers: int | None = Field(None, ge=0, description="None: SLURM_CPUS_PER_TASK - 1, else cores - 1")
    persistent_workers: bool = True
    prefetch_factor: int = Field(3, ge=1)
    pin_memory: bool = True
    window_size: int = Field(100, ge=2)
    stride: int = Field(100, ge=1)
    val_fraction: float = Field(0.1, ge=0, lt=1)
    test_fraction: float = Field(0.2, ge=0, lt=1)
    split_seed: int = Field(0, ge=0)
    features: Literal["paper", "vehicle_independent", "payload"] = Field(
        "payload",
        description="node/edge features of the window graphs: paper = the published 11 + 11 with the "
        "CAN-ID vocabulary index; vehicle_independent = rate, period, regularity, payload entropy and "
        "change, novelty (kdgat.data.features_vi); payload = vehicle_independent plus six columns "
        "against each ID's own payload profile: value jumps, range, early messages, new change "
        "patterns and values (kdgat.data.features_payload); part of the graph cache key",
    )
    novelty_history: int = Field(
        1000, ge=1, description="vehicle_independent and payload features: novelty horizon in messages"
    )
    profile_windows: int = Field(
        20,
        ge=1,
        description="payload features: each recording's per-ID payload profile is learned from its own "
        "first N windows (unlabelled traffic only)",
    )
    calibration_windows: int = Field(
        20,
        ge=0,
        description="0: normalise features by benign training windows; K > 0: per-recording "
        "calibration, each recording normalised by its own first K windows (unlabelled traffic only)",
    )


class EvaluationConfig(_Frozen):
    scoring: ScoringMode = Field(
        "novelty_timing",
        description="how the evaluation stage scores a window: the GAT, the VGAE anomaly score, or a "
        "fusion fitted on the validation windows (kdgat.scoring; fusion_novelty: the GAT's verdict, at "
        "0.5 or a higher bar where that flags the validation windows with a better F1, plus the VGAE "
        "only for windows beyond the benign validation windows' tail; novelty_mean_or_max: "
        "the same by the mean or the largest of the window's VGAE node losses; novelty_timing: "
        "novelty_mean_or_max, plus every window with an extra message of a periodic ID, closer than half "
        "its profiled period to its neighbour, which needs data.features payload); all but gat need the "
        "autoencoder stage",
    )
    warmup_windows: int = Field(
        0,
        ge=0,
        description="a recording's first N windows get no verdict (scored benign): a detector's warm-up, "
        "for traffic whose start is not representative; 0: every window is judged. Every scoring mode "
        "but gat (the published classifier judges every window)",
    )


class GATArchitecture(_Frozen):
    hidden: int = Field(48, ge=1)
    layers: int = Field(3, ge=1)
    heads: int = Field(8, ge=1)
    embedding_dim: int = Field(16, ge=1)
    fc_layers: int = Field(1, ge=1)
    dropout: float = Field(0.2, ge=0, le=1)
    conv: Literal["gat", "gatv2"] = "gat"
    use_cugraph: bool = False


class VGAEArchitecture(_Frozen):
    hidden_dims: tuple[int, ...] = (480, 240, 48)
    latent_dim: int = Field(48, ge=1)
    heads: int = Field(4, ge=1)
    embedding_dim: int = Field(16, ge=1)
    dropout: float = Field(0.1, ge=0, le=1)
    use_cugraph: bool = False


class KDConfig(_Frozen):
    temperature: float = Field(4.0, gt=0)
    alpha: float = Field(0.7, ge=0, le=1)


class MlflowTracking(_Frozen):
    uri: str | None = Field(
        None,
        description="MLflow tracking URI: http(s)://host:port of an `mlflow server` (safe from any node), "
        "or sqlite:///<path> on local disk; null: $MLFLOW_TRACKING_URI, and without it no MLflow. "
        "A sqlite:/// file on NFS, Lustre or GPFS is refused (SQLite's locking is not safe there)",
    )
    experiment: str | None = Field(
        None,
        description="MLflow experiment name; null: $MLFLOW_EXPERIMENT_NAME, else the run's experiment "
        "(its manifest.json), else kdgat",
    )


class WandbTracking(_Frozen):
    enabled: bool = Field(
        False,
        description="log to Weights & Biases too (also switched on by $KD_GAT_WANDB=1); files in "
        "<run dir>/wandb, uploaded later by `python -m kdgat tracking-sync --run-dir DIR`",
    )
    project: str | None = Field(None, description="W&B project; null: $WANDB_PROJECT, else kdgat")
    mode: Literal["offline", "online"] = Field(
        "offline",
        description="offline: files only, synced later (compute nodes have no network); online is "
        "used as offline inside a SLURM job",
    )


class TrackingConfig(_Frozen):
    tensorboard: bool = Field(
        True,
        description="TensorBoard event files in <run dir>/tensorboard (every training stage; false "
        "only to measure the pipeline without them)",
    )
    log_every_n_steps: int = Field(
        10, ge=1, description="per-step scalars (loss, learning rate) every N optimizer steps"
    )
    mlflow: MlflowTracking = MlflowTracking()
    wandb: WandbTracking = WandbTracking()


#: Rules across sections: when the ``if`` key has that value, the ``then`` key must have its value.
#: Checked here (:class:`PipelineConfig`) and, from the schema's ``x-requires``, by the runner before
#: anything is queued (``@kdgat/config`` ``validateOverrides``).
REQUIREMENTS: tuple[dict[str, Any], ...] = (
    {
        "if": {"key": "evaluation.scoring", "equals": "novelty_timing"},
        "then": {"key": "data.features", "equals": "payload"},
        "why": "novelty_timing reads the payload features' period column",
    },
)


def _dotted(model: BaseModel, key: str) -> Any:
    value: Any = model
    for part in key.split("."):
        value = getattr(value, part)
    return value


class PipelineConfig(_Frozen):
    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_extra={"x-requires": list(REQUIREMENTS)}
    )

    training: TrainingConfig = TrainingConfig()
    data: DataConfig = DataConfig()
    gat: GATArchitecture = GATArchitecture()
    vgae: VGAEArchitecture = VGAEArchitecture()
    kd: KDConfig = KDConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    tracking: TrackingConfig = TrackingConfig()

    @model_validator(mode="after")
    def _requirements(self) -> PipelineConfig:
        for rule in REQUIREMENTS:
            when, then = rule["if"], rule["then"]
            found = _dotted(self, then["key"])
            if _dotted(self, when["key"]) == when["equals"] and found != then["equals"]:
                raise ValueError(
                    f"{when['key']} = {when['equals']!r} needs {then['key']} = {then['equals']!r} "
                    f"({rule['why']}); {then['key']} is {found!r}: set it, or choose another {when['key']}"
                )
        return self


#: Presets of the published KD-GAT code: large = teacher, small = student (6.32% of the teacher).
PRESETS: dict[str, dict[str, Any]] = {
    "large": {
        "gat": {"hidden": 48, "layers": 3, "heads": 8, "embedding_dim": 16, "fc_layers": 1},
        "vgae": {"hidden_dims": (480, 240, 48), "latent_dim": 48, "heads": 4, "embedding_dim": 16},
    },
    "small": {
        "gat": {"hidden": 24, "layers": 2, "heads": 4, "embedding_dim": 8, "fc_layers": 2},
        "vgae": {"hidden_dims": (80, 40, 16), "latent_dim": 16, "heads": 2, "embedding_dim": 8},
    },
}


class ConfigError(ValueError):
    """A bad override: names the key, the value and what was expected."""


def leaf_keys(model: type[BaseModel] = PipelineConfig, prefix: str = "") -> list[str]:
    """Every dotted key of the config (``training.lr``, …)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += leaf_keys(ann, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def _coerce(text: str) -> Any:
    """``-O`` values arrive as text: JSON where it parses (numbers, booleans, lists), else the string."""
    low = text.strip().lower()
    if low in {"true", "false"}:
        return low == "true"
    if low in {"none", "null"}:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def apply_overrides(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    keys = leaf_keys()
    out = json.loads(json.dumps(base))
    for key, raw in overrides.items():
        if key not in keys:
            near = difflib.get_close_matches(key, keys, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(f"unknown config key {key!r}{hint}")
        *sections, name = key.split(".")
        node = out
        for section in sections:  # tracking.mlflow.uri: two sections deep
            node = node.setdefault(section, {})
        node[name] = _coerce(raw) if isinstance(raw, str) else raw
    return out


def build_config(scale: str, overrides: dict[str, Any] | None = None) -> PipelineConfig:
    """The preset of ``scale`` with ``overrides`` (dotted keys) applied and validated."""
    if scale not in PRESETS:
        raise ConfigError(f"scale {scale!r} is unknown; expected one of {', '.join(PRESETS)}")
    data = apply_overrides(PRESETS[scale], overrides or {})
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as e:
        # an error of the whole config (a rule across sections) names its fields in its message
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])} = {err.get('input')!r}: {err['msg']}"
            if err["loc"]
            else err["msg"].removeprefix("Value error, ")
            for err in e.errors()
        )
        raise ConfigError(f"invalid config: {problems}") from None


def slurm_cpus() -> int | None:
    """The cores SLURM allocated to this task (``SLURM_CPUS_PER_TASK``; the local scheduler sets it
    too), or None outside an allocation that names them."""
    slurm = os.environ.get("SLURM_CPUS_PER_TASK", "")
    return int(slurm) if slurm.isdigit() and int(slurm) > 0 else None


def default_num_workers() -> int:
    """DataLoader workers: one core stays with the training process."""
    return max(0, (slurm_cpus() or os.cpu_count() or 1) - 1)


def json_schema() -> dict[str, Any]:
    """The config's JSON Schema (what ``python -m kdgat schema`` prints)."""
    return PipelineConfig.model_json_schema()
