"""Synthetic, labelled CAN traffic for tests, benchmarks and the quickstart.

The bus model (fixed by ``seed``, shared by every file of a data set):

- ~40 benign IDs. Most are periodic (10 ms - 1 s, with per-message jitter); a few are
  event-driven (Poisson arrivals), so the number of messages of an ID in a 100-message window
  varies naturally. RPM (0x316) and gear (0x43F) are periodic at 10 ms / 20 ms as on the HCRL car.
- Payload dynamics per byte: constants, rolling counters, signals that follow a slowly varying
  vehicle state (engine speed, road speed, gear), small noise, and a checksum byte.

Attacks are injected in bursts (start uniform over the capture; 60 % short bursts of 1-6 ms, the
rest 60-600 ms), each burst labelled message by message:

- ``dos``: ID 0x000, 8 zero bytes, every 0.3 ms;
- ``fuzzy``: random ID (0x000-0x7FF) and random 8 bytes, every 0.5 ms;
- ``gear`` / ``rpm``: the gear (0x43F) / RPM (0x316) ID every 1 ms, replaying the legitimate
  payload seen at the start of the burst with its signal set to a plausible value — the payload
  is close to a normal one, so short spoofing bursts (a handful of messages in a window) are hard
  to tell from the ID's normal count jitter.

This keeps the task learnable but not trivial: ``tests/data/test_synth.py`` checks that the
majority class and a logistic regression on per-ID message counts per window are clearly below
perfect (see ``python/docs/data.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kdgat.data.messages import CanMessages

ATTACKS = ("dos", "fuzzy", "gear", "rpm")
SYNTH_FORMATS = ("csv", "hcrl", "parquet")
RPM_ID = 0x316
GEAR_ID = 0x43F
DOS_ID = 0x000
START_TIME = 1672531200.0

_PERIODS_MS = (10, 10, 20, 20, 20, 50, 50, 100, 100, 200, 500, 1000)
_ATTACK_INTERVAL_S = {"dos": 0.0003, "fuzzy": 0.0005, "gear": 0.001, "rpm": 0.001}


@dataclass(frozen=True)
class _Bus:
    ids: npt.NDArray[np.uint32]
    period: npt.NDArray[np.float64]  # seconds; 0 = event-driven
    rate: npt.NDArray[np.float64]  # events/s for event-driven IDs
    phase: npt.NDArray[np.float64]
    dlc: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int64]  # [n_ids, 8]: 0 const, 1 counter, 2 signal, 3 noise, 4 checksum
    base: npt.NDArray[np.int64]  # [n_ids, 8]
    gain: npt.NDArray[np.float64]  # [n_ids, 8]
    signal: npt.NDArray[np.int64]  # [n_ids, 8]: which vehicle signal (0 rpm, 1 speed, 2 throttle)


def _make_bus(seed: int, n_ids: int = 40) -> _Bus:
    rng = np.random.default_rng([seed, 1])
    others = rng.choice(np.setdiff1d(np.arange(0x050, 0x7F0), [RPM_ID, GEAR_ID]), n_ids - 2, replace=False)
    ids = np.concatenate([[RPM_ID, GEAR_ID], others]).astype(np.uint32)
    period = rng.choice(np.array(_PERIODS_MS, float) / 1000.0, n_ids)
    period[0], period[1] = 0.010, 0.020
    event = np.zeros(n_ids, bool)
    event[2 + rng.choice(n_ids - 2, 5, replace=False)] = True
    rate = np.where(event, rng.uniform(5, 40, n_ids), 0.0)
    period[event] = 0.0
    phase = rng.uniform(0, 1, n_ids) * np.where(period > 0, period, 1.0)
    dlc = np.where(rng.random(n_ids) < 0.75, 8, rng.integers(2, 8, n_ids))
    dlc[0] = dlc[1] = 8
    kind = rng.choice(5, size=(n_ids, 8), p=[0.4, 0.1, 0.25, 0.2, 0.05])
    base = rng.integers(0, 256, (n_ids, 8))
    gain = rng.uniform(0.3, 1.0, (n_ids, 8))
    signal = rng.integers(0, 3, (n_ids, 8))
    # RPM message: bytes 2-3 carry engine speed; gear message: byte 0 carries the gear.
    kind[0] = [0, 1, 2, 2, 3, 0, 0, 4]
    signal[0] = 0
    kind[1] = [2, 0, 1, 0, 3, 0, 0, 4]
    signal[1] = 1
    return _Bus(ids, period, rate, phase, dlc, kind, base, gain, signal)


def _vehicle(t: npt.NDArray[np.float64], seed: int) -> npt.NDArray[np.float64]:
    """Vehicle signals in [0, 1] at times ``t``: [len(t), 3] = rpm, speed, throttle."""
    rng = np.random.default_rng([seed, 2])
    f = rng.uniform(1 / 60, 1 / 15, (3, 3))
    ph = rng.uniform(0, 2 * np.pi, (3, 3))
    out = np.empty((len(t), 3))
    for k in range(3):
        s = sum(np.sin(2 * np.pi * f[k, j] * t + ph[k, j]) / (j + 1) for j in range(3))
        out[:, k] = 0.5 + 0.5 * s / 1.84
    return np.clip(out, 0.0, 1.0)


def _gear_of(speed: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    return np.minimum((speed * 6).astype(np.int64), 5) + 1


def _payloads(
    bus: _Bus, k: int, t: npt.NDArray[np.float64], seed: int, rng: np.random.Generator
) -> npt.NDArray[np.uint8]:
    m = len(t)
    veh = _vehicle(t, seed)
    out = np.zeros((m, 8), np.int64)
    for b in range(bus.dlc[k]):
        kind = bus.kind[k, b]
        if kind == 0:
            out[:, b] = bus.base[k, b]
        elif kind == 1:
            out[:, b] = (bus.base[k, b] + np.arange(m)) % 256
        elif kind == 2:
            sig = veh[:, bus.signal[k, b]]
            out[:, b] = np.clip(bus.base[k, b] * (1 - bus.gain[k, b]) + 255 * bus.gain[k, b] * sig, 0, 255)
        elif kind == 3:
            out[:, b] = (bus.base[k, b] + rng.integers(-3, 4, m)) % 256
    if bus.ids[k] == RPM_ID:
        rpm = (700 + 6000 * veh[:, 0]).astype(np.int64)
        out[:, 2], out[:, 3] = rpm >> 8, rpm & 0xFF
    if bus.ids[k] == GEAR_ID:
        out[:, 0] = _gear_of(veh[:, 1])
    checksum = bus.kind[k, : bus.dlc[k]] == 4
    if checksum.any():
        total = out[:, : bus.dlc[k]].sum(axis=1) - out[:, : bus.dlc[k]][:, checksum].sum(axis=1)
        out[:, np.flatnonzero(checksum)] = (total % 256)[:, None]
    return out.astype(np.uint8)


def _benign(bus: _Bus, duration: float, seed: int, rng: np.random.Generator) -> CanMessages:
    parts = []
    for k in range(len(bus.ids)):
        if bus.period[k] > 0:
            m = int((duration - bus.phase[k]) / bus.period[k]) + 1
            t = bus.phase[k] + np.arange(m) * bus.period[k] + rng.normal(0, 0.03 * bus.period[k], m)
        else:
            t = np.sort(rng.uniform(0, duration, rng.poisson(bus.rate[k] * duration)))
        t = t[(t >= 0) & (t < duration)]
        parts.append(
            CanMessages(
                timestamp=t,
                can_id=np.full(len(t), bus.ids[k], np.uint32),
                dlc=np.full(len(t), bus.dlc[k], np.uint8),
                payload=_payloads(bus, k, t, seed, rng),
                label=np.zeros(len(t), np.uint8),
            )
        )
    return CanMessages.concat(parts)


def _bursts(duration: float, rng: np.random.Generator, attack_share: float) -> list[tuple[float, float]]:
    short = (0.0005, 0.004)
    long = (0.04, 0.4)
    mean_len = 0.7 * np.mean(short) + 0.3 * np.mean(long)
    n = max(4, round(attack_share * duration / mean_len))
    starts = rng.uniform(0, duration, n)
    is_short = rng.random(n) < 0.7
    lengths = np.where(is_short, rng.uniform(*short, n), rng.uniform(*long, n))
    return [(float(s), float(min(s + d, duration))) for s, d in zip(starts, lengths, strict=True)]


def _attack(
    attack: str,
    bus: _Bus,
    benign: CanMessages,
    duration: float,
    seed: int,
    rng: np.random.Generator,
    attack_share: float,
) -> CanMessages:
    interval = _ATTACK_INTERVAL_S[attack]
    parts = []
    for start, end in _bursts(duration, rng, attack_share):
        t = np.arange(start, end, interval)
        m = len(t)
        t = t + rng.normal(0, interval * 0.05, m)
        if m == 0:
            continue
        if attack == "dos":
            ids = np.full(m, DOS_ID, np.uint32)
            payload = np.zeros((m, 8), np.uint8)
        elif attack == "fuzzy":
            ids = rng.integers(0, 0x800, m).astype(np.uint32)
            payload = rng.integers(0, 256, (m, 8)).astype(np.uint8)
        else:
            target = RPM_ID if attack == "rpm" else GEAR_ID
            own = np.flatnonzero(benign.can_id == target)
            at = own[max(0, min(len(own) - 1, int(np.searchsorted(benign.timestamp[own], start)) - 1))]
            frame = benign.payload[at].copy()
            if attack == "rpm":
                rpm = int(700 + 6000 * rng.uniform(0.05, 0.95))
                frame[2], frame[3] = rpm >> 8, rpm & 0xFF
            else:
                frame[0] = rng.integers(1, 7)
            ids = np.full(m, target, np.uint32)
            payload = np.repeat(frame[None, :], m, axis=0)
        parts.append(CanMessages(t, ids, np.full(m, 8, np.uint8), payload, np.ones(m, np.uint8)))
    return CanMessages.concat(parts)


def generate_can_traffic(
    n_messages: int,
    *,
    seed: int,
    attack: str | None,
    bus_seed: int | None = None,
    attack_share: float = 0.08,
) -> CanMessages:
    """``n_messages`` messages in time order: benign traffic of the bus ``bus_seed`` (default
    ``seed``) with bursts of ``attack`` (one of ``ATTACKS``, or None for benign only) covering
    about ``attack_share`` of the time. Deterministic for given arguments."""
    if n_messages < 1:
        raise ValueError(f"n_messages is {n_messages}; expected >= 1")
    if attack is not None and attack not in ATTACKS:
        raise ValueError(f"attack {attack!r} is unknown; expected one of {', '.join(ATTACKS)}")
    bus = _make_bus(seed if bus_seed is None else bus_seed)
    rate = float(
        np.sum(np.where(bus.period > 0, 1 / np.where(bus.period > 0, bus.period, 1), 0)) + bus.rate.sum()
    )
    duration = n_messages / rate * 1.05
    while True:
        rng = np.random.default_rng([seed, 3])
        benign = _benign(bus, duration, seed, rng)
        extra = (
            _attack(attack, bus, benign, duration, seed, rng, attack_share) if attack else CanMessages.empty()
        )
        allm = CanMessages.concat([benign, extra])
        if len(allm) >= n_messages:
            break
        duration *= 1.2 * n_messages / max(len(allm), 1)
    order = np.argsort(allm.timestamp, kind="stable")[:n_messages]
    out = allm.take(order)
    return CanMessages(out.timestamp + START_TIME, out.can_id, out.dlc, out.payload, out.label)


# ---------------------------------------------------------------------------------------------
# writers


def _hex_table(values: npt.NDArray[np.uint32], width: int) -> pa.Array:
    uniq, inv = np.unique(values, return_inverse=True)
    table = pa.array([format(int(v), f"0{width}x") for v in uniq])
    return table.take(pa.array(inv.ravel(), pa.int64()))


_BYTE_HEX = pa.array([f"{i:02x}" for i in range(256)])


def _byte_columns(m: CanMessages) -> list[pa.Array]:
    cols = []
    for b in range(8):
        s = _BYTE_HEX.take(pa.array(m.payload[:, b].astype(np.int64)))
        cols.append(pc.if_else(pa.array(m.dlc > b), s, pa.scalar(None, pa.string())))
    return cols


def _timestamps(ts: npt.NDArray[np.float64]) -> pa.Array:
    us = np.round(ts * 1e6).astype(np.int64)
    secs = pc.cast(pa.array(us // 1_000_000), pa.string())
    frac = pc.utf8_lpad(pc.cast(pa.array(us % 1_000_000), pa.string()), 6, padding="0")
    return pc.binary_join_element_wise(secs, frac, ".")


def _lines_bytes(lines: pa.Array) -> bytes:
    terminated = pc.binary_join_element_wise(lines, "", "\n")
    bufs = terminated.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=len(terminated) + 1, offset=terminated.offset * 4)
    return np.frombuffer(bufs[2], np.uint8)[offsets[0] : offsets[-1]].tobytes()


def write_can_file(path: str | Path, messages: CanMessages, fmt: str) -> Path:
    """Write messages as ``csv`` (can-train-and-test), ``hcrl`` (Car-Hacking) or ``parquet``."""
    path = Path(path)
    if fmt not in SYNTH_FORMATS:
        raise ValueError(f"fmt {fmt!r} is unknown; expected one of {', '.join(SYNTH_FORMATS)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = 1 << 20
    if fmt == "parquet":
        data = [
            pc.binary_join_element_wise(
                *_byte_columns(messages.take(slice(0, len(messages)))), "", null_handling="skip"
            )
        ]
        table = pa.table(
            {
                "timestamp": pa.array(messages.timestamp, pa.float64()),
                "id": pa.array(messages.can_id, pa.uint32()),
                "data_field": data[0],
                "label": pa.array(messages.label, pa.uint8()),
                "source_file": pa.array([path.name] * len(messages)),
            }
        )
        pq.write_table(table, path)
        return path
    with path.open("wb") as fh:
        if fmt == "csv":
            fh.write(b"timestamp,arbitration_id,data_field,attack\n")
        for start in range(0, len(messages), chunk):
            m = messages.take(slice(start, start + chunk))
            byte_cols = _byte_columns(m)
            if fmt == "csv":
                data = pc.binary_join_element_wise(
                    *byte_cols, "", null_handling="replace", null_replacement=""
                )
                label = pc.cast(pa.array(m.label), pa.string())
                lines = pc.binary_join_element_wise(
                    _timestamps(m.timestamp), _hex_table(m.can_id, 3), data, label, ","
                )
            else:
                flag = pc.if_else(pa.array(m.label == 1), "T", "R")
                dlc = pc.cast(pa.array(m.dlc), pa.string())
                lines = pc.binary_join_element_wise(
                    _timestamps(m.timestamp),
                    _hex_table(m.can_id, 4),
                    dlc,
                    *byte_cols,
                    flag,
                    ",",
                    null_handling="skip",
                )
            fh.write(_lines_bytes(lines))
    return path


def write_synthetic_dataset(
    out_dir: str | Path,
    *,
    n_messages: int = 200_000,
    seed: int = 0,
    attacks: tuple[str, ...] = ATTACKS,
    fmt: str = "csv",
    test_share: float = 0.25,
    attack_share: float = 0.08,
) -> Path:
    """Write a synthetic data set of about ``n_messages`` messages to ``out_dir`` and return it.

    Files: ``train_<attack>.<ext>`` and ``test_<attack>.<ext>`` for each attack (``ext`` is
    ``csv`` for the ``csv``/``hcrl`` formats, ``parquet`` for ``parquet``); the ``test_`` prefix
    puts a file in the test split and the attack name in the file name gives its windows' attack
    type (see :func:`kdgat.data.params.split_of` / ``attack_type_of``). All files share one bus
    (``seed``); each has its own traffic and bursts.
    """
    if fmt not in SYNTH_FORMATS:
        raise ValueError(f"fmt {fmt!r} is unknown; expected one of {', '.join(SYNTH_FORMATS)}")
    if not attacks:
        raise ValueError("attacks is empty; expected at least one of " + ", ".join(ATTACKS))
    for a in attacks:
        if a not in ATTACKS:
            raise ValueError(f"attack {a!r} is unknown; expected one of {', '.join(ATTACKS)}")
    if not 0.0 < test_share < 1.0:
        raise ValueError(f"test_share is {test_share}; expected 0 < test_share < 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ext = "parquet" if fmt == "parquet" else "csv"
    per_file = max(1, n_messages // len(attacks))
    for i, attack in enumerate(attacks):
        for j, (split, share) in enumerate((("train", 1 - test_share), ("test", test_share))):
            n = max(1, round(per_file * share))
            msgs = generate_can_traffic(
                n,
                seed=seed * 1000 + 10 * i + j + 1,
                bus_seed=seed,
                attack=attack,
                attack_share=attack_share,
            )
            write_can_file(out / f"{split}_{attack}.{ext}", msgs, fmt)
    return out
