"""Readers on committed fixture files of each format, malformed rows included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdgat.data import DataError, detect_format, read_can_file, readers
from kdgat.data.synth import generate_can_traffic, write_can_file

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_hcrl_rows_are_decoded_and_every_malformed_row_is_counted_by_reason() -> None:
    messages, report = read_can_file(FIXTURES / "hcrl_sample.csv")
    assert report.format == "hcrl"
    assert (report.rows, report.parsed, report.malformed) == (24, 15, 9)
    assert report.reasons == {
        "empty line": 1,
        "too few fields (expected timestamp,id,dlc,...,flag)": 1,
        "bad timestamp": 1,
        "bad CAN ID (expected 1-8 hex digits)": 1,
        "bad DLC (expected 0-8)": 1,
        "field count does not match DLC": 2,
        "bad flag (expected R or T)": 1,
        "bad payload byte (expected 2 hex digits)": 1,
    }
    assert [e[0] for e in report.examples] == [15, 16, 17, 18, 19]
    assert messages.can_id[0] == 0x316
    assert messages.payload[0].tolist() == [0x05, 0x21, 0x68, 0x09, 0x21, 0x21, 0x00, 0x6F]
    assert messages.timestamp[0] == pytest.approx(1478198376.389427)
    # the DLC-2 row: two bytes, the rest zero
    assert messages.dlc[10] == 2
    assert messages.payload[10].tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert messages.label.tolist() == [0] * 8 + [1, 1] + [0] * 5
    assert messages.can_id[8] == 0


def test_can_train_and_test_csv_keeps_file_order_and_empty_attack_payloads() -> None:
    messages, report = read_can_file(FIXTURES / "ctt_sample.csv")
    assert report.format == "ctt"
    assert (report.rows, report.parsed, report.malformed) == (14, 7, 7)
    assert report.reasons == {
        "bad CAN ID (expected 1-8 hex digits)": 1,
        "bad attack flag (expected 0 or 1)": 1,
        "bad data_field (expected 0-16 hex digits, even count)": 3,
        "bad timestamp": 1,
        "expected 4 fields (timestamp,arbitration_id,data_field,attack)": 1,
    }
    assert messages.can_id.tolist() == [0x0A0, 0x1F4, 0x0C1, 0x1F4, 0x000, 0x4F1, 0x6FF]
    assert messages.dlc.tolist() == [8, 8, 2, 8, 0, 8, 1]
    assert messages.payload[1].tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert messages.payload[2].tolist() == [0x2A, 0, 0, 0, 0, 0, 0, 0]
    assert messages.label.tolist() == [0, 0, 0, 0, 1, 1, 0]
    # line 4 (0.000512) comes before line 5 (0.000488): kept in file order, counted
    assert report.non_monotonic_timestamps == 1
    assert report.attack_rows == 2


def test_hcrl_normal_run_text_form() -> None:
    messages, report = read_can_file(FIXTURES / "normal_run_data_sample.txt")
    assert report.format == "hcrl_text"
    assert (report.rows, report.parsed, report.malformed) == (7, 5, 2)
    assert report.reasons == {
        "byte count does not match DLC": 1,
        "not a 'Timestamp: ... ID: ... DLC: ...' line": 1,
    }
    assert messages.can_id.tolist() == [0x350, 0x2C0, 0x430, 0x5F0, 0x1F1]
    assert messages.payload[0].tolist() == [0x05, 0x28, 0x84, 0x66, 0x6D, 0x00, 0x00, 0xA2]
    assert messages.dlc[3] == 2
    assert not messages.label.any()


def test_parquet_conversion_with_malformed_rows() -> None:
    messages, report = read_can_file(FIXTURES / "can_sample.parquet")
    assert report.format == "parquet"
    assert (report.rows, report.parsed, report.malformed) == (7, 3, 4)
    assert report.reasons == {
        "bad timestamp": 1,
        "missing data_field": 1,
        "bad data_field (expected 0-16 hex digits, even count)": 1,
        "bad label (expected 0 or 1)": 1,
    }
    assert [e[0] for e in report.examples] == [2, 3, 5, 6]
    assert messages.can_id.tolist() == [0x316, 0x000, 0x1F1]
    assert messages.payload[0].tolist() == [0x05, 0x21, 0x68, 0x09, 0x21, 0x21, 0x00, 0x6F]
    assert messages.dlc.tolist() == [8, 0, 2]
    assert messages.label.tolist() == [0, 1, 1]


def test_parquet_without_a_required_column_names_it(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"timestamp": [1.0], "id": pa.array([1], pa.uint32())}), path)
    with pytest.raises(DataError, match=r"lacks column\(s\) data_field, label"):
        read_can_file(path)


def test_format_detection_and_unknown_extension(tmp_path: Path) -> None:
    assert detect_format(FIXTURES / "hcrl_sample.csv") == "hcrl"
    assert detect_format(FIXTURES / "ctt_sample.csv") == "ctt"
    assert detect_format(FIXTURES / "normal_run_data_sample.txt") == "hcrl_text"
    assert detect_format(FIXTURES / "can_sample.parquet") == "parquet"
    other = tmp_path / "x.json"
    other.write_text("{}")
    with pytest.raises(DataError, match=r"unknown CAN file extension '\.json'"):
        detect_format(other)


def test_wrong_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("timestamp,can_id,data,label\n1.0,0a0,00,0\n")
    with pytest.raises(DataError, match="not the can-train-and-test header"):
        read_can_file(path)


def test_crlf_and_files_read_in_several_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # several pyarrow blocks: line numbers must continue across batches
    monkeypatch.setattr(readers, "BLOCK_SIZE", 4096)
    row = "1478198376.389427,0316,8,05,21,68,09,21,21,00,6f,R\r\n"
    n = 1000
    path = tmp_path / "big.csv"
    path.write_text(row * n + "bad\r\n", newline="")
    messages, report = read_can_file(path)
    assert (report.rows, report.parsed, report.malformed) == (n + 1, n, 1)
    assert report.examples[0][0] == n + 1
    assert np.all(messages.can_id == 0x316)


def test_non_ascii_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(
        b"timestamp,arbitration_id,data_field,attack\n"
        b"1672531200.0,0a0,0001,0\n"
        b"1672531200.1,0\xff0,0001,0\n"
        b"1672531200.2,0a1,0002,1\n"
    )
    messages, report = read_can_file(path)
    assert (report.rows, report.parsed, report.malformed) == (3, 2, 1)
    assert report.reasons == {"non-ASCII bytes": 1}
    assert report.examples[0][0] == 3
    assert messages.can_id.tolist() == [0x0A0, 0x0A1]


def _general_parse(path: Path, monkeypatch: pytest.MonkeyPatch):
    """read_can_file with the plain can-train-and-test fast path switched off."""
    with monkeypatch.context() as m:
        m.setattr(readers, "_parse_clean_ctt", lambda lines: None)
        return read_can_file(path)


@pytest.mark.parametrize(
    ("body", "plain"),
    [
        # plain lines: the fast path; ids of 1-8 digits, upper case, empty and full payloads
        (
            "1672531200.000614,304,fecd,0\n1672531200.5,6D8,074C9d9c7d3fd663,1\n7,0,,0\n"
            "12.,1fffffff,00,1\n0.000000000000000000001,00000001,abcdefABCDEF0123,0\n",
            True,
        ),
        ("1.5,0a0,,0\n2.5,0a1,,1\n", True),  # every payload empty
        # long timestamps (more digits than a double holds)
        ("1672531200.123456789012345678,7ff,01,0\n16725312001234567890,7fe,0102,0\n", True),
        # not plain: each falls back to the general parser, which counts the bad rows
        ("1.0,0a0,00,0\n\n1.1,0a1,01,1\n", False),  # empty line
        ("1.0, 0a0,00,0\n1.1,0a1,01,1\n", False),  # a space
        ("1.0,0a0,00,0\r\n1.1,0a1,01,1\r\n", True),  # CRLF: Arrow splits lines at \r\n too
        ("1.0,0a0,00,0\r\n1.1,0a1,01,1\r\r\n", False),  # a stray \r: an empty line
        ("1e3,0a0,00,0\n.5,0a1,01,1\n+1.0,0a2,,0\n", False),  # other float forms the regex accepts
        ("1.0.0,0a0,00,0\n1.1,0g1,01,1\n1.2,0a2,012,0\n1.3,0a3,00,2\n1.4,0a4,00\n1.5,,00,0\n", False),
        ("1.0,123456789,00,0\n1.1,0a1,000102030405060708,0\n" + "9" * 40 + ",0a2,00,0\n", False),
    ],
)
def test_plain_ctt_fast_path_equals_the_general_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, plain: bool
) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(("timestamp,arbitration_id,data_field,attack\n" + body).encode())
    fast = readers._parse_clean_ctt
    used: list[bool] = []

    def spy(lines: pa.Array) -> object:
        out = fast(lines)
        used.append(out is not None)
        return out

    monkeypatch.setattr(readers, "_parse_clean_ctt", spy)
    got, got_report = read_can_file(path)
    assert used == [plain]

    want, want_report = _general_parse(path, monkeypatch)
    assert got_report.to_json() == want_report.to_json()
    for name in ("timestamp", "can_id", "dlc", "payload", "label"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name


def test_plain_ctt_fast_path_on_generated_traffic_in_several_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_can_file(tmp_path / "t.csv", generate_can_traffic(20_000, seed=3, attack="fuzzy"), "csv")
    monkeypatch.setattr(readers, "BLOCK_SIZE", 1 << 16)
    fast = readers._parse_clean_ctt
    used: list[bool] = []

    def spy(lines: pa.Array) -> object:
        out = fast(lines)
        used.append(out is not None)
        return out

    monkeypatch.setattr(readers, "_parse_clean_ctt", spy)
    got, got_report = read_can_file(path)
    assert len(used) > 1 and all(used) and got_report.malformed == 0
    want, want_report = _general_parse(path, monkeypatch)
    assert got_report.to_json() == want_report.to_json()
    for name in ("timestamp", "can_id", "dlc", "payload", "label"):
        assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
