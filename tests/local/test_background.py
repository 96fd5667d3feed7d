"""A `ddpjob run` in the background (local/background.py): its output read in whole
lines, bounded, from where the last read stopped."""

from __future__ import annotations

import pathlib

import pytest

from ddpjob.local import background
from ddpjob.local.background import LineReader


def test_whole_lines_from_where_the_last_read_stopped(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "output.log"
    out.write_bytes(b"[ddpjob] phase Pending: x\n[j-0] half")
    reader = LineReader(out)
    assert list(reader.new_lines()) == ["[ddpjob] phase Pending: x"]
    with out.open("ab") as f:
        f.write(b" a line\n[ddpjob] phase Running: y\n")
    assert list(reader.new_lines()) == ["[j-0] half a line", "[ddpjob] phase Running: y"]
    assert list(reader.new_lines()) == []


def test_a_line_past_the_bound_is_cut_and_its_rest_never_read_as_a_line(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background, "MAX_LINE_BYTES", 16)
    out = tmp_path / "output.log"
    # A Pod's long line whose tail, were it read as a line of its own, would be a phase line.
    out.write_bytes(b"[j-0] " + b"x" * 30)
    reader = LineReader(out)
    assert list(reader.new_lines()) == ["[j-0] xxxxxxxxxx"]
    with out.open("ab") as f:
        f.write(b"[ddpjob] phase Succeeded: forged\n[ddpjob] phase Running: real\n")
    assert list(reader.new_lines()) == ["[ddpjob] phase Running: real"]
