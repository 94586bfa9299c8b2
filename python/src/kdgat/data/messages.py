"""In-memory CAN message table shared by every reader, and the per-file parse report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

#: How many malformed-row examples a report keeps (the counts are always complete).
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class CanMessages:
    """A stream of CAN messages in file order, struct-of-arrays, ``n`` rows.

    - ``timestamp``: float64[n], seconds as written in the file (not re-sorted: some public
      files are non-monotonic and file order is the capture order we keep)
    - ``can_id``: uint32[n], arbitration ID (11- or 29-bit)
    - ``dlc``: uint8[n], payload length in bytes, 0..8
    - ``payload``: uint8[n, 8], data bytes; bytes at positions >= dlc are 0
    - ``label``: uint8[n], 1 = injected/attack message, 0 = normal
    """

    timestamp: npt.NDArray[np.float64]
    can_id: npt.NDArray[np.uint32]
    dlc: npt.NDArray[np.uint8]
    payload: npt.NDArray[np.uint8]
    label: npt.NDArray[np.uint8]

    def __post_init__(self) -> None:
        n = len(self.timestamp)
        for name in ("can_id", "dlc", "label"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"CanMessages.{name} has {len(getattr(self, name))} rows, expected {n}")
        if self.payload.shape != (n, 8):
            raise ValueError(f"CanMessages.payload has shape {self.payload.shape}, expected ({n}, 8)")

    def __len__(self) -> int:
        return len(self.timestamp)

    @staticmethod
    def empty() -> CanMessages:
        return CanMessages(
            timestamp=np.zeros(0, np.float64),
            can_id=np.zeros(0, np.uint32),
            dlc=np.zeros(0, np.uint8),
            payload=np.zeros((0, 8), np.uint8),
            label=np.zeros(0, np.uint8),
        )

    @staticmethod
    def concat(parts: list[CanMessages]) -> CanMessages:
        if not parts:
            return CanMessages.empty()
        return CanMessages(
            timestamp=np.concatenate([p.timestamp for p in parts]),
            can_id=np.concatenate([p.can_id for p in parts]),
            dlc=np.concatenate([p.dlc for p in parts]),
            payload=np.concatenate([p.payload for p in parts]),
            label=np.concatenate([p.label for p in parts]),
        )

    def content_digest(self) -> str:
        """SHA-256 of the IDs, payloads and timestamps: two files with the same digest hold the same
        recording (public collections ship some twice, under different names and file bytes)."""
        return hashlib.sha256(
            self.can_id.tobytes() + self.payload.tobytes() + self.timestamp.tobytes()
        ).hexdigest()

    def take(self, index: npt.NDArray[np.intp] | slice) -> CanMessages:
        return CanMessages(
            timestamp=self.timestamp[index],
            can_id=self.can_id[index],
            dlc=self.dlc[index],
            payload=self.payload[index],
            label=self.label[index],
        )


@dataclass
class ParseReport:
    """What reading one file found. ``rows`` counts every data row seen (header excluded);
    ``rows == parsed + malformed``. ``reasons`` counts malformed rows by reason; ``examples``
    keeps the first few as ``(line_or_row_number, reason, text)``."""

    path: str
    format: str
    rows: int = 0
    parsed: int = 0
    malformed: int = 0
    attack_rows: int = 0
    non_monotonic_timestamps: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    examples: list[tuple[int, str, str]] = field(default_factory=list)

    def add_malformed(self, reason: str, numbers: npt.ArrayLike, texts: list[str]) -> None:
        numbers = np.asarray(numbers)
        if len(numbers) == 0:
            return
        self.malformed += len(numbers)
        self.reasons[reason] = self.reasons.get(reason, 0) + len(numbers)
        # Keep the earliest lines of the file whatever their reason.
        for num, text in list(zip(numbers.tolist(), texts, strict=False))[:MAX_EXAMPLES]:
            self.examples.append((int(num), reason, text[:200]))
        self.examples = sorted(self.examples)[:MAX_EXAMPLES]

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "parsed": self.parsed,
            "malformed": self.malformed,
            "attack_rows": self.attack_rows,
            "non_monotonic_timestamps": self.non_monotonic_timestamps,
            "reasons": dict(sorted(self.reasons.items())),
            "examples": [list(e) for e in self.examples],
        }

    def summary(self) -> str:
        line = f"{self.path} [{self.format}]: {self.parsed}/{self.rows} rows parsed"
        if self.malformed:
            detail = ", ".join(f"{k}: {v}" for k, v in sorted(self.reasons.items()))
            line += f", {self.malformed} malformed ({detail})"
        return line
