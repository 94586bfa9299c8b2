"""Where the pipeline reads raw CAN files, keeps its graph cache and writes run directories.

The job scripts stage the cache to node-local disk and export ``KD_GAT_CACHE_ROOT``; everything
that locates a cache goes through :func:`cache_dir` so that the staged copy is the one read.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kdgat import contract

CACHE_ROOT_ENV = "KD_GAT_CACHE_ROOT"
DATA_ROOT_ENV = "KD_GAT_DATA_ROOT"
RUN_ROOT_ENV = "KD_GAT_RUN_ROOT"

DEFAULT_CACHE_ROOT = Path("data/cache")
DEFAULT_DATA_ROOT = Path("data/raw")
DEFAULT_RUN_ROOT = Path("experimentruns")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _check_name(kind: str, value: str) -> str:
    # A dataset/model name becomes a path component: refuse separators and "..".
    if not _NAME.fullmatch(value) or value in {".", ".."}:
        raise ValueError(
            f"{kind} {value!r} is not a valid name: expected letters, digits, '.', '_' or '-' "
            "(starting with a letter or digit), since it becomes a directory name"
        )
    return value


def _root(env: str, default: Path) -> Path:
    value = os.environ.get(env, "")
    return Path(value) if value.strip() else default


def cache_dir(dataset: str) -> Path:
    """Cache directory of ``dataset``: ``$KD_GAT_CACHE_ROOT/<dataset>`` when the variable is set
    (and not empty), else ``data/cache/<dataset>`` relative to the working directory."""
    return _root(CACHE_ROOT_ENV, DEFAULT_CACHE_ROOT) / _check_name("dataset", dataset)


def raw_dir(dataset: str) -> Path:
    """Directory of raw CAN files of ``dataset``: ``$KD_GAT_DATA_ROOT/<dataset>`` when set,
    else ``data/raw/<dataset>``."""
    return _root(DATA_ROOT_ENV, DEFAULT_DATA_ROOT) / _check_name("dataset", dataset)


def run_root(run_root: str | os.PathLike[str] | None = None) -> Path:
    """The run root: the argument when given, else ``$KD_GAT_RUN_ROOT``, else ``experimentruns``."""
    if run_root is not None and str(run_root) != "":
        return Path(run_root)
    return _root(RUN_ROOT_ENV, DEFAULT_RUN_ROOT)


def run_dir(
    run_root_arg: str | os.PathLike[str] | None,
    dataset: str,
    model: str,
    scale: str,
    stage: str,
) -> Path:
    """Run directory ``<run_root>/<dataset>/<model>_<scale>_<stage>/`` (the layout of
    :mod:`kdgat.contract`; not created here)."""
    name = contract.run_dir_name(
        _check_name("model", model), _check_name("scale", scale), _check_name("stage", stage)
    )
    return run_root(run_root_arg) / _check_name("dataset", dataset) / name
