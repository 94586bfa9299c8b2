"""Every checkpoint load states ``weights_only``: a ``torch.load`` without it takes torch's default
(True since 2.6, but ``$TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` turns an unstated one into False, and
older torch unpickles anything), so a file planted in a scratch dir could run code as the user.
The sources of python/, examples/ and bench/ are read as syntax trees: ``torch.load(…)`` (however
torch was imported), Lightning's ``load_from_checkpoint(…)`` and a ``fit``/``validate``/``test``/
``predict`` call given ``ckpt_path=`` must each pass ``weights_only=``. The checker is shown to
find each kind of call in a planted snippet first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("python", "examples", "bench")
#: Trainer methods that load a checkpoint when given ``ckpt_path=``.
TRAINER_LOADS = frozenset({"fit", "validate", "test", "predict"})


def _torch_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names the module binds to the torch module (``import torch as th``) and to
    ``torch.load`` itself (``from torch import load as tl``)."""
    modules, loads = {"torch"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in {"torch", "torch.serialization"}:
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module in {"torch", "torch.serialization"}:
            for a in node.names:
                if a.name == "load":
                    loads.add(a.asname or "load")
                elif a.name == "serialization":
                    modules.add(a.asname or "serialization")
    return modules, loads


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def unstated_loads(source: str, name: str = "<snippet>") -> list[str]:
    """``file:line: call`` for each checkpoint load in ``source`` that does not pass
    ``weights_only=`` (a ``**kwargs`` call counts as not stating it: it cannot be read)."""
    tree = ast.parse(source, filename=name)
    modules, loads = _torch_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg for k in node.keywords}
        if "weights_only" in keywords:
            continue
        f = node.func
        what = None
        if isinstance(f, ast.Name) and f.id in loads:
            what = f.id
        elif isinstance(f, ast.Attribute):
            base = _dotted(f.value)
            serialization = base.split(".")[0] in modules and base.endswith(".serialization")
            torch_module = base in modules or serialization
            if f.attr == "load" and torch_module:
                what = f"{base}.load"
            elif f.attr == "load_from_checkpoint":
                what = f"{base}.load_from_checkpoint"
            elif f.attr in TRAINER_LOADS and "ckpt_path" in keywords:
                what = f"{base}.{f.attr}(ckpt_path=…)"
        if what is not None:
            found.append(f"{name}:{node.lineno}: {what} without weights_only=")
    return found


def _sources() -> list[Path]:
    out = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).parts
            if any(p.startswith(".") or p in {"node_modules", "__pycache__", "build", "dist"} for p in parts):
                continue
            out.append(path)
    return out


PLANTED = """
import torch
import torch as th
from torch import load as tload
from lightning import Trainer
from mymodel import Model

state = torch.load("a.ckpt")                                  # 8: flagged
ok = torch.load("a.ckpt", weights_only=True)
th.load(path, map_location="cpu")                             # 10: flagged
tload(path)                                                   # 11: flagged
torch.serialization.load(path)                                # 12: flagged
Model.load_from_checkpoint("last.ckpt")                       # 13: flagged
Model.load_from_checkpoint("last.ckpt", weights_only=True)
trainer = Trainer()
trainer.fit(model, loader, ckpt_path="last.ckpt")             # 16: flagged
trainer.fit(model, loader, ckpt_path="last.ckpt", weights_only=True)
trainer.fit(model, loader)
trainer.test(model, ckpt_path="best")                         # 19: flagged
torch.load(path, **options)                                   # 20: flagged
json.load(handle)
yaml.load(text)
"""


def test_the_checker_finds_each_kind_of_unstated_load_in_a_planted_snippet() -> None:
    found = unstated_loads(PLANTED, "planted.py")
    assert [int(f.split(":")[1]) for f in found] == [8, 10, 11, 12, 13, 16, 19, 20], "\n".join(found)
    assert found[0] == "planted.py:8: torch.load without weights_only="
    assert "Model.load_from_checkpoint" in found[4] and "trainer.fit(ckpt_path=…)" in found[5]


def test_the_sources_are_read() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _sources()}
    for expected in (
        "python/src/kdgat/stages/common.py",
        "python/src/kdgat/training/fit.py",
        "examples/pipelines/tiny-lightning/src/tiny_lightning/train.py",
        "bench/real-data/run.py",
    ):
        assert expected in names, f"{expected} not among the {len(names)} sources read"


@pytest.mark.parametrize("root", ROOTS)
def test_every_checkpoint_load_states_weights_only(root: str) -> None:
    found = []
    for path in _sources():
        if path.relative_to(REPO).parts[0] == root:
            found += unstated_loads(path.read_text(), path.relative_to(REPO).as_posix())
    assert not found, "state weights_only= (True unless the file is trusted code):\n" + "\n".join(found)
