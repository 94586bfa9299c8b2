"""Readers for the CAN log formats seen in the public data sets, vectorised with pyarrow/numpy.

Formats (``detect_format`` picks one from the extension and the first line):

- ``hcrl``: HCRL Car-Hacking CSV, no header, variable width
  ``timestamp,CANID(hex),DLC,byte0,...,byte(DLC-1),flag`` with flag ``R`` (normal) /
  ``T`` (injected), e.g. ``1478198376.389427,0316,8,05,21,68,09,21,21,00,6f,R``.
- ``hcrl_text``: HCRL ``normal_run_data.txt`` form
  ``Timestamp: 1479121434.850202  ID: 0350  000  DLC: 8  05 28 84 66 6d 00 00 a2`` (all normal).
- ``ctt``: can-train-and-test CSV with header ``timestamp,arbitration_id,data_field,attack``;
  ``data_field`` is 0-16 concatenated hex chars (empty allowed: DLC 0), ``attack`` 0/1.
- ``parquet``: columns ``timestamp`` (double), ``id`` (uint32, or hex string), ``data_field`` (hex
  string), ``label`` (0/1); other columns such as ``source_file`` are ignored.

A malformed row is never dropped silently: it is counted in the file's :class:`ParseReport` under a
reason (``reasons``) with the first few examples (line numbers are 1-based file lines for text
formats, 1-based row numbers for Parquet). Rows are kept in file order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from kdgat.data.errors import DataError
from kdgat.data.messages import CanMessages, ParseReport

FORMATS = ("hcrl", "hcrl_text", "ctt", "parquet")
TEXT_SUFFIXES = (".csv", ".txt", ".log")
PARQUET_SUFFIXES = (".parquet", ".pq")
CTT_HEADER = ("timestamp", "arbitration_id", "data_field", "attack")
#: Bytes per pyarrow read block of text files (one batch of lines per block).
BLOCK_SIZE = 1 << 24

_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i

_FLOAT_RE = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_TEXT_RE = (
    r"^Timestamp:\s*(?P<ts>\S+)\s+ID:\s*(?P<id>\S+)\s+(?:\S+\s+)?DLC:\s*(?P<dlc>\S+)"
    r"(?P<data>(?:\s+\S+)*)\s*$"
)


def is_can_file(path: Path) -> bool:
    """Whether ``path`` has an extension the readers accept."""
    return path.suffix.lower() in TEXT_SUFFIXES + PARQUET_SUFFIXES


def detect_format(path: str | Path) -> str:
    """Format of one file: ``parquet`` by extension, else from the first non-empty line."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix not in TEXT_SUFFIXES:
        raise DataError(
            f"{path}: unknown CAN file extension {suffix!r}; expected one of "
            f"{', '.join(TEXT_SUFFIXES + PARQUET_SUFFIXES)}"
        )
    with path.open("rb") as fh:
        head = fh.read(4096)
    for raw in head.splitlines():
        line = raw.strip().decode("utf-8", errors="replace")
        if not line:
            continue
        if line.startswith("Timestamp:"):
            return "hcrl_text"
        if line.lower().startswith("timestamp,"):
            return "ctt"
        return "hcrl"
    return "hcrl"  # empty file: any text reader yields zero rows


def read_can_file(path: str | Path, fmt: str | None = None) -> tuple[CanMessages, ParseReport]:
    """Read one CAN log file. Returns the well-formed rows and the report of the whole file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such CAN file")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise DataError(f"{path}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    report = ParseReport(path=str(path), format=fmt)
    parts: list[CanMessages] = []
    if fmt == "parquet":
        for first, batch in _parquet_batches(path):
            parts.append(_parse_parquet(batch, first, report, path))
    else:
        parse = {"hcrl": _parse_hcrl, "hcrl_text": _parse_text, "ctt": _parse_ctt}[fmt]
        for first, lines, non_ascii in _line_batches(path, report):
            if fmt == "ctt" and first == 1 and len(lines) > 0 and not non_ascii[0]:
                head = str(lines[0].as_py()).strip().lower()
                if head.startswith("timestamp"):
                    fields = tuple(f.strip() for f in head.split(","))
                    if fields != CTT_HEADER:
                        raise DataError(
                            f"{path}: header {head!r} is not the can-train-and-test header "
                            f"{','.join(CTT_HEADER)!r}"
                        )
                    lines, first, non_ascii = lines.slice(1), 2, non_ascii[1:]
            report.rows += len(lines)
            parts.append(parse(lines, np.arange(first, first + len(lines)), report, non_ascii))
    messages = CanMessages.concat(parts)
    report.parsed = len(messages)
    report.attack_rows = int(messages.label.sum())
    report.non_monotonic_timestamps = int(np.count_nonzero(np.diff(messages.timestamp) < 0))
    return messages, report


# ---------------------------------------------------------------------------------------------
# line and batch sources


def _line_batches(
    path: Path, report: ParseReport
) -> Iterator[tuple[int, pa.StringArray, npt.NDArray[np.bool_]]]:
    """Yield ``(first_line_number, lines, non_ascii)``; every physical line is one row (empty
    ones too). Lines with bytes >= 0x80 (CAN logs are ASCII) are counted as malformed here,
    blanked, and flagged in ``non_ascii`` so that the parser skips them."""

    def on_invalid(row: pacsv.InvalidRow) -> str:
        # Only a line containing the 0x1f unit separator can get here.
        number = row.number if row.number is not None and row.number >= 0 else -1
        report.rows += 1
        report.add_malformed("control character in line", [number], [row.text or ""])
        return "skip"

    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=["line"], block_size=BLOCK_SIZE),
        parse_options=pacsv.ParseOptions(
            delimiter="\x1f",
            quote_char=False,
            escape_char=False,
            ignore_empty_lines=False,
            invalid_row_handler=on_invalid,
        ),
        convert_options=pacsv.ConvertOptions(
            column_types={"line": pa.binary()},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    first = 1
    for batch in reader:
        raw = batch.column(0)
        n = len(raw)
        non_ascii = np.zeros(n, bool)
        bufs = raw.buffers()
        if n and bufs[2] is not None:
            offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=raw.offset * 4)
            data = np.frombuffer(bufs[2], np.uint8)[offsets[0] : offsets[-1]]
            high = np.flatnonzero(data >= 0x80) + offsets[0]
            rows = np.unique(np.searchsorted(offsets, high, side="right") - 1)
            if len(rows):
                non_ascii[rows] = True
                texts = [
                    bytes(b).decode("utf-8", "replace") for b in raw.take(pa.array(rows[:5])).to_pylist()
                ]
                report.add_malformed("non-ASCII bytes", first + rows, texts)
                raw = pc.if_else(pa.array(~non_ascii), raw, pa.scalar(b"", pa.binary()))
        yield first, raw.cast(pa.string()), non_ascii
        first += n


def _parquet_batches(path: Path) -> Iterator[tuple[int, pa.RecordBatch]]:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from exc
    names = set(pf.schema_arrow.names)
    missing = [c for c in ("timestamp", "id", "data_field", "label") if c not in names]
    if missing:
        raise DataError(
            f"{path}: Parquet file lacks column(s) {', '.join(missing)}; found "
            f"{', '.join(sorted(names))}; expected timestamp, id, data_field, label"
        )
    first = 1
    for batch in pf.iter_batches(batch_size=1 << 20, columns=["timestamp", "id", "data_field", "label"]):
        yield first, batch
        first += batch.num_rows


# ---------------------------------------------------------------------------------------------
# vectorised field decoding


def _fixed_width(arr: pa.Array, width: int) -> npt.NDArray[np.uint8]:
    """Bytes of a string array whose values are all exactly ``width`` bytes long: [n, width]."""
    n = len(arr)
    if n == 0:
        return np.zeros((0, width), np.uint8)
    arr = arr.cast(pa.string()) if arr.type != pa.string() else arr
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    return data[offsets[0] : offsets[-1]].reshape(n, width)


def _byte_lengths(arr: pa.Array) -> npt.NDArray[np.int64]:
    return np.asarray(pc.binary_length(arr).fill_null(-1).to_numpy(zero_copy_only=False), np.int64)


def decode_hex_id(arr: pa.Array) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.bool_]]:
    """Hex IDs of 1..8 chars (``0316``, ``43f``) -> (uint32 values, valid mask)."""
    arr = pc.utf8_trim_whitespace(arr.fill_null(""))
    lengths = _byte_lengths(arr)
    ok = (lengths >= 1) & (lengths <= 8)
    padded = pc.utf8_lpad(pc.if_else(pa.array(ok), arr, "0"), 8, padding="0")
    nib = _HEX[_fixed_width(padded, 8)]
    ok &= (nib != 255).all(axis=1)
    nib = np.where(nib == 255, 0, nib).astype(np.uint32)
    shifts = np.arange(28, -1, -4, dtype=np.uint32)
    values = (nib << shifts).sum(axis=1, dtype=np.uint64).astype(np.uint32)
    return values, ok


def decode_hex_payload(
    arr: pa.Array,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Concatenated hex payloads of 0..16 chars, even length -> (payload [n,8], dlc [n], valid)."""
    arr = arr.fill_null("")
    lengths = _byte_lengths(arr)
    ok = (lengths >= 0) & (lengths <= 16) & (lengths % 2 == 0)
    padded = pc.utf8_rpad(pc.if_else(pa.array(ok), arr, ""), 16, padding="0")
    nib = _HEX[_fixed_width(padded, 16)]
    ok &= (nib != 255).all(axis=1)
    nib = np.where(nib == 255, 0, nib)
    payload = (nib[:, 0::2] << 4 | nib[:, 1::2]).astype(np.uint8)
    dlc = np.where(ok, lengths // 2, 0).astype(np.uint8)
    return payload, dlc, ok


def decode_float(arr: pa.Array) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    arr = pc.utf8_trim_whitespace(arr.fill_null(""))
    ok_arr = pc.match_substring_regex(arr, _FLOAT_RE)
    ok = np.asarray(ok_arr.to_numpy(zero_copy_only=False), bool)
    values = pc.cast(pc.if_else(ok_arr, arr, "0"), pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(values, np.float64), ok


def _texts_of(arr: pa.Array | pa.RecordBatch) -> Callable[[npt.NDArray[np.intp]], list[str]]:
    def texts(index: npt.NDArray[np.intp]) -> list[str]:
        return [str(s) for s in arr.take(pa.array(index, pa.int64())).to_pylist()]

    return texts


class _Checks:
    """Assigns each bad row the first reason that applies, in the order checks are added."""

    def __init__(
        self,
        n: int,
        numbers: npt.NDArray[np.int64],
        texts: Callable[[npt.NDArray[np.intp]], list[str]],
        report: ParseReport,
        already_bad: npt.NDArray[np.bool_] | None = None,
    ):
        self.bad = np.zeros(n, bool) if already_bad is None else already_bad.copy()
        self.numbers, self.texts, self.report = numbers, texts, report

    def add(self, reason: str, is_bad: npt.NDArray[np.bool_]) -> None:
        new = np.flatnonzero(is_bad & ~self.bad)
        if len(new):
            self.report.add_malformed(reason, self.numbers[new], self.texts(new[:5]))
            self.bad[new] = True


def _split(lines: pa.Array) -> tuple[pa.Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    fields = pc.split_pattern(lines, ",")
    offsets = fields.offsets.to_numpy().astype(np.int64)
    counts = np.diff(offsets)
    return fields.values, offsets[:-1], counts


def _field(values: pa.Array, index: npt.NDArray[np.int64], present: npt.NDArray[np.bool_]) -> pa.Array:
    if len(values) == 0:
        return pa.array([""] * len(index), pa.string())
    safe = np.where(present, index, 0)
    return pc.utf8_trim_whitespace(values.take(pa.array(safe, pa.int64())))


# ---------------------------------------------------------------------------------------------
# per-format batch parsers


def _parse_hcrl(
    lines: pa.Array,
    numbers: npt.NDArray[np.int64],
    report: ParseReport,
    non_ascii: npt.NDArray[np.bool_],
) -> CanMessages:
    n = len(lines)
    lines = pc.utf8_trim_whitespace(lines)
    checks = _Checks(n, numbers, _texts_of(lines), report, non_ascii)
    values, start, count = _split(lines)
    checks.add("empty line", _byte_lengths(lines) == 0)
    has4 = count >= 4
    checks.add("too few fields (expected timestamp,id,dlc,...,flag)", ~has4)
    ts, ts_ok = decode_float(_field(values, start, has4))
    can_id, id_ok = decode_hex_id(_field(values, start + 1, has4))
    dlc_s = _field(values, start + 2, has4)
    dlc_ok = np.asarray(pc.match_substring_regex(dlc_s, r"^[0-8]$").to_numpy(zero_copy_only=False), bool)
    dlc = np.where(dlc_ok, pc.cast(pc.if_else(pa.array(dlc_ok), dlc_s, "0"), pa.int64()).to_numpy(), 0)
    flag = _field(values, start + count - 1, has4)
    is_t = np.asarray(pc.equal(flag, "T").to_numpy(zero_copy_only=False), bool)
    is_r = np.asarray(pc.equal(flag, "R").to_numpy(zero_copy_only=False), bool)
    checks.add("bad timestamp", ~ts_ok)
    checks.add("bad CAN ID (expected 1-8 hex digits)", ~id_ok)
    checks.add("bad DLC (expected 0-8)", ~dlc_ok)
    checks.add("field count does not match DLC", count != dlc + 4)
    checks.add("bad flag (expected R or T)", ~(is_t | is_r))

    payload = np.zeros((n, 8), np.uint8)
    rows = np.flatnonzero(~checks.bad)
    nbytes = dlc[rows].astype(np.int64)
    total = int(nbytes.sum())
    if total:
        row_of = np.repeat(rows, nbytes)
        first_of = np.repeat(np.cumsum(nbytes) - nbytes, nbytes)
        j = np.arange(total) - first_of
        byte_s = pc.utf8_trim_whitespace(values.take(pa.array(start[row_of] + 3 + j, pa.int64())))
        blen = _byte_lengths(byte_s)
        byte_ok = (blen >= 1) & (blen <= 2)
        nib = _HEX[_fixed_width(pc.utf8_lpad(pc.if_else(pa.array(byte_ok), byte_s, "00"), 2, padding="0"), 2)]
        byte_ok &= (nib != 255).all(axis=1)
        bad_rows = np.zeros(n, bool)
        bad_rows[row_of[~byte_ok]] = True
        checks.add("bad payload byte (expected 2 hex digits)", bad_rows)
        good = byte_ok & ~checks.bad[row_of]
        payload[row_of[good], j[good]] = (nib[good, 0] << 4 | nib[good, 1]).astype(np.uint8)
    keep = ~checks.bad
    return CanMessages(
        timestamp=ts[keep],
        can_id=can_id[keep],
        dlc=dlc[keep].astype(np.uint8),
        payload=payload[keep],
        label=is_t[keep].astype(np.uint8),
    )


def _parse_ctt(
    lines: pa.Array,
    numbers: npt.NDArray[np.int64],
    report: ParseReport,
    non_ascii: npt.NDArray[np.bool_],
) -> CanMessages:
    clean = _parse_clean_ctt(lines)
    if clean is not None:
        return clean
    n = len(lines)
    lines = pc.utf8_trim_whitespace(lines)
    checks = _Checks(n, numbers, _texts_of(lines), report, non_ascii)
    values, start, count = _split(lines)
    checks.add("empty line", _byte_lengths(lines) == 0)
    has4 = count == 4
    checks.add("expected 4 fields (timestamp,arbitration_id,data_field,attack)", ~has4)
    ts, ts_ok = decode_float(_field(values, start, has4))
    can_id, id_ok = decode_hex_id(_field(values, start + 1, has4))
    payload, dlc, data_ok = decode_hex_payload(_field(values, start + 2, has4))
    attack = _field(values, start + 3, has4)
    is1 = np.asarray(pc.equal(attack, "1").to_numpy(zero_copy_only=False), bool)
    is0 = np.asarray(pc.equal(attack, "0").to_numpy(zero_copy_only=False), bool)
    checks.add("bad timestamp", ~ts_ok)
    checks.add("bad CAN ID (expected 1-8 hex digits)", ~id_ok)
    checks.add("bad data_field (expected 0-16 hex digits, even count)", ~data_ok)
    checks.add("bad attack flag (expected 0 or 1)", ~(is0 | is1))
    keep = ~checks.bad
    return CanMessages(ts[keep], can_id[keep], dlc[keep], payload[keep], is1[keep].astype(np.uint8))


def _string_buffers(arr: pa.Array) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The bytes of a string array and its ``n + 1`` offsets into them (no copy of the bytes)."""
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets


#: Longest field the plain can-train-and-test path takes (longer timestamps: general parser).
_MAX_PLAIN_FIELD = 32


def _gather(
    padded: npt.NDArray[np.uint8],
    start: npt.NDArray[np.int64],
    length: npt.NDArray[np.int64],
    fill: int,
    right: bool = False,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Fields ``padded[start:start + length]`` as a [n, max length] matrix, left- or
    right-aligned, the other cells set to ``fill``; and the mask of the field cells. ``padded``
    has ``_MAX_PLAIN_FIELD`` spare bytes at both ends, so no window runs off it."""
    width = max(int(length.max()), 1)
    # uint8 compares: lengths are <= _MAX_PLAIN_FIELD, and narrow types vectorise better
    col, length8 = np.arange(width, dtype=np.uint8), length.astype(np.uint8)
    inside = col >= width - length8[:, None] if right else col < length8[:, None]
    first = start + length - width if right else start
    # rows of a strided view: one copy of ``width`` bytes per field, no per-byte index
    cells = np.lib.stride_tricks.sliding_window_view(padded, width)[first]
    return np.where(inside, cells, np.uint8(fill)), inside


def _parse_clean_ctt(lines: pa.Array) -> CanMessages | None:
    """The messages of a batch of can-train-and-test lines when every line is in the plain form
    ``digits[.digits],hex{1,8},hex{0,16} (even),0|1`` (no spaces, no empty line), else None.

    The general parser (string kernels per field, a regex for timestamps) gives the same arrays
    for such a batch; this path reads the line bytes with numpy instead, about 3x faster, and the
    timestamps still go through Arrow's string -> double cast, so they are bit for bit the same.
    """
    n = len(lines)
    if n == 0:
        return None
    data, offsets = _string_buffers(lines)
    spare = np.zeros(_MAX_PLAIN_FIELD, np.uint8)
    padded = np.concatenate([spare, data[offsets[0] : offsets[-1]], spare])
    offsets = offsets - offsets[0] + _MAX_PLAIN_FIELD
    # exactly three commas per line: the i-th triple of the batch's commas lies in line i
    comma_at = np.flatnonzero(padded == ord(","))
    if len(comma_at) != 3 * n:
        return None
    commas = comma_at.reshape(n, 3)
    if (commas[:, 0] < offsets[:-1]).any() or (commas[:, 2] >= offsets[1:]).any():
        return None
    ts_start, ts_len = offsets[:-1], commas[:, 0] - offsets[:-1]
    id_start, id_len = commas[:, 0] + 1, commas[:, 1] - commas[:, 0] - 1
    data_start, data_len = commas[:, 1] + 1, commas[:, 2] - commas[:, 1] - 1
    flag_start, flag_len = commas[:, 2] + 1, offsets[1:] - commas[:, 2] - 1
    if (
        (ts_len < 1).any()
        or (ts_len > _MAX_PLAIN_FIELD).any()
        or (id_len < 1).any()
        or (id_len > 8).any()
        or (data_len > 16).any()
        or (data_len % 2).any()
        or (flag_len != 1).any()
    ):
        return None

    # attack: "0" or "1"
    flag = padded[flag_start]
    if ((flag != ord("0")) & (flag != ord("1"))).any():
        return None
    label = (flag - ord("0")).astype(np.uint8)

    # arbitration_id: 1-8 hex digits, read as if left-padded with "0"
    nib = _HEX[_gather(padded, id_start, id_len, fill=ord("0"), right=True)[0]]
    if (nib == 255).any():
        return None
    can_id = np.zeros(n, np.uint32)
    for k in range(nib.shape[1]):
        can_id = can_id << np.uint32(4) | nib[:, k]

    # data_field: 0-16 hex digits, an even count, read as if right-padded with "0"
    nib = _HEX[_gather(padded, data_start, data_len, fill=ord("0"))[0]]
    if (nib == 255).any():
        return None
    used = int(data_len.max()) // 2
    payload = np.zeros((n, 8), np.uint8)
    payload[:, :used] = nib[:, 0 : 2 * used : 2] << 4 | nib[:, 1 : 2 * used : 2]
    dlc = (data_len // 2).astype(np.uint8)

    # timestamp: digits with at most one '.', not first; copied into a string array for the cast
    cells, inside = _gather(padded, ts_start, ts_len, fill=ord("0"))
    dot = cells == ord(".")
    digit = cells - np.uint8(ord("0")) <= 9  # uint8: bytes below "0" wrap round to large values
    if not (digit | dot).all() or dot[:, 0].any():
        return None
    dot_row = np.flatnonzero(dot) // dot.shape[1]
    if (dot_row[1:] == dot_row[:-1]).any():
        return None
    ts_offsets = np.zeros(n + 1, np.int32)
    np.cumsum(ts_len, out=ts_offsets[1:])
    ts_text = pa.StringArray.from_buffers(n, pa.py_buffer(ts_offsets), pa.py_buffer(cells[inside]))
    timestamp = np.asarray(pc.cast(ts_text, pa.float64()).to_numpy(zero_copy_only=False), np.float64)
    return CanMessages(timestamp, can_id, dlc, payload, label)


def _parse_text(
    lines: pa.Array,
    numbers: npt.NDArray[np.int64],
    report: ParseReport,
    non_ascii: npt.NDArray[np.bool_],
) -> CanMessages:
    n = len(lines)
    lines = pc.utf8_trim_whitespace(lines)
    checks = _Checks(n, numbers, _texts_of(lines), report, non_ascii)
    checks.add("empty line", _byte_lengths(lines) == 0)
    parts = pc.extract_regex(lines, _TEXT_RE)
    matched = np.asarray(parts.is_valid().to_numpy(zero_copy_only=False), bool)
    checks.add("not a 'Timestamp: ... ID: ... DLC: ...' line", ~matched)
    ts, ts_ok = decode_float(parts.field("ts"))
    can_id, id_ok = decode_hex_id(parts.field("id"))
    dlc_s = parts.field("dlc").fill_null("")
    dlc_ok = np.asarray(pc.match_substring_regex(dlc_s, r"^[0-8]$").to_numpy(zero_copy_only=False), bool)
    dlc = np.where(dlc_ok, pc.cast(pc.if_else(pa.array(dlc_ok), dlc_s, "0"), pa.int64()).to_numpy(), 0)
    data = pc.replace_substring_regex(parts.field("data").fill_null(""), r"\s+", "")
    payload, data_dlc, data_ok = decode_hex_payload(data)
    checks.add("bad timestamp", ~ts_ok)
    checks.add("bad CAN ID (expected 1-8 hex digits)", ~id_ok)
    checks.add("bad DLC (expected 0-8)", ~dlc_ok)
    checks.add("bad data bytes", ~data_ok)
    checks.add("byte count does not match DLC", data_dlc != dlc)
    keep = ~checks.bad
    k = int(keep.sum())
    return CanMessages(ts[keep], can_id[keep], data_dlc[keep], payload[keep], np.zeros(k, np.uint8))


def _parse_parquet(batch: pa.RecordBatch, first: int, report: ParseReport, path: Path) -> CanMessages:
    n = batch.num_rows
    report.rows += n
    numbers = np.arange(first, first + n)
    checks = _Checks(n, numbers, _texts_of(batch), report)

    ts_col = batch.column("timestamp")
    if pa.types.is_string(ts_col.type) or pa.types.is_large_string(ts_col.type):
        ts, ts_ok = decode_float(ts_col)
    else:
        try:
            ts_arr = pc.cast(ts_col, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(f"{path}: column timestamp has type {ts_col.type}; expected double") from exc
        ts_ok = np.asarray(ts_arr.is_valid().to_numpy(zero_copy_only=False), bool)
        ts = np.asarray(ts_arr.fill_null(0.0).to_numpy(zero_copy_only=False), np.float64)
        ts_ok &= np.isfinite(ts)

    id_col = batch.column("id")
    if pa.types.is_integer(id_col.type):
        raw = np.asarray(pc.cast(id_col, pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False))
        id_ok = (raw >= 0) & (raw < 1 << 29)
        can_id = np.where(id_ok, raw, 0).astype(np.uint32)
    elif pa.types.is_string(id_col.type) or pa.types.is_large_string(id_col.type):
        can_id, id_ok = decode_hex_id(id_col)
    else:
        raise DataError(f"{path}: column id has type {id_col.type}; expected uint32 or hex string")

    data_col = batch.column("data_field")
    if not (pa.types.is_string(data_col.type) or pa.types.is_large_string(data_col.type)):
        raise DataError(f"{path}: column data_field has type {data_col.type}; expected hex string")
    data_null = np.asarray(data_col.is_null().to_numpy(zero_copy_only=False), bool)
    payload, dlc, data_ok = decode_hex_payload(data_col)

    label_col = batch.column("label")
    try:
        lab = np.asarray(pc.cast(label_col, pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(f"{path}: column label has type {label_col.type}; expected uint8 0/1") from exc

    checks.add("bad timestamp", ~ts_ok)
    checks.add("bad CAN ID (expected 0 <= id < 2^29)", ~id_ok)
    checks.add("missing data_field", data_null)
    checks.add("bad data_field (expected 0-16 hex digits, even count)", ~data_ok)
    checks.add("bad label (expected 0 or 1)", (lab != 0) & (lab != 1))
    keep = ~checks.bad
    return CanMessages(ts[keep], can_id[keep], dlc[keep], payload[keep], lab[keep].astype(np.uint8))
