"""What `ddpjob convert` found in a file (cli/pytorchjob.py and its parts): each error
naming the field, each note, and the reading of what a PyTorchJob holds as numbers and
lists, checked and bounded: a file is its author's, and a replica count of `abc`, a
4,300-digit one or a list where an object goes is one line naming the field, not a
traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddpjob.api.checker import show
from ddpjob.api.errors import FieldError

MAX_NPROC = 256  # a DDPJob's nprocPerNode, at most
MAX_GPUS = 1024


class Conversion:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.notes: list[str] = []

    def err(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def count(self, value: Any, path: str, lo: int, hi: int, text: bool = False) -> int | None:
        """A whole number from lo to hi (`text`: a string of digits too, as Kubernetes
        writes a quantity), else an error naming `path` and None."""
        if isinstance(value, str) and text and value.isascii() and value.isdigit() and len(value) <= 6:
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        self.err(path, f"must be a whole number from {lo} to {hi} (got {show(value)})")
        return None

    def objects(self, value: Any, path: str) -> list[Any]:
        """A list of objects (dicts: a file's, or its copy), else an error naming `path` and []."""
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            self.err(path, f"must be a list of objects (got {show(value)})")
            return []
        return value
