"""Free TCP ports on this machine, for rendezvous stores and test servers."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it; a race with another
    process is possible but harmless for a rendezvous: torchrun then fails and retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
