"""`ddpjob run`'s side of the notices to an elastic job's survivors (ddpjob.notice), as the
operator sends them (operator/notices.py): each process tree the job logic names lost
(`Plan.tell_lost`) is told, once, to the other running ones, at their loopback "Pod IP"
and the progress port, each POST on a short-lived thread of its own with one deadline.
The token is drawn for the run and given to each Pod as the operator gives it."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time

from ddpjob import contract, notice


class LocalNotices:
    def __init__(self, port: int = contract.DEFAULT_PROGRESS_PORT):
        self.token = secrets.token_hex(32)
        self.port = port
        self.told: set[int] = set()  # id() of each container told of

    def tell(self, lost: dict[int, int], survivors: list[str]) -> list[threading.Thread]:
        """`lost`: container id -> node index; `survivors`: their IPs. The threads started."""
        new = {key: index for key, index in lost.items() if key not in self.told}
        if not new:
            return []
        self.told.update(new)
        indices = sorted(set(new.values()))
        threads = [
            threading.Thread(target=self._post, args=(ip, indices), name="ddpjob-notice", daemon=True)
            for ip in survivors
        ]
        for t in threads:
            t.start()
        return threads

    def _post(self, ip: str, indices: list[int]) -> None:
        with contextlib.suppress(OSError):  # the survivor finds the loss itself
            notice.post(ip, self.port, self.token, indices, time.time())
