"""Copies of plain API data (the dicts, lists and scalars that JSON gives).

The store copies every object it takes in, records for watchers and hands out, as the
real API server's objects never share memory with a client's. `copy.deepcopy` walks the
data in Python with a memo entry per node (about 1 ms per rendered Pod under load, half
of the dev cluster's CPU in a 1,024-Pod create burst); a pickle round trip does the same
walk in C and gives an equal, unshared copy of such data, 4 to 5 times faster.
"""

from __future__ import annotations

import pickle
from typing import TypeVar

T = TypeVar("T")


def fresh(data: T) -> T:
    """A deep copy of `data` (plain API data: dicts, lists, str, int, float, bool, None)."""
    return pickle.loads(pickle.dumps(data, pickle.HIGHEST_PROTOCOL))
