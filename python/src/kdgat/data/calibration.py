"""Feature normalisation: from benign training windows (default) or per recording from its own
first windows (``data.calibration_windows = K > 0``, the per-vehicle calibration mode).

Calibration reads the first ``K`` windows (``K × window_size`` messages) of each recording — its
unlabelled traffic only, never a label — and normalises every window of that recording with a
robust centre and scale of those windows' raw features: the median, and the median absolute
deviation × 1.4826 (the standard deviation of a normal distribution), falling back to the standard
deviation, then to 1, where a feature is (nearly) constant in the calibration windows. Robust
statistics, because the calibration traffic of a new vehicle may itself hold an attack. Training
recordings are normalised the same way, so the model learns on the scale it is scored on.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

MAD_TO_STD = 1.4826


def moments(a: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Mean and population std per column (std 1 where a column is constant)."""
    a64 = np.asarray(a, np.float64)
    mean = a64.mean(axis=0)
    std = a64.std(axis=0)
    return mean, np.where(std > 1e-12, std, 1.0)


def robust_moments(a: npt.NDArray[np.floating]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Median and MAD × 1.4826 per column; std where the MAD is ~0; 1 where that is ~0 too."""
    a64 = np.asarray(a, np.float64)
    if len(a64) == 0:
        return np.zeros(a64.shape[1]), np.ones(a64.shape[1])
    med = np.median(a64, axis=0)
    mad = np.median(np.abs(a64 - med), axis=0) * MAD_TO_STD
    std = a64.std(axis=0)
    scale = np.where(mad > 1e-12, mad, np.where(std > 1e-12, std, 1.0))
    return med, scale


def calibrate_rows(
    values: npt.NDArray[np.floating],
    row_file: npt.NDArray[np.int64],
    row_window_rank: npt.NDArray[np.int64],
    windows: int,
) -> npt.NDArray[np.float64]:
    """``values`` [rows, f] normalised per file: file ``k``'s rows by :func:`robust_moments` of its
    rows whose window is among the file's first ``windows`` (``row_window_rank < windows``)."""
    if windows < 1:
        raise ValueError(f"calibration windows {windows} is invalid: expected >= 1")
    out = np.empty(values.shape, np.float64)
    for k in np.unique(row_file):
        rows = row_file == k
        centre, scale = robust_moments(values[rows & (row_window_rank < windows)])
        out[rows] = (values[rows] - centre) / scale
    return out
