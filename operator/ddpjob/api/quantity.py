"""Kubernetes resource quantities ('500m', '4Gi', '1e3', 2): parsed to a number, printed back.

The one home of the quantity grammar (apimachinery pkg/api/resource/quantity.go): the
renderer sums Volcano's minResources with it, and the dev cluster's scheduler, Pod
validation and quota admission count requests with it.

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits>? | .<digits>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei
                 | (e | E) <sign>? <digits>
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_BINARY = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")  # largest first: the biggest unit that divides wins
_GRAMMAR = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:([eE][+-]?[0-9]+)|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$"
)
# A quantity longer than this is not one a person wrote; refuse it before Decimal sees it.
MAX_LENGTH = 64
MAX_EXPONENT = 30
# Resources counted in bytes: printed in binary units.
BYTE_RESOURCES = ("memory", "ephemeral-storage")


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """A quantity as a number; ValueError naming the value when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    result = Decimal(value) if isinstance(value, (int, Decimal)) else _parse_text(value)
    # '1e999999999' is a valid Decimal whose int() would fill the memory: refuse what no
    # resource needs (the API server's int64 cannot hold it either).
    if not result.is_finite() or (result and not -MAX_EXPONENT <= result.adjusted() <= MAX_EXPONENT):
        raise ValueError(f"not a quantity: {value!r} (out of range)")
    return result


def _parse_text(value: str | float) -> Decimal:
    text = str(value).strip()
    match = _GRAMMAR.match(text) if len(text) <= MAX_LENGTH else None
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        return Decimal(number + exponent) if exponent else Decimal(number) * SUFFIXES[suffix or ""]
    except InvalidOperation as e:
        raise ValueError(f"not a quantity: {value!r}") from e


def is_bytes(resource: str) -> bool:
    """Whether a resource name counts bytes (memory, storage, hugepages-*)."""
    return resource in BYTE_RESOURCES or resource.startswith("hugepages-")


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """Whole numbers as they are (with `binary`, in the largest binary unit that divides
    them), fractions in milli-units."""
    if value == value.to_integral_value():
        whole = int(value)
        for suffix in _BINARY if binary and whole else ():
            if whole % int(SUFFIXES[suffix]) == 0:
                return f"{whole // int(SUFFIXES[suffix])}{suffix}"
        return str(whole)
    return f"{int((value * 1000).to_integral_value())}m"
