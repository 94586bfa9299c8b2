"""Command line: ``train`` an MLP on a synthetic dataset, or print the ``schema`` of the overrides.

    python -m tiny_lightning.cli train --model mlp --scale small --dataset toy \
        --output-dir DIR [--teacher-path CKPT] [key=value ...]
    python -m tiny_lightning.cli schema

Overrides are Hydra-style ``key=value`` words after the options; ``schema`` prints their JSON Schema.
torch and Lightning are imported only by ``train``, so ``schema`` and bad arguments answer at once.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

# Hidden width per --scale (the `hidden` override wins over it).
SCALE_HIDDEN = {"small": 32, "large": 256}
MODELS = ["mlp"]
# The exit status of a run stopped by SIGTERM (128 + 15, as a shell reports it).
EXIT_SIGTERM = 143


@dataclass(frozen=True)
class Option:
    """One override key: its JSON type, bounds, default and meaning."""

    type: Literal["number", "integer", "boolean"]
    description: str
    default: float | int | bool | None = None  # None: depends on other options (hidden: --scale)
    minimum: float | None = None
    exclusive_minimum: float | None = None

    def expected(self) -> str:
        """What a valid value looks like, in words (for error messages)."""
        if self.type == "boolean":
            return "true or false"
        words = "a number" if self.type == "number" else "an integer"
        if self.exclusive_minimum is not None:
            return f"{words} > {self.exclusive_minimum:g}"
        if self.minimum is not None:
            return f"{words} >= {self.minimum:g}"
        return words

    def json_schema(self) -> dict[str, Any]:
        """This option as a JSON Schema property."""
        schema: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.exclusive_minimum is not None:
            schema["exclusiveMinimum"] = self.exclusive_minimum
        if self.default is not None:
            schema["default"] = self.default
        return schema


# The override keys: the single source of both the validation and the published schema.
OPTIONS: dict[str, Option] = {
    "lr": Option("number", "Adam learning rate", default=0.01, exclusive_minimum=0),
    "max_epochs": Option("integer", "number of training epochs", default=5, minimum=1),
    "hidden": Option("integer", "hidden layer width (default from --scale: small 32, large 256)", minimum=1),
    "batch_size": Option("integer", "training and validation batch size", default=64, minimum=1),
    "epoch_sleep": Option(
        "number",
        "seconds slept after each epoch (lets a test signal a run mid-training)",
        default=0.0,
        minimum=0,
    ),
    "fail": Option("boolean", "raise an error at the start of training (for failure tests)", default=False),
    "seed": Option("integer", "seed of the dataset and of the model's initialisation", default=0),
}


@dataclass(frozen=True)
class Config:
    """The resolved settings of one training run (defaults, then --scale, then overrides)."""

    lr: float
    max_epochs: int
    hidden: int
    batch_size: int
    epoch_sleep: float
    fail: bool
    seed: int


class OverrideError(ValueError):
    """An override word that names an unknown key or holds a bad value."""


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the accepted overrides."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tiny-lightning overrides",
        "type": "object",
        "additionalProperties": False,
        "properties": {key: option.json_schema() for key, option in OPTIONS.items()},
    }


def parse_value(key: str, raw: str) -> float | int | bool:
    """Parse and bound-check one override value; raises OverrideError naming key, value and expectation."""
    option = OPTIONS.get(key)
    if option is None:
        raise OverrideError(
            f"unknown override key {key!r} (value {raw!r}): expected one of {', '.join(OPTIONS)}"
        )
    error = OverrideError(f"override {key}={raw!r}: expected {option.expected()}")
    value: float | int | bool
    if option.type == "boolean":
        if raw.lower() not in ("true", "false"):
            raise error
        return raw.lower() == "true"
    try:
        number = float(raw)
    except ValueError:
        raise error from None
    if not math.isfinite(number):
        raise error
    if option.type == "integer":
        # As in JSON Schema, 3.0 is an integer; the exact int() parse keeps big integers exact.
        if not number.is_integer():
            raise error
        try:
            value = int(raw)
        except ValueError:
            value = int(number)
    else:
        value = number
    if option.minimum is not None and value < option.minimum:
        raise error
    if option.exclusive_minimum is not None and value <= option.exclusive_minimum:
        raise error
    return value


def resolve_config(scale: str, words: list[str]) -> Config:
    """Defaults, then the scale's hidden width, then the ``key=value`` words (each key at most once)."""
    values: dict[str, Any] = {key: option.default for key, option in OPTIONS.items()}
    values["hidden"] = SCALE_HIDDEN[scale]
    seen: set[str] = set()
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep or not key:
            raise OverrideError(f"override {word!r}: expected key=value (keys: {', '.join(OPTIONS)})")
        if key in seen:
            raise OverrideError(f"override {word!r}: key {key!r} given twice; expected each key at most once")
        seen.add(key)
        values[key] = parse_value(key, raw)
    return Config(**{f.name: values[f.name] for f in fields(Config)})


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of both commands."""
    parser = argparse.ArgumentParser(prog="python -m tiny_lightning.cli", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train the classifier; outputs land in --output-dir")
    train.add_argument("--model", choices=MODELS, default="mlp", help="model family (only mlp)")
    train.add_argument("--scale", choices=list(SCALE_HIDDEN), default="small", help="sets the hidden width")
    train.add_argument(
        "--dataset", default="toy", type=dataset_name, help="name of the synthetic dataset (seeds its rows)"
    )
    train.add_argument("--output-dir", type=Path, required=True, help="checkpoints, logs and metrics.json")
    train.add_argument(
        "--teacher-path", type=Path, help="distil from this teacher checkpoint (knowledge distillation)"
    )
    train.add_argument("overrides", nargs="*", metavar="key=value", help=f"overrides: {', '.join(OPTIONS)}")
    train.set_defaults(command_parser=train)  # override errors print the train command's usage
    commands.add_parser("schema", help="print the JSON Schema of the overrides")
    return parser


def dataset_name(text: str) -> str:
    """argparse type of --dataset: a plain name (letters, digits, . _ -)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a name of letters, digits, . _ -")
    return text


def main(argv: list[str] | None = None) -> int:
    """Entry point; argument and override errors exit 2 (argparse's usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "schema":
        print(json.dumps(schema(), indent=2))
        return 0
    try:
        config = resolve_config(args.scale, args.overrides)
    except OverrideError as error:
        args.command_parser.error(str(error))  # exits 2
    if args.teacher_path is not None and not args.teacher_path.is_file():
        missing = f"--teacher-path {args.teacher_path}: no such checkpoint (train the teacher first)"
        args.command_parser.error(missing)

    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from tiny_lightning.train import train

    try:
        train(args.dataset, args.output_dir, config, args.teacher_path)
    except SIGTERMException:
        # Lightning stops at the next batch or epoch boundary after SIGTERM by raising SystemExit()
        # with no code, which would exit 0; report the stop as the signal's status instead.
        print("stopped by SIGTERM", file=sys.stderr, flush=True)
        return EXIT_SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
