"""How `ddpjob get` prints what the API server answers, as kubectl prints it: the
server's Table (the CRD's printer columns), and objects without managedFields."""

from __future__ import annotations

from typing import Any


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """As `kubectl get -o yaml` shows an object: server-side apply's bookkeeping left out."""
    if isinstance(obj.get("items"), list):
        return {**obj, "items": [without_managed_fields(i) for i in obj["items"] if isinstance(i, dict)]}
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


# The longest cell the table prints whole (`-o wide` prints every cell whole): a failed job's
# MESSAGE is a sentence of up to a few hundred characters, which pushed every row off screen.
MAX_CELL = 80


def cell(value: Any, wide: bool) -> str:
    """One cell as kubectl prints it (an absent value prints nothing), cut at MAX_CELL."""
    text = "" if value is None else str(value)
    return text if wide or len(text) <= MAX_CELL else text[: MAX_CELL - 3] + "..."


def format_table(table: dict[str, Any], wide: bool = False) -> str:
    """kubectl's layout: upper-case headers, columns padded with three spaces; `wide`
    adds the columns of a higher priority (-o wide)."""
    columns = [c for c in table["columnDefinitions"] if wide or int(c.get("priority", 0)) == 0]
    index = [table["columnDefinitions"].index(c) for c in columns]
    rows = [[c["name"].upper() for c in columns]]
    for row in table["rows"]:
        rows.append([cell(row["cells"][i], wide) for i in index])
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)
