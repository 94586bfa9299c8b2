"""Feature normalisation: from benign training windows (default) or per recording from its own
first windows (``data.calibration_windows = K > 0``, the per-vehicle calibration mode).

Calibration reads the first ``K`` windows (``K * window_size`` messages) of each recording — its
unlabelled traffic only, never a label — and normalises every window of that recording by the
median (a centre that an attack in the calibration traffic moves little) and the standard
deviation (1 where a feature is constant there) of those windows' raw feature rows. Training
recordings are normalised the same way, so the model learns on the scale it is scored on.
(A median-absolute-deviation scale was tried first and lost badly on bench/real-data: most
features are near-constant per ID, so the MAD is tiny and every other row becomes an outlier.)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def moments(a: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean and population std per column (std 1 where a column is constant)."""
    a64 = np.asarray(a, np.float64)
    mean = a64.mean(axis=0)
    std = a64.std(axis=0)
    return mean, np.where(std > 1e-12, std, 1.0)


def robust_moments(a: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Median and population std per column (std 1 where a column is ~constant)."""
    a64 = np.asarray(a, np.float64)
    if len(a64) == 0:
        return np.zeros(a64.shape[1]), np.ones(a64.shape[1])
    std = a64.std(axis=0)
    return np.median(a64, axis=0), np.where(std > 1e-12, std, 1.0)


#: Rows per block of :func:`standardise`: its float64 temporaries stay in the CPU caches.
BLOCK_ROWS = 1 << 14


def standardise(
    values: npt.NDArray[np.floating],
    centre: npt.NDArray[np.float64],
    scale: npt.NDArray[np.float64],
    out: npt.NDArray[np.floating] | None = None,
) -> npt.NDArray[np.floating]:
    """``(values - centre) / scale`` computed in float64 and stored in ``out`` (float64 when not
    given; a float32 ``out`` gets the float64 results rounded once, as a cast afterwards would),
    block by block. ``out`` may be ``values`` itself."""
    if out is None:
        out = np.empty(values.shape, np.float64)
    for i in range(0, len(values), BLOCK_ROWS):
        block = values[i : i + BLOCK_ROWS]
        out[i : i + BLOCK_ROWS] = (block - centre) / scale
    return out


def calibrate_rows(
    values: npt.NDArray[np.floating],
    row_file: npt.NDArray[np.int64],
    row_window_rank: npt.NDArray[np.int64],
    windows: int,
    out: npt.NDArray[np.floating] | None = None,
) -> npt.NDArray[np.floating]:
    """``values`` [rows, f] normalised per file: file ``k``'s rows by :func:`robust_moments` of its
    rows whose window is among the file's first ``windows`` (``row_window_rank < windows``).
    Stored in ``out`` as :func:`standardise` does (a new float64 array when not given; may be
    ``values`` itself)."""
    if windows < 1:
        raise ValueError(f"calibration windows {windows} is invalid: expected >= 1")
    if out is None:
        out = np.empty(values.shape, np.float64)
    files = np.unique(row_file)
    if len(row_file) and bool((row_file[1:] >= row_file[:-1]).all()):
        # each file's rows one run (as the cache lays them out): slices, no masks
        starts = np.searchsorted(row_file, files, side="left")
        ends = np.searchsorted(row_file, files, side="right")
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            rows = values[a:b]
            centre, scale = robust_moments(rows[row_window_rank[a:b] < windows])
            standardise(rows, centre, scale, out[a:b])
        return out
    for k in files:
        rows = row_file == k
        centre, scale = robust_moments(values[rows & (row_window_rank < windows)])
        out[rows] = (values[rows] - centre) / scale
    return out
