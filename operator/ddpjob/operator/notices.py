"""The operator's side of the notices to an elastic job's survivors (ddpjob.notice): each
lost Pod the job logic names (`Plan.tell_lost`, job/survivor_notices.py) is sent once to
every other running Pod of the attempt, at `status.podIP` and the progress port, as the
progress poller reads them.

Bounds: a Pod (by uid) is told of once; each POST has one deadline for the whole exchange
(notice.TIMEOUT); they run on a pool of their own (`max_in_flight` threads), never on the
event loop, and a job's posts beyond MAX_PER_LOSS are dropped (a job's Pods are at most
its maxNodes). A Pod that does not answer is no error: it finds the loss itself.

The key: the settings' DDPJOB_NOTICE_KEY (a Secret's value, so that Pods outlive an
operator restart) or one drawn at start. Each job's Pods get their token (`token`) in
DDPJOB_NOTICE_TOKEN when created (children.py).
"""

from __future__ import annotations

import concurrent.futures
import logging
import secrets
import time
from collections.abc import Iterable

from ddpjob import contract, notice
from ddpjob.job.observe import PodState

logger = logging.getLogger("ddpjob.operator.notices")

MAX_PER_LOSS = 1024
Key = tuple[str, str]


class Notifier:
    def __init__(self, key: bytes | None = None, max_in_flight: int = 8, port: int = contract.DEFAULT_PROGRESS_PORT):
        self.key = key or secrets.token_bytes(32)
        self.port = port
        self.pool = concurrent.futures.ThreadPoolExecutor(max_in_flight, thread_name_prefix="ddpjob-notice")
        self.told: dict[Key, set[str]] = {}

    def token(self, namespace: str, name: str, uid: str) -> str:
        return notice.job_token(self.key, namespace, name, uid)

    def tell(self, job: Key, uid: str, lost: Iterable[str], pods: Iterable[PodState]) -> int:
        """Send the Pods named in `lost` that no survivor was told of yet; how many POSTs."""
        pods = list(pods)
        told = self.told.setdefault(job, set())
        new = [p for p in pods if p.name in set(lost) and (p.uid or p.name) not in told]
        if not new:
            return 0
        told.update(p.uid or p.name for p in new)
        lost_names = {p.name for p in new} | set(lost)
        indices = sorted({p.node_rank for p in new})
        survivors = [p for p in pods if p.name not in lost_names and p.phase == "Running" and not p.deleting and p.ip]
        token = self.token(job[0], job[1], uid)
        for ip in [p.ip for p in survivors[:MAX_PER_LOSS] if p.ip]:
            self.pool.submit(self._post, ip, token, indices)
        return len(survivors[:MAX_PER_LOSS])

    def _post(self, ip: str, token: str, indices: list[int]) -> None:
        try:
            status = notice.post(ip, self.port, token, indices, time.time())
            if status != 204:
                logger.debug("notice to %s: HTTP %s", ip, status)
        except OSError as e:
            logger.debug("notice to %s: %s", ip, e)

    def forget(self, job: Key) -> None:
        self.told.pop(job, None)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
