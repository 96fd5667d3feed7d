"""Leader election among the operator's replicas, on a `coordination.k8s.io/v1` Lease.

As client-go's `tools/leaderelection` does it (kube-controller-manager, kube-scheduler and
every controller-runtime manager elect so), on the operator's own API client (`kube.Kube`):
- the Lease's spec is the record: holderIdentity, leaseDurationSeconds, acquireTime,
  renewTime, leaseTransitions. Every write is a PUT carrying the resourceVersion it was
  computed from, so of two replicas that race, the API server lets one win (409 for the
  other); a missing Lease is created, and a 409 there too means another was first;
- a candidate takes the Lease when it has no holder, or when the record has not changed for
  the record's leaseDurationSeconds *by the candidate's own clock* since it last saw it
  change (the observed time): no clock is compared across machines;
- the leader renews every retry period. One that has not renewed within the renew deadline
  of its last successful renewal (measured from when that request was sent), or that reads
  another holder, has lost: `keep_leading` returns, and its caller stops acting at once.
  The deadline is below the lease, so it has stopped before a standby may take over;
- a leader that stops gracefully clears the holder (client-go's ReleaseOnCancel), so a
  standby takes over at its next try instead of waiting out the lease;
- a replica's identity is stable for its Pod (`identity`): a leader whose process died and
  was started again in the same Pod finds itself the holder and renews at once.

Bounds, with the defaults (settings.LeaderElection: lease 10 s, deadline 7 s, retry 2 s):
a standby sees a renewal at most one try (retry x (1 + JITTER)) after it was written, and
takes over at its first try past a lease after that, so a leader lost outright (SIGKILL,
its node gone) is replaced within lease + 2 x retry x (1 + JITTER): 14.8 s; a released
Lease within one try: 2.4 s; a killed process whose container restarts, at its first
try. Then kopf starts (main.py). The API load: one PUT per leader and one GET per standby
every retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import math
import os
import random
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ddpjob import text
from ddpjob.operator.api_paths import lease_path
from ddpjob.operator.kube import APIError, Conflict, Kube, NotFound
from ddpjob.operator.settings import LeaderElection

logger = logging.getLogger("ddpjob.operator.leader_election")

# A standby's tries are spread by up to this fraction of the retry period (client-go's
# JitterFactor is 1.2, for many candidates; a Deployment's few replicas need less, and
# every bit of it adds to the time a dead leader goes unreplaced).
JITTER = 0.2
# A record's leaseDurationSeconds is bounded: a hostile or mistaken holder cannot make the
# standbys wait for ever.
MAX_LEASE_SECONDS = 300
MAX_IDENTITY = 253
MAX_UID = 64  # a Pod uid is a 36-character uuid
_MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # metav1.MicroTime


def identity(environ: Mapping[str, str] | None = None) -> str:
    """`<pod name>_<id>`, as controller-runtime makes it (hostname_uuid). The Pod's name
    (POD_ID, the chart's downward API; else the host's name, which is the Pod's) says who
    leads. The id is the Pod's uid (POD_UID, also the chart's) where there is one: a
    container the kubelet starts again in the same Pod is then the holder it was, and takes
    its Lease back at its first try instead of waiting out the lease (client-go renews a
    record whose holder is its own identity, as `try_acquire_or_renew` does). That is safe
    because a Pod runs one container of a name at a time: the process that held the Lease
    has ended. A new Pod has a new uid. Outside a Pod, a fresh uuid per process."""
    environ = os.environ if environ is None else environ
    pod = re.sub(r"[^a-z0-9.-]", "-", (environ.get("POD_ID") or socket.gethostname()).lower())[:63]
    uid = re.sub(r"[^a-z0-9-]", "", (environ.get("POD_UID") or "").lower())[:MAX_UID]
    return f"{pod or 'operator'}_{uid or uuid.uuid4()}"


@dataclasses.dataclass(frozen=True)
class Record:
    """The Lease's spec, as the election reads and writes it."""

    holder: str = ""
    lease_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> Record:
        """Read from whatever the Lease holds: a field of the wrong type counts as unset,
        and the holder is cut to the longest name an identity has (it goes into logs)."""
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}

        def number(key: str) -> int:
            value = spec.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def string(key: str) -> str | None:
            value = spec.get(key)
            return value[:MAX_IDENTITY] if isinstance(value, str) else None

        return cls(
            string("holderIdentity") or "",
            number("leaseDurationSeconds"),
            string("acquireTime"),
            string("renewTime"),
            number("leaseTransitions"),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime(_MICROTIME)


class LeaderElector:
    """One replica's part in the election. `acquire` waits as a standby until this one
    leads; `keep_leading` renews until it cannot; `release` gives the Lease up.

    kube: a client of its own (not the controller's: a renewal must not queue behind 64
    job writes), with one attempt per call (the election retries by itself).
    login: fresh credentials when the server answers 401 (a rotated token)."""

    def __init__(
        self,
        kube: Kube,
        config: LeaderElection,
        me: str,
        *,
        login: Callable[[], Awaitable[Any]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], str] = _now,
    ):
        self.kube, self.config, self.me, self.login = kube, config, me, login
        self.clock, self.wall = clock, wall
        self.url = lease_path(config.namespace, config.name)
        self.observed = Record()
        self._observed_at = clock()
        self._version: str | None = None  # resourceVersion of the Lease last read or written
        self._renewed_at: float | None = None  # when the last successful renewal was sent
        self._reported: str | None = None  # the holder last logged

    @property
    def leading(self) -> bool:
        return self.observed.holder == self.me

    @property
    def leader(self) -> str:
        return self.observed.holder

    @property
    def described(self) -> str:
        return f"Lease {self.config.namespace}/{self.config.name}"

    def _observe(self, record: Record, version: str | None) -> None:
        if record != self.observed:
            self.observed, self._observed_at = record, self.clock()
        self._version = version

    def _expired(self) -> bool:
        seconds = min(max(self.observed.lease_seconds, 1), MAX_LEASE_SECONDS)
        return self.clock() >= self._observed_at + seconds

    def _body(self, record: Record) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if self._version:
            metadata["resourceVersion"] = self._version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": record.spec()}

    async def _write(self, record: Record, *, create: bool = False) -> None:
        if create:
            self._version = None
            answer = await self.kube.post(lease_path(self.config.namespace), self._body(record))
        else:
            answer = await self.kube.replace(self.url, self._body(record))
        self.observed, self._observed_at = record, self.clock()
        self._version = (answer.get("metadata") or {}).get("resourceVersion")

    def holds(self) -> bool:
        """Whether this replica may still act: its last renewal is within the deadline."""
        return self._renewed_at is not None and self.clock() < self._renewed_at + self.config.renew_deadline_seconds

    async def try_acquire_or_renew(self, renew_only: bool = False) -> bool:
        """One try: True when this replica holds the Lease, renewed, after it. With
        `renew_only` (a leader's renewal) it never takes a Lease another replica holds or
        gave up: that one may have acted since."""
        sent = self.clock()
        now = self.wall()
        lease_seconds = math.ceil(self.config.lease_seconds)
        if self.leading and self._version and not self._expired():
            # The fast path: the leader's own last write is most likely still the Lease.
            mine = dataclasses.replace(self.observed, lease_seconds=lease_seconds, renew_time=now)
            with contextlib.suppress(APIError):
                await self._write(mine)
                self._renewed_at = sent
                return True
        try:
            lease = await self.kube.get(self.url)
        except NotFound:
            await self._write(Record(self.me, lease_seconds, now, now, 0), create=True)
            self._renewed_at = sent
            return True
        self._observe(Record.of(lease), (lease.get("metadata") or {}).get("resourceVersion"))
        if not self.leading and (renew_only or (self.observed.holder and not self._expired())):
            return False
        if self.leading:
            mine = dataclasses.replace(self.observed, lease_seconds=lease_seconds, renew_time=now)
        else:
            mine = Record(self.me, lease_seconds, now, now, self.observed.transitions + 1)
        await self._write(mine)
        self._renewed_at = sent
        return True

    async def _try(self, timeout: float, renew_only: bool = False) -> bool:
        """`try_acquire_or_renew` within `timeout`; a failure is a False (and logged)."""
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew(renew_only)
        except (APIError, TimeoutError) as exc:
            if isinstance(exc, APIError) and exc.status == 401 and self.login is not None:
                info = await self.login()  # a rotated token: read it again
                if info is not None:
                    self.kube.connect(info)
            logger.debug("%s: try failed: %s", self.described, exc)
            return False

    def _report(self) -> None:
        holder = self.observed.holder
        if holder != self._reported and not self.leading:
            self._reported = holder
            if holder:
                logger.info("standby: %s leads (%s)", text.clean(holder, MAX_IDENTITY), self.described)
            else:
                logger.info("standby: %s has no leader", self.described)

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Try every retry period (jittered) until this replica leads (True) or `stop` is
        set (False). Logs once per leader it sees that it stands by."""
        logger.info("%s: %s is a candidate", self.described, self.me)
        while not stop.is_set():
            if await self._try(self.config.renew_deadline_seconds):
                logger.info("%s acquired: %s leads (transition %d)", self.described, self.me, self.observed.transitions)
                return True
            self._report()
            period = self.config.retry_period_seconds * (1 + JITTER * random.random())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
        return False

    async def keep_leading(self) -> str:
        """Renew every retry period until leadership is lost; return why. The caller must
        stop acting at once: past the renew deadline a standby may lead soon."""
        config = self.config
        while True:
            await asyncio.sleep(config.retry_period_seconds)
            deadline = (self._renewed_at or self.clock()) + config.renew_deadline_seconds
            while not await self._try(max(deadline - self.clock(), 0.001), renew_only=True):
                if self.observed.holder != self.me:
                    return f"{text.clean(self.observed.holder, MAX_IDENTITY) or 'nobody'} holds it now"
                if self.clock() >= deadline:
                    return f"not renewed within the renew deadline ({config.renew_deadline_seconds:g}s)"
                await asyncio.sleep(min(config.retry_period_seconds, max(deadline - self.clock(), 0)))

    async def release(self) -> bool:
        """Clear the holder, so a standby takes over at its next try. Only while this
        replica still holds the Lease, and within the renew deadline; False if not done."""
        if not self.leading:
            return True
        now = self.wall()
        given_up = Record("", 1, now, now, self.observed.transitions)
        try:
            async with asyncio.timeout(self.config.renew_deadline_seconds):
                try:
                    await self._write(given_up)
                except Conflict:  # written since (a renewal whose answer was lost): read it again
                    lease = await self.kube.get(self.url)
                    self._observe(Record.of(lease), (lease.get("metadata") or {}).get("resourceVersion"))
                    if not self.leading:
                        return True
                    await self._write(given_up)
        except (APIError, TimeoutError) as exc:
            logger.warning("%s: not released (%s); a standby takes over when it expires", self.described, exc)
            return False
        logger.info("%s released by %s", self.described, self.me)
        return True
