"""GraphParams: its defaults are the pipeline config's, and the cache digest of given values does not
depend on what the defaults are."""

from __future__ import annotations

from dataclasses import fields

from kdgat.config import DataConfig, build_config
from kdgat.data import GraphParams
from kdgat.data.features_payload import PAYLOAD_FEATURES_VERSION
from kdgat.data.features_vi import VI_FEATURES_VERSION
from kdgat.data.params import CACHE_FORMAT_VERSION, CONFIG_FIELDS
from kdgat.stages.common import graph_params

#: The digest of the paper's features without calibration: the one caches had before the other
#: feature sets existed (GraphParams() until the defaults became the config's) at the cache
#: format then, pinned; cache format 3 (window times) changed it, as every format change does.
PAPER_DIGEST = "6c2818d1469295cc5346e7fac082a032fa0ca594aadea3cef8ffefc3dea42f17"
#: The digest of the config's defaults (payload features, calibration 20) at feature versions 3 / 4
#: and cache format 3.
DEFAULT_DIGEST = "01815fe7bfb42c32224df2b808deee418fc6d642718755cfd686545429a369a7"


def test_the_defaults_are_the_configs() -> None:
    config = DataConfig()
    params = GraphParams()
    for name in CONFIG_FIELDS:
        assert getattr(params, name) == getattr(config, name), f"GraphParams().{name}"
    assert (params.features, params.calibration_windows) == ("payload", 20)
    assert params == graph_params(build_config("small")) == graph_params(build_config("large"))


def test_every_data_field_of_the_config_that_graph_params_has_is_mapped() -> None:
    ours = {f.name for f in fields(GraphParams)}
    assert set(CONFIG_FIELDS) == ours & set(DataConfig.model_fields), "CONFIG_FIELDS"
    assert ours - set(CONFIG_FIELDS) == {"max_malformed_fraction"}  # not a config key


def test_from_config_carries_the_overrides() -> None:
    cfg = build_config(
        "small",
        {
            "data.features": "paper",
            "data.calibration_windows": 0,
            "data.window_size": 50,
            "data.stride": 25,
            "evaluation.scoring": "gat",  # the default novelty_timing needs the payload features
        },
    )
    assert GraphParams.from_config(cfg.data) == GraphParams(
        features="paper", calibration_windows=0, window_size=50, stride=25
    )


def test_digests_are_pinned_for_explicit_paper_params_and_for_the_defaults() -> None:
    assert CACHE_FORMAT_VERSION == 3, "the cache format changed, and every digest: update the pins"
    paper = GraphParams(features="paper", calibration_windows=0)
    assert paper.digest() == PAPER_DIGEST
    # the paper's digest leaves out the fields it does not use, whatever their values
    unused = GraphParams(features="paper", calibration_windows=0, novelty_history=7, profile_windows=3)
    assert unused.digest() == PAPER_DIGEST
    assert (VI_FEATURES_VERSION, PAYLOAD_FEATURES_VERSION) == (3, 4), (
        "a feature version changed, and with it the default's digest: update DEFAULT_DIGEST"
    )
    assert GraphParams().digest() == DEFAULT_DIGEST
    assert GraphParams(features="payload", calibration_windows=20).digest() == DEFAULT_DIGEST
    assert GraphParams().to_json() == {
        "window_size": 100,
        "stride": 100,
        "val_fraction": 0.1,
        "test_fraction": 0.2,
        "split_seed": 0,
        "max_malformed_fraction": 0.05,
        "features": "payload",
        "novelty_history": 1000,
        "calibration_windows": 20,
        "profile_windows": 20,
        "vi_version": VI_FEATURES_VERSION,
        "payload_version": PAYLOAD_FEATURES_VERSION,
    }
