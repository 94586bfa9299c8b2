"""CAN-ID vocabulary: raw IDs -> embedding indices, with index 0 for IDs never seen."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

OOV_INDEX = 0


@dataclass(frozen=True)
class CanIdVocab:
    """Sorted known CAN IDs; ID ``can_ids[k]`` has index ``k + 1``; unknown IDs get ``OOV_INDEX``.

    Built from the IDs of the benign training windows only (after the split: no validation or test
    label decides it), so injected IDs (DoS 0x000, fuzzing's random IDs) map to the
    out-of-vocabulary index in every split alike."""

    can_ids: npt.NDArray[np.uint32]

    @property
    def size(self) -> int:
        """Number of indices an embedding needs (known IDs + the OOV index)."""
        return len(self.can_ids) + 1

    @staticmethod
    def build(ids: list[npt.NDArray[np.uint32]]) -> CanIdVocab:
        merged = np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.uint32)
        return CanIdVocab(merged.astype(np.uint32))

    def index(self, can_id: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
        if len(self.can_ids) == 0:
            return np.zeros(len(can_id), np.int64)
        pos = np.searchsorted(self.can_ids, can_id)
        found = (pos < len(self.can_ids)) & (self.can_ids[np.minimum(pos, len(self.can_ids) - 1)] == can_id)
        return np.where(found, pos + 1, OOV_INDEX).astype(np.int64)

    def save(self, path: Path) -> None:
        path.write_text(
            json.dumps({"oov_index": OOV_INDEX, "can_ids": [int(v) for v in self.can_ids]}) + "\n"
        )

    @staticmethod
    def load(path: Path) -> CanIdVocab:
        doc = json.loads(path.read_text())
        return CanIdVocab(np.asarray(doc["can_ids"], np.uint32))
