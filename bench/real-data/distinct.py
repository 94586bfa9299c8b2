"""The distinct recordings of a folder: each ``*.parquet`` whose rows no earlier file (by name) holds,
by the rule run.py drops duplicates with (:meth:`kdgat.data.CanMessages.content_digest`).

  cd python && uv run python ../bench/real-data/distinct.py DIR

Prints the kept files' paths, one a line, on stdout; each dropped file and the one it repeats on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kdgat.data import read_can_file


def distinct_recordings(folder: Path) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """(kept files, [(dropped file, the earlier file with the same rows)]), in name order."""
    first: dict[str, Path] = {}
    dropped = []
    for path in sorted(folder.glob("*.parquet")):
        digest = read_can_file(path)[0].content_digest()
        if digest in first:
            dropped.append((path, first[digest]))
        else:
            first[digest] = path
    return list(first.values()), dropped


def main() -> int:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: distinct.py DIR (a folder of *.parquet recordings)", file=sys.stderr)
        return 2
    kept, dropped = distinct_recordings(Path(sys.argv[1]))
    for path, same in dropped:
        print(f"dropped {path.name}: same rows as {same.name}", file=sys.stderr)
    for path in kept:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
