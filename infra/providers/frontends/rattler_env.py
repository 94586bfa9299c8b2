"""Conda environments without a conda binary: solve, install, lock and list with py-rattler.

Used by the `rattler` frontend of infra's CondaEnvironment (frontends/rattler.ts; the same engine pixi uses).
Run with a Python that has py-rattler installed:

    python rattler_env.py create --prefix DIR     < {"channels": [...], "specs": [...]}   (JSON on stdin)
    python rattler_env.py lock --prefix DIR       -> `conda list --explicit --md5` form
    python rattler_env.py list --prefix DIR       -> JSON [{"name", "version"}]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import rattler


def installed(prefix: Path) -> list[rattler.PrefixRecord]:
    meta = prefix / "conda-meta"
    if not meta.is_dir():
        raise SystemExit(f"{prefix} is not a conda environment (no conda-meta/)")
    return [rattler.PrefixRecord.from_path(p) for p in sorted(meta.glob("*.json"))]


async def create(prefix: Path, channels: list[str], specs: list[str]) -> None:
    platforms = [rattler.Platform.current(), rattler.Platform("noarch")]
    records = await rattler.solve(
        sources=channels,
        specs=specs,
        platforms=platforms,
        # As conda does: CONDA_OVERRIDE_CUDA (and the other CONDA_OVERRIDE_*) replace what is
        # detected, so a login node without a GPU can solve a CUDA environment.
        virtual_packages=rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env()),
        timestamp_policy="allow-missing",
    )
    await rattler.install(records, target_prefix=prefix, show_progress=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["create", "lock", "list"])
    parser.add_argument("--prefix", required=True, type=Path)
    args = parser.parse_args()
    if args.command == "create":
        request = json.load(sys.stdin)
        asyncio.run(create(args.prefix, request["channels"], request["specs"]))
    elif args.command == "lock":
        lines = ["# platform: " + str(rattler.Platform.current()), "@EXPLICIT"]
        lines += sorted(f"{r.url}#{r.md5.hex() if isinstance(r.md5, bytes) else r.md5}" for r in installed(args.prefix))
        print("\n".join(lines))
    else:
        print(json.dumps([{"name": r.name.normalized, "version": str(r.version)} for r in installed(args.prefix)]))
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # py-rattler 0.28 intermittently segfaults while the interpreter shuts down (its runtime
    # threads), after all work is done: leave without finalization so the status is the real one.
    os._exit(status)
