"""Kubernetes quantities: one grammar for the renderer and the dev cluster."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ddpjob.api.quantity import MAX_LENGTH, format_quantity, is_bytes, parse_quantity


@pytest.mark.parametrize(
    "value, expected",
    [
        ("500m", "0.5"),
        ("4Gi", str(4 * 2**30)),
        (2, "2"),
        ("1.5", "1.5"),
        ("1e3", "1000"),
        ("1E-3", "0.001"),
        ("128Mi", str(128 * 2**20)),
        ("1k", "1000"),
        ("1E", str(10**18)),
        (".5", "0.5"),
        ("5.", "5"),
        ("-1", "-1"),
        ("+2M", "2000000"),
        ("100n", "1E-7"),
        ("3u", "0.000003"),
        (0.25, "0.25"),
        (" 1Gi ", str(2**30)),
    ],
)
def test_a_quantity_parses_as_kubernetes_reads_it(value, expected) -> None:
    assert parse_quantity(value) == Decimal(expected)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "1.2.3",
        ".",
        "1KiB",
        "1ki",
        "1K",
        "1e3Mi",
        "Infinity",
        "NaN",
        "1e",
        "--1",
        "1" * (MAX_LENGTH + 1),
        True,
        "1e999999999999",
        "1e-40",
        1e300,
        float("nan"),
        Decimal("Infinity"),
    ],
)
def test_anything_else_is_a_value_error_naming_it(value) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(value)


@pytest.mark.parametrize(
    "value, binary, expected",
    [
        ("1", False, "1"),
        ("0.5", False, "500m"),
        ("1073741824", True, "1Gi"),
        ("1073741824", False, "1073741824"),
        ("1536", True, "1536"),
        ("3072", True, "3Ki"),
        ("0", True, "0"),
        (str(2**40), True, "1Ti"),
        ("0.001", True, "1m"),
    ],
)
def test_format_prints_whole_numbers_in_the_largest_unit_that_divides(value, binary, expected) -> None:
    assert format_quantity(Decimal(value), binary=binary) == expected


def test_bytes_are_memory_storage_and_hugepages() -> None:
    assert [is_bytes(r) for r in ("memory", "ephemeral-storage", "hugepages-2Mi", "cpu", "nvidia.com/gpu")] == [
        True,
        True,
        True,
        False,
        False,
    ]
