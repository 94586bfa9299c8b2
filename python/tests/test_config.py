import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from kdgat.config import ConfigError, PipelineConfig, build_config, json_schema
from kdgat.tune.study import study_json_schema

SCHEMA = Path(__file__).parents[2] / "libs" / "config" / "schema" / "pipeline.schema.json"
STUDY_SCHEMA = SCHEMA.with_name("study.schema.json")


def test_presets_follow_the_published_code() -> None:
    large, small = build_config("large"), build_config("small")
    assert (
        large.gat.hidden,
        large.gat.layers,
        large.gat.heads,
        large.gat.embedding_dim,
        large.gat.fc_layers,
    ) == (48, 3, 8, 16, 1)
    assert (
        small.gat.hidden,
        small.gat.layers,
        small.gat.heads,
        small.gat.embedding_dim,
        small.gat.fc_layers,
    ) == (24, 2, 4, 8, 2)
    assert large.vgae.hidden_dims == (480, 240, 48) and large.vgae.latent_dim == 48
    assert small.vgae.hidden_dims == (80, 40, 16) and small.vgae.latent_dim == 16
    assert (large.kd.temperature, large.kd.alpha) == (4.0, 0.7)
    assert large.training.profile is False and large.training.profile_steps == 5


def test_overrides_are_coerced_from_text() -> None:
    cfg = build_config(
        "small",
        {
            "training.lr": "0.01",
            "training.profile": "true",
            "vgae.hidden_dims": "[8, 4]",
            "data.num_workers": "none",
        },
    )
    assert cfg.training.lr == 0.01 and cfg.training.profile is True
    assert cfg.vgae.hidden_dims == (8, 4) and cfg.data.num_workers is None


def test_unknown_key_names_the_nearest_valid_one() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown config key 'training\.lrr'; did you mean 'training\.lr'\?"
    ):
        build_config("large", {"training.lrr": "0.1"})


def test_bad_value_names_key_value_and_expectation() -> None:
    with pytest.raises(ConfigError, match=r"training\.memory_estimation = 'guess'"):
        build_config("large", {"training.memory_estimation": "guess"})


def test_a_rule_across_sections_names_both_keys_and_is_in_the_schema() -> None:
    # the defaults are the pair; another feature set alone breaks it, and the error says both ways out
    default = build_config("small")
    assert (default.evaluation.scoring, default.data.features) == ("novelty_timing", "payload")
    with pytest.raises(ConfigError) as e:
        build_config("small", {"data.features": "vehicle_independent"})
    assert str(e.value) == (
        "invalid config: evaluation.scoring = 'novelty_timing' needs data.features = 'payload' "
        "(novelty_timing reads the payload features' period column); data.features is "
        "'vehicle_independent': set it, or choose another evaluation.scoring"
    )
    ok = build_config("small", {"evaluation.scoring": "fusion_max", "data.features": "vehicle_independent"})
    assert ok.evaluation.scoring == "fusion_max"
    # the runner checks the same rule before anything is queued, from the schema
    assert json_schema()["x-requires"] == [
        {
            "if": {"key": "evaluation.scoring", "equals": "novelty_timing"},
            "then": {"key": "data.features", "equals": "payload"},
            "why": "novelty_timing reads the payload features' period column",
        }
    ]


def test_config_is_frozen() -> None:
    cfg = build_config("large")
    with pytest.raises(ValidationError):
        cfg.training.lr = 1.0  # type: ignore[misc]
    assert isinstance(cfg, PipelineConfig)


def test_checked_in_schema_is_fresh() -> None:
    """libs/config validates overrides with this file: regenerate with
    `python -m kdgat schema > libs/config/schema/pipeline.schema.json`."""
    assert json.loads(SCHEMA.read_text()) == json.loads(json.dumps(json_schema()))


def test_checked_in_study_schema_is_fresh() -> None:
    """The runner validates study.json with this file and the spec's ``tune:`` bounds come from it:
    regenerate with `python -m kdgat schema study > libs/config/schema/study.schema.json`."""
    assert json.loads(STUDY_SCHEMA.read_text()) == json.loads(json.dumps(study_json_schema()))
