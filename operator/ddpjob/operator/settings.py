"""The operator's settings: every environment variable it reads, parsed and checked once, at start.

The chart sets them (templates/deployment.yaml); `kopf run -m ddpjob.operator.handlers`
has no options of ours, so the environment is the one channel. A bad value stops the
start with one line naming the variable; nothing reads the environment later.

    DDPJOB_TEMPLATE_ALLOW                    what job templates may ask for (template_policy)
    DDPJOB_METRICS_PORT                      serve Prometheus /metrics on this port (unset: off)
    DDPJOB_PROGRESS_INTERVAL_SECONDS         seconds between two reads of one job's /progress
                                             (default 30, 1..3600; 0 turns polling off)
    DDPJOB_PROGRESS_MAX_PER_SECOND           reads per second, all jobs (default 50, 0.1..1000; 0: off)
    DDPJOB_PROGRESS_MAX_WRITES_PER_SECOND    progress-only status writes per second (default 5, 0.1..1000)
    DDPJOB_LIVENESS_OUTAGE_SECONDS           liveness fails after the API gave no answer this long
                                             (default 300, 1..86400)
    DDPJOB_GANG_INTEGRATIONS                 enabled gang integrations (unset: all; empty: none)
    each integration's scheduler name, where it has one (its `SchedulerSetting`, api/gangs/):
    DDPJOB_VOLCANO_SCHEDULER, DDPJOB_COSCHEDULING_SCHEDULER
    DDPJOB_NOTICE_KEY                        the key of the notices to elastic jobs' Pods (notices.py;
                                             32..512 characters; unset: one drawn at start)
    DDPJOB_TENSORBOARD_IMAGE                 the image of jobs' TensorBoards (spec.tensorboard; it must
                                             carry `tensorboard`; unset: this release's CPU trainer image)
    DDPJOB_TENSORBOARD_IMAGE_PULL_POLICY     its pull policy (unset: the cluster's default)
    DDPJOB_TENSORBOARD_RESOURCES             its container's resources, as JSON {"requests": {...}, ...}
    DDPJOB_UNHEALTHY_NODE_CONDITIONS         node conditions that mark a node unhealthy: TYPE[=STATUS],...
    DDPJOB_UNHEALTHY_NODE_TAINTS             taints that do: KEY[=VALUE][:EFFECT],... (job/node_health.py)
    DDPJOB_LEADER_ELECTION_LEASE             the Lease the replicas elect their leader in (leader_election.py;
                                             unset: no election, this process acts alone)
    DDPJOB_LEADER_ELECTION_NAMESPACE         its namespace (required with it; the chart's downward API)
    DDPJOB_LEADER_ELECTION_LEASE_SECONDS     how long a standby waits on a silent leader (default 10, 2..300)
    DDPJOB_LEADER_ELECTION_RENEW_DEADLINE_SECONDS  a leader unable to renew for this long stops
                                             (default 7; below the lease)
    DDPJOB_LEADER_ELECTION_RETRY_PERIOD_SECONDS    between two tries (default 2; 1.2 x it below the deadline)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ddpjob.api import gangs, names, template_policy
from ddpjob.job import node_health
from ddpjob.job.node_health import NO_RULES, NodeRules
from ddpjob.operator.progress import DEFAULT_INTERVAL, DEFAULT_MAX_PER_SECOND, DEFAULT_MAX_WRITES_PER_SECOND
from ddpjob.render.gang import DEFAULT_OPTIONS, GangOptions
from ddpjob.render.tensorboard import DEFAULT_CONFIG as TENSORBOARD_DEFAULTS, TensorBoardConfig

TEMPLATE_ALLOW_ENV = template_policy.ENV
METRICS_PORT_ENV = "DDPJOB_METRICS_PORT"
PROGRESS_INTERVAL_ENV = "DDPJOB_PROGRESS_INTERVAL_SECONDS"
PROGRESS_RATE_ENV = "DDPJOB_PROGRESS_MAX_PER_SECOND"
PROGRESS_WRITES_ENV = "DDPJOB_PROGRESS_MAX_WRITES_PER_SECOND"
LIVENESS_OUTAGE_ENV = "DDPJOB_LIVENESS_OUTAGE_SECONDS"
GANG_INTEGRATIONS_ENV = "DDPJOB_GANG_INTEGRATIONS"
NOTICE_KEY_ENV = "DDPJOB_NOTICE_KEY"
TENSORBOARD_IMAGE_ENV = "DDPJOB_TENSORBOARD_IMAGE"
TENSORBOARD_PULL_ENV = "DDPJOB_TENSORBOARD_IMAGE_PULL_POLICY"
TENSORBOARD_RESOURCES_ENV = "DDPJOB_TENSORBOARD_RESOURCES"
LEASE_ENV = "DDPJOB_LEADER_ELECTION_LEASE"
LEASE_NAMESPACE_ENV = "DDPJOB_LEADER_ELECTION_NAMESPACE"
LEASE_SECONDS_ENV = "DDPJOB_LEADER_ELECTION_LEASE_SECONDS"
RENEW_DEADLINE_ENV = "DDPJOB_LEADER_ELECTION_RENEW_DEADLINE_SECONDS"
RETRY_PERIOD_ENV = "DDPJOB_LEADER_ELECTION_RETRY_PERIOD_SECONDS"
NODE_CONDITIONS_ENV = "DDPJOB_UNHEALTHY_NODE_CONDITIONS"
NODE_TAINTS_ENV = "DDPJOB_UNHEALTHY_NODE_TAINTS"

DEFAULT_LIVENESS_OUTAGE = 300.0
# Longer than any real value; keeps a hostile or mistyped one out of logs and errors.
_MAX_SHOWN = 80


class SettingsError(ValueError):
    """A setting with a bad value: one line naming the variable."""


@dataclass(frozen=True)
class LeaderElection:
    """Where and how the replicas elect the one that acts (leader_election.py says why
    these numbers: a leader killed outright is replaced within about lease + 2.4 x retry)."""

    namespace: str
    name: str
    lease_seconds: float = 10.0
    renew_deadline_seconds: float = 7.0
    retry_period_seconds: float = 2.0


@dataclass(frozen=True)
class Settings:
    template_allow: frozenset[str] = frozenset()
    metrics_port: int | None = None
    progress_interval: float = DEFAULT_INTERVAL  # 0: polling off
    progress_max_per_second: float = DEFAULT_MAX_PER_SECOND  # 0: polling off
    progress_max_writes_per_second: float = DEFAULT_MAX_WRITES_PER_SECOND
    liveness_outage_seconds: float = DEFAULT_LIVENESS_OUTAGE
    # Unset: every integration registered when the settings are made.
    gang_integrations: frozenset[str] = field(default_factory=lambda: frozenset(gangs.names()))
    gang_explicit: bool = False  # the chart named the integrations (a missing API is an error)
    gang_options: GangOptions = DEFAULT_OPTIONS
    notice_key: bytes | None = field(default=None, repr=False)  # a secret: never in a log line
    tensorboard: TensorBoardConfig = TENSORBOARD_DEFAULTS  # what runs jobs' TensorBoards
    leader_election: LeaderElection | None = None  # None: this process acts alone
    node_rules: NodeRules = NO_RULES  # what marks a node unhealthy (none: nothing does)

    @property
    def progress_polling(self) -> bool:
        return bool(self.progress_interval and self.progress_max_per_second)


DEFAULTS = Settings()


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _MAX_SHOWN else raw[:_MAX_SHOWN] + "...")


def _number(env: Mapping[str, str], name: str, default: float, lo: float, hi: float, off: bool) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={_shown(raw)} is not a number") from None
    if (value == 0 and off) or lo <= value <= hi:
        return value
    range_ = f"within [{lo:g}, {hi:g}]"
    raise SettingsError(f"{name}={_shown(raw)} must be {'0 (off) or ' if off else ''}{range_}")


def _port(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 5 and 1 <= int(raw) <= 65535):
        raise SettingsError(f"{name}={_shown(raw)} must be a port number (1-65535)")
    return int(raw)


def _scheduler(env: Mapping[str, str], name: str, default: str) -> str:
    raw = (env.get(name) or "").strip()
    if raw and not names.is_dns1123_subdomain(raw):
        raise SettingsError(f"{name}={_shown(raw)} must be a scheduler name (a DNS-1123 subdomain)")
    return raw or default


def _gangs(env: Mapping[str, str]) -> tuple[frozenset[str], bool]:
    known = gangs.names()
    raw = env.get(GANG_INTEGRATIONS_ENV)
    if raw is None:
        return frozenset(known), False
    enabled = frozenset(g.strip() for g in raw.split(",") if g.strip())
    unknown = sorted(enabled - set(known))
    if unknown:
        raise SettingsError(
            f"{GANG_INTEGRATIONS_ENV} names unknown gang integration(s) "
            f"{_shown(', '.join(unknown))}; known: {', '.join(known)}"
        )
    return enabled, True


def _gang_options(env: Mapping[str, str]) -> GangOptions:
    """The scheduler each integration's Pods name, where its setting names one (else its default)."""
    schedulers = {}
    for name in gangs.names():
        setting = (integration := gangs.get(name)) and integration.scheduler
        if setting and (chosen := _scheduler(env, setting.env, "")):
            schedulers[name] = chosen
    return GangOptions(schedulers=schedulers) if schedulers else DEFAULT_OPTIONS


def _tensorboard(env: Mapping[str, str]) -> TensorBoardConfig:
    image = (env.get(TENSORBOARD_IMAGE_ENV) or "").strip() or TENSORBOARD_DEFAULTS.image
    pull = (env.get(TENSORBOARD_PULL_ENV) or "").strip() or None
    if pull not in (None, "Always", "IfNotPresent", "Never"):
        raise SettingsError(f"{TENSORBOARD_PULL_ENV}={_shown(pull or '')} must be Always, IfNotPresent or Never")
    raw = (env.get(TENSORBOARD_RESOURCES_ENV) or "").strip()
    if not raw:
        return TensorBoardConfig(image, pull)
    try:
        resources = json.loads(raw)
    except ValueError:
        raise SettingsError(f"{TENSORBOARD_RESOURCES_ENV}={_shown(raw)} is not JSON") from None
    if not (
        isinstance(resources, dict)
        and set(resources) <= {"requests", "limits"}
        and all(isinstance(v, dict) and all(isinstance(q, (str, int)) for q in v.values()) for v in resources.values())
    ):
        raise SettingsError(
            f"{TENSORBOARD_RESOURCES_ENV}={_shown(raw)} must be an object of requests and limits, "
            'e.g. {"requests": {"cpu": "100m"}, "limits": {"memory": "1Gi"}}'
        )
    return TensorBoardConfig(image, pull, resources)


def _leader_election(env: Mapping[str, str]) -> LeaderElection | None:
    name = (env.get(LEASE_ENV) or "").strip()
    namespace = (env.get(LEASE_NAMESPACE_ENV) or "").strip()
    if not name:
        return None
    if not names.is_dns1123_subdomain(name):
        raise SettingsError(f"{LEASE_ENV}={_shown(name)} must be a Lease name (a DNS-1123 subdomain)")
    if not names.is_dns1123_label(namespace):
        raise SettingsError(f"{LEASE_NAMESPACE_ENV}={_shown(namespace)} must name the Lease's namespace")
    lease = _number(env, LEASE_SECONDS_ENV, LeaderElection.lease_seconds, 2, 300, off=False)
    deadline = _number(env, RENEW_DEADLINE_ENV, LeaderElection.renew_deadline_seconds, 1, 300, off=False)
    retry = _number(env, RETRY_PERIOD_ENV, LeaderElection.retry_period_seconds, 0.2, 60, off=False)
    # client-go's own checks (NewLeaderElector): the leader gives up before a standby may
    # take over, and has more than one jittered try before it gives up.
    if not deadline < lease:
        raise SettingsError(f"{RENEW_DEADLINE_ENV}={deadline:g} must be below {LEASE_SECONDS_ENV}={lease:g}")
    if not retry * 1.2 < deadline:
        raise SettingsError(f"{RETRY_PERIOD_ENV}={retry:g}: 1.2 x it must be below {RENEW_DEADLINE_ENV}={deadline:g}")
    return LeaderElection(namespace, name, lease, deadline, retry)


def _node_rules(env: Mapping[str, str]) -> NodeRules:
    try:
        conditions = node_health.parse_conditions(env.get(NODE_CONDITIONS_ENV) or "")
    except ValueError as e:
        raise SettingsError(f"{NODE_CONDITIONS_ENV}: {e}") from None
    try:
        taints = node_health.parse_taints(env.get(NODE_TAINTS_ENV) or "")
    except ValueError as e:
        raise SettingsError(f"{NODE_TAINTS_ENV}: {e}") from None
    return NodeRules(conditions, taints)


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """The settings from `env` (the process environment by default); SettingsError for a bad one."""
    env = os.environ if env is None else env
    try:
        allow = template_policy.parse_allowances(env.get(TEMPLATE_ALLOW_ENV))
    except ValueError as e:
        raise SettingsError(f"{TEMPLATE_ALLOW_ENV}: {e}") from None
    interval = _number(env, PROGRESS_INTERVAL_ENV, DEFAULT_INTERVAL, 1, 3600, off=True)
    rate = _number(env, PROGRESS_RATE_ENV, DEFAULT_MAX_PER_SECOND, 0.1, 1000, off=True)
    writes = _number(env, PROGRESS_WRITES_ENV, DEFAULT_MAX_WRITES_PER_SECOND, 0.1, 1000, off=True)
    if interval and rate and not writes:
        raise SettingsError(
            f"{PROGRESS_WRITES_ENV}=0: progress status writes cannot be turned off alone; "
            f"set {PROGRESS_INTERVAL_ENV}=0 to stop polling"
        )
    key = env.get(NOTICE_KEY_ENV, "")
    if key and not 32 <= len(key) <= 512:
        raise SettingsError(f"{NOTICE_KEY_ENV}: {len(key)} characters; use 32 to 512 (a Secret's random value)")
    enabled, explicit = _gangs(env)
    options = _gang_options(env)
    return Settings(
        template_allow=allow,
        metrics_port=_port(env, METRICS_PORT_ENV),
        progress_interval=interval,
        progress_max_per_second=rate,
        progress_max_writes_per_second=writes,
        liveness_outage_seconds=_number(env, LIVENESS_OUTAGE_ENV, DEFAULT_LIVENESS_OUTAGE, 1, 86400, off=False),
        gang_integrations=enabled,
        gang_explicit=explicit,
        gang_options=options,
        notice_key=key.encode() or None,
        tensorboard=_tensorboard(env),
        leader_election=_leader_election(env),
        node_rules=_node_rules(env),
    )
