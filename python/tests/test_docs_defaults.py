"""The defaults the docs state are the code's: a table with a ``key`` and a ``default`` column gives
pipeline config keys (``data.features``) and their defaults, read from ``kdgat.config`` (whose JSON
Schema, libs/config/schema/, is generated from it); a table with a ``field`` and a ``default`` column
under a heading that names a class in backticks (``GraphParams``) gives that class's fields. Prose of
the form "`-O KEY …`, default V" or "`KEY` defaults to V" is checked too. Every README.md of the
repository and the Markdown under a docs/ folder is read."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kdgat.config import PipelineConfig, leaf_keys
from kdgat.data import GraphParams

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "libs" / "config" / "schema" / "pipeline.schema.json"

#: Classes whose fields a ``| field | default |`` table may document (named in its heading).
DOCUMENTED_CLASSES: dict[str, Any] = {"GraphParams": GraphParams}


def config_defaults() -> dict[str, Any]:
    """Every dotted config key and its default, as JSON values (``None`` for null)."""
    doc = PipelineConfig().model_dump(mode="json")
    out: dict[str, Any] = {}
    for key in leaf_keys():
        value: Any = doc
        for part in key.split("."):
            value = value[part]
        out[key] = value
    return out


def class_defaults(cls: Any) -> dict[str, Any]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return {name: f.default for name, f in cls.model_fields.items()}
    return {f.name: f.default for f in dataclasses.fields(cls)}


def _cell(text: str) -> str:
    return text.strip().replace("**", "").strip().strip("`").strip()


def same_value(stated: str, expected: Any) -> bool:
    """Whether a doc's text states ``expected``: ``null``/``None``, ``true``/``false``, numbers
    (``4,096`` and ``1e-3`` read as numbers), strings as written, lists as ``[a, b]`` or ``(a, b)``."""
    text = _cell(stated)
    if expected is None:
        return text.lower() in {"null", "none"}
    if isinstance(expected, bool):
        return text.lower() == str(expected).lower()
    if isinstance(expected, (int, float)):
        try:
            return math.isclose(float(text.replace(",", "").replace("_", "")), float(expected))
        except ValueError:
            return False
    if isinstance(expected, (list, tuple)):
        items = [i for i in re.split(r"[\s,()\[\]]+", text) if i]
        return len(items) == len(expected) and all(
            same_value(i, e) for i, e in zip(items, expected, strict=True)
        )
    return text == str(expected)


def _table_rows(lines: list[str], start: int) -> tuple[list[str], list[tuple[int, list[str]]], int]:
    """The header cells and the body rows (line number, cells) of the table at ``start``."""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split("|")]

    head = [c.strip("`* ").lower() for c in cells(lines[start])]
    rows = []
    i = start + 2
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        rows.append((i + 1, cells(lines[i])))
        i += 1
    return head, rows, i


_PROSE = (
    # `-O evaluation.warmup_windows N`, default 0 / (`tracking.log_every_n_steps`, default 10)
    re.compile(r"`(?:-O )?(?P<key>[a-z_]+(?:\.[a-z_]+)+)(?: [^`]*)?`[),]*,? \(?default (?P<value>[^\s,;)]+)"),
    # `training.limit_train_batches` defaults to **64**
    re.compile(r"`(?P<key>[a-z_]+(?:\.[a-z_]+)+)` defaults to (?P<value>[^\s,;)]+)"),
)


def stated_defaults(path: Path, text: str) -> list[tuple[str, str, str, Any]]:
    """``(where, name, stated, expected)`` for each default the document states; ``expected`` is
    ``KeyError`` where the name is no config key or field."""
    config = config_defaults()
    out: list[tuple[str, str, str, Any]] = []
    lines = text.split("\n")
    heading = ""
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        if in_fence:
            i += 1
            continue
        if line.startswith("#"):
            heading = line
        is_table = (
            line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[i + 1]) is not None
        )
        if is_table:
            head, rows, i = _table_rows(lines, i)
            if "default" in head and ("key" in head or "field" in head):
                name_col, default_col = head.index("key" if "key" in head else "field"), head.index("default")
                if "key" in head:
                    known = config
                else:
                    named = [c for c in re.findall(r"`([A-Za-z_]+)`", heading) if c in DOCUMENTED_CLASSES]
                    if not named:
                        out.append((f"{path}: table under {heading!r}", "(class)", heading, KeyError))
                        continue
                    known = class_defaults(DOCUMENTED_CLASSES[named[0]])
                for number, row in rows:
                    name = _cell(row[name_col])
                    out.append((f"{path}:{number}", name, row[default_col], known.get(name, KeyError)))
            continue
        for pattern in _PROSE:
            for m in pattern.finditer(line):
                if m["key"] in config:
                    out.append((f"{path}:{i + 1}", m["key"], m["value"], config[m["key"]]))
        i += 1
    return out


def wrong_defaults(path: Path, text: str) -> list[str]:
    problems = []
    for where, name, stated, expected in stated_defaults(path, text):
        if expected is KeyError:
            problems.append(f"{where}: {name} is no config key or documented field")
        elif not same_value(stated, expected):
            code = json.dumps(expected)
            problems.append(
                f"{where}: {name} is documented with default {_cell(stated)!r}; the code's is {code}"
            )
    return problems


def documents() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(
        REPO / f
        for f in listed
        if re.search(r"(^|/)README\.md$|(^|/)docs/.*\.md$", f) and (REPO / f).is_file()
    )


def test_the_schema_states_the_same_defaults_as_the_config() -> None:
    # the checked-in schema (what the runner validates with) is generated from the config
    schema = json.loads(SCHEMA.read_text())
    data = schema["$defs"]["DataConfig"]["properties"]
    assert data["features"]["default"] == config_defaults()["data.features"] == "payload"
    assert data["calibration_windows"]["default"] == config_defaults()["data.calibration_windows"] == 20


def test_every_documented_default_is_the_codes() -> None:
    docs = documents()
    assert REPO / "python" / "docs" / "data.md" in docs and REPO / "python" / "README.md" in docs
    stated = [s for d in docs for s in stated_defaults(d.relative_to(REPO), d.read_text())]
    assert {s[1] for s in stated} >= {
        "features",
        "calibration_windows",
        "data.features",
        "evaluation.scoring",
    }
    problems = [p for d in docs for p in wrong_defaults(d.relative_to(REPO), d.read_text())]
    assert problems == [], "\n".join(problems)


PLANTED = """# A doc

## Defaults

| key | default | what |
|---|---|---|
| `data.features` | `payload` | right |
| `data.calibration_windows` | 0 | wrong: the config's is 20 |
| `data.colour` | red | no such key |

### `GraphParams`

| field | default |
|---|---|
| `features` | `paper` |
| `window_size` | 100 |

The warm-up (`-O evaluation.warmup_windows N`, default 5) and `tracking.log_every_n_steps` defaults to **10**.
"""


def test_a_planted_wrong_default_fails() -> None:
    assert wrong_defaults(Path("planted.md"), PLANTED) == [
        "planted.md:8: data.calibration_windows is documented with default '0'; the code's is 20",
        "planted.md:9: data.colour is no config key or documented field",
        "planted.md:15: features is documented with default 'paper'; the code's is \"payload\"",
        "planted.md:18: evaluation.warmup_windows is documented with default '5'; the code's is 0",
    ]


@pytest.mark.parametrize(
    ("stated", "expected", "same"),
    [
        ("`payload`", "payload", True),
        ("**64**", 64, True),
        ("4,096", 4096, True),
        ("1e-3", 0.001, True),
        ("null", None, True),
        ("`true`", True, True),
        ("(480, 240, 48)", [480, 240, 48], True),
        ("paper", "payload", False),
        ("0", 20, False),
        ("false", True, False),
    ],
)
def test_values_read_as_written(stated: str, expected: Any, same: bool) -> None:
    assert same_value(stated, expected) is same
