"""Leader election on a Lease (operator/leader_election.py) against a fake Lease API that
keeps one Lease as the API server does: 404 before it exists, 409 on a create of an
existing one and on a PUT whose resourceVersion is not the stored one. Time is a clock the
test moves, except where the loops themselves are run (with short periods)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from ddpjob.operator import leader_election, main as operator_main, settings
from ddpjob.operator.kube import Kube
from ddpjob.operator.leader_election import LeaderElector, Record
from ddpjob.operator.settings import LeaderElection

pytestmark = pytest.mark.timeout(60)

CONFIG = LeaderElection(
    "ddpjob-system", "ddpjob-operator", lease_seconds=10, renew_deadline_seconds=7, retry_period_seconds=2
)
LEASE_URL = "/apis/coordination.k8s.io/v1/namespaces/ddpjob-system/leases/ddpjob-operator"


def status(code: int, reason: str) -> tuple[int, bytes, Mapping[str, str]]:
    return code, json.dumps({"kind": "Status", "code": code, "reason": reason, "message": reason}).encode(), {}


class LeaseAPI:
    """One Lease, stored as the API server stores it; `writes` records (client, method)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writes: list[tuple[str, str]] = []
        self.requests: list[tuple[str, str]] = []
        self.fail: dict[str, list[int]] = {}  # client -> statuses to answer its next requests with
        self.hang: set[str] = set()  # clients whose requests get no answer

    @property
    def held(self) -> dict[str, Any]:
        """The stored Lease, where the test expects one."""
        assert self.lease is not None, "no Lease is stored"
        return self.lease

    def client(self, who: str) -> Kube:
        api = self

        class Transport:
            async def request(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
                return await api.request(who, method, path, body)

            async def aclose(self) -> None:
                pass

        return Kube(Transport(), attempts=1)

    def put(self, spec: dict[str, Any]) -> None:
        """Someone else's write (an admin, another replica)."""
        self.version += 1
        self.lease = {"metadata": {"name": "ddpjob-operator", "resourceVersion": str(self.version)}, "spec": spec}

    async def request(self, who: str, method: str, path: str, body: Any) -> tuple[int, bytes, Mapping[str, str]]:
        self.requests.append((who, method))
        if who in self.hang:
            await asyncio.Event().wait()
        if self.fail.get(who):
            code = self.fail[who].pop(0)
            return status(code, {401: "Unauthorized", 503: "ServiceUnavailable"}.get(code, "Error"))
        if method == "GET":
            assert path == LEASE_URL
            return (200, json.dumps(self.lease).encode(), {}) if self.lease else status(404, "NotFound")
        if method == "POST":
            assert path == LEASE_URL.rsplit("/", 1)[0]
            if self.lease is not None:
                return status(409, "AlreadyExists")
        else:
            assert method == "PUT" and path == LEASE_URL
            if self.lease is None:
                return status(404, "NotFound")
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return status(409, "Conflict")
        self.writes.append((who, method))
        self.put(body["spec"])
        return 200, json.dumps(self.lease).encode(), {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: LeaseAPI, who: str, clock: Clock, config: LeaderElection = CONFIG, **kw: Any) -> LeaderElector:
    return LeaderElector(api.client(who), config, who, clock=clock, **kw)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_first_candidate_creates_the_lease_and_leads_the_other_stands_by_writing_nothing() -> None:
    api, clock = LeaseAPI(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)

    async def go() -> tuple[bool, bool]:
        return await a.try_acquire_or_renew(), await b.try_acquire_or_renew()

    assert run(go()) == (True, False)
    spec = api.held["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 10 and spec["leaseTransitions"] == 0
    assert spec["acquireTime"] == spec["renewTime"] and spec["renewTime"].endswith("Z")
    assert api.writes == [("a", "POST")] and a.leading and not b.leading and b.leader == "a"


def test_a_standby_takes_over_only_once_the_record_stood_still_for_the_lease_by_its_own_clock() -> None:
    api, clock = LeaseAPI(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)

    async def go() -> None:
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()  # b sees the record at t=0
        clock.now += 8
        assert await a.try_acquire_or_renew()  # a renews at t=8: a new record
        clock.now += 4
        assert not await b.try_acquire_or_renew()  # t=12: past a lease since b first saw it, but it changed
        # a dies. The record last changed, as b saw it, at t=12: b waits a lease from then.
        clock.now += 9.9
        assert not await b.try_acquire_or_renew()
        clock.now += 0.2
        assert await b.try_acquire_or_renew()

    run(go())
    spec = api.held["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1 and b.leading
    assert [w for w in api.writes if w[0] == "b"] == [("b", "PUT")]


def test_the_leader_renews_keeping_its_acquire_time_with_the_version_it_wrote() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)

    async def go() -> None:
        assert await a.try_acquire_or_renew()
        first = dict(api.held["spec"])
        clock.now += 5
        assert await a.try_acquire_or_renew()
        assert api.held["spec"]["acquireTime"] == first["acquireTime"]
        clock.now += 5  # past the deadline of the first renewal, within the second's
        assert a.holds()
        clock.now += 2
        assert not a.holds()
        assert api.held["spec"]["leaseTransitions"] == 0

    run(go())
    # The fast path: a renewal is one PUT, no GET.
    assert api.requests == [("a", "GET"), ("a", "POST"), ("a", "PUT")]


def test_of_two_candidates_racing_for_an_expired_lease_one_wins() -> None:
    api, clock = LeaseAPI(), Clock()
    api.put({"holderIdentity": "dead", "leaseDurationSeconds": 10, "leaseTransitions": 3})
    b, c = elector(api, "b", clock), elector(api, "c", clock)

    async def go() -> list[bool]:
        await b.try_acquire_or_renew(), await c.try_acquire_or_renew()  # both observe "dead" at t=0
        clock.now += 11
        # Both read the same version before either writes: the second PUT conflicts.
        original = api.request
        reads = 0
        both_read = asyncio.Event()

        async def slow_reads(who: str, method: str, path: str, body: Any) -> Any:
            nonlocal reads
            answer = await original(who, method, path, body)
            if method == "GET":
                reads += 1
                if reads == 2:
                    both_read.set()
                await both_read.wait()
            return answer

        api.request = slow_reads  # type: ignore[method-assign]
        return list(await asyncio.gather(b._try(5), c._try(5)))

    assert sorted(run(go())) == [False, True]
    assert api.held["spec"]["leaseTransitions"] == 4
    assert len([w for w in api.writes if w[1] == "PUT"]) == 1


def test_a_leader_that_reads_another_holder_has_lost_and_never_takes_it_back() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)

    async def go() -> tuple[bool, bool]:
        assert await a.try_acquire_or_renew()
        api.put({"holderIdentity": "b", "leaseDurationSeconds": 10, "leaseTransitions": 1})
        first = await a.try_acquire_or_renew(renew_only=True)
        clock.now += 30  # b's record long expired by a's clock: a still must not take it
        return first, await a.try_acquire_or_renew(renew_only=True)

    assert run(go()) == (False, False)
    assert api.held["spec"]["holderIdentity"] == "b" and a.leader == "b"


def test_keep_leading_returns_when_another_replica_holds_the_lease() -> None:
    api = LeaseAPI()
    fast = LeaderElection("ddpjob-system", "ddpjob-operator", 1.0, 0.6, 0.05)
    a = LeaderElector(api.client("a"), fast, "a")

    async def go() -> str:
        assert await a.try_acquire_or_renew()
        api.put({"holderIdentity": "b", "leaseDurationSeconds": 1, "leaseTransitions": 1})
        return await asyncio.wait_for(a.keep_leading(), 30)

    assert run(go()) == "b holds it now"


@pytest.mark.parametrize("fault", ["503", "no answer"])
def test_keep_leading_returns_once_the_renew_deadline_passed_without_a_renewal(fault: str) -> None:
    api = LeaseAPI()
    fast = LeaderElection("ddpjob-system", "ddpjob-operator", 1.0, 0.6, 0.05)
    a = LeaderElector(api.client("a"), fast, "a")

    async def go() -> tuple[str, bool, bool]:
        assert await a.try_acquire_or_renew()
        held = a.holds()
        if fault == "503":
            api.fail["a"] = [503] * 10_000
        else:
            api.hang.add("a")
        reason = await asyncio.wait_for(a.keep_leading(), 30)
        return reason, held, a.holds()

    reason, held_before, holds_after = run(go())
    assert reason == "not renewed within the renew deadline (0.6s)"
    assert held_before and not holds_after
    assert api.held["spec"]["holderIdentity"] == "a"  # nothing was written: the Lease expires by itself


def test_release_clears_the_holder_and_a_standby_leads_at_its_next_try_without_waiting() -> None:
    api, clock = LeaseAPI(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)

    async def go() -> bool:
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        assert await a.release()
        return await b.try_acquire_or_renew()  # the clock has not moved

    assert run(go()) is True
    spec = api.held["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1


def test_release_after_a_renewal_whose_answer_was_lost_reads_the_lease_again() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)

    async def go() -> bool:
        assert await a.try_acquire_or_renew()
        spec = dict(api.held["spec"], renewTime="later")
        api.put(spec)  # a's own renewal, as the server stored it; a never saw the answer
        return await a.release()

    assert run(go()) is True
    assert api.held["spec"]["holderIdentity"] == ""


def test_release_leaves_alone_a_lease_another_replica_holds() -> None:
    api, clock = LeaseAPI(), Clock()
    a = elector(api, "a", clock)

    async def go() -> bool:
        assert await a.try_acquire_or_renew()
        api.put({"holderIdentity": "b", "leaseDurationSeconds": 10})
        return await a.release()

    assert run(go()) is True
    assert api.held["spec"]["holderIdentity"] == "b"


def test_a_hostile_record_is_read_bounded() -> None:
    record = Record.of(
        {
            "spec": {
                "holderIdentity": "x" * 100_000,
                "leaseDurationSeconds": "10",
                "leaseTransitions": True,
                "renewTime": 5,
            }
        }
    )
    assert len(record.holder) == leader_election.MAX_IDENTITY and record.lease_seconds == 0
    assert record.transitions == 0 and record.renew_time is None
    assert Record.of({"spec": None}) == Record() == Record.of({})
    # A huge leaseDurationSeconds keeps a standby waiting at most MAX_LEASE_SECONDS.
    api, clock = LeaseAPI(), Clock()
    api.put({"holderIdentity": "squatter", "leaseDurationSeconds": 10**9})
    b = elector(api, "b", clock)
    assert run(b.try_acquire_or_renew()) is False
    clock.now += leader_election.MAX_LEASE_SECONDS
    assert run(b.try_acquire_or_renew()) is True


def test_a_401_reads_the_credentials_again() -> None:
    api, clock = LeaseAPI(), Clock()
    logins: list[int] = []

    async def login() -> str:
        logins.append(1)
        return "fresh"

    a = elector(api, "a", clock, login=login)
    connected: list[Any] = []

    def record(info: Any) -> None:
        connected.append(info)

    a.kube.connect = record  # type: ignore[method-assign]
    api.fail["a"] = [401]
    assert run(a._try(5)) is False
    assert logins == [1] and connected == ["fresh"]
    assert run(a._try(5)) is True


def test_the_identity_names_the_pod_and_is_unique_per_process_outside_a_pod() -> None:
    first = leader_election.identity({"POD_ID": "ddpjob-operator-7d9f-abcde"})
    second = leader_election.identity({"POD_ID": "ddpjob-operator-7d9f-abcde"})
    assert first.split("_")[0] == "ddpjob-operator-7d9f-abcde" and first != second
    assert leader_election.identity({"POD_ID": "Bad Name\n" + "x" * 500}).split("_")[0] == ("bad-name-" + "x" * 54)


def test_the_identity_is_stable_for_a_pod_and_new_for_a_new_pod() -> None:
    uid = "0b5e3c2a-7f1d-4c7e-9a51-3d2f8e6b1c40"
    first = leader_election.identity({"POD_ID": "ddpjob-operator-7d9f-abcde", "POD_UID": uid})
    assert first == f"ddpjob-operator-7d9f-abcde_{uid}"
    assert leader_election.identity({"POD_ID": "ddpjob-operator-7d9f-abcde", "POD_UID": uid}) == first
    other = leader_election.identity({"POD_ID": "ddpjob-operator-7d9f-abcde", "POD_UID": uid.replace("0b", "1c")})
    assert other != first
    hostile = leader_election.identity({"POD_ID": "p", "POD_UID": "Ü_x\n" + "f" * 500})
    assert hostile == "p_x" + "f" * 63


def test_a_leader_started_again_in_its_pod_takes_its_lease_back_at_once() -> None:
    """A killed process whose container restarts has the identity it had: it renews the
    record it holds at its first try, keeping acquireTime and transitions; a standby that
    saw the record still waits out the lease, and a new Pod (a new uid) waits as well."""
    api, clock = LeaseAPI(), Clock()
    me = "ddpjob-operator-7d9f-abcde_0b5e3c2a"

    async def go() -> None:
        assert await elector(api, me, clock).try_acquire_or_renew()
        acquired = dict(api.held["spec"])
        standby = elector(api, "ddpjob-operator-7d9f-fghij_1c6f", clock)
        assert not await standby.try_acquire_or_renew()
        clock.now += 1  # the process is killed; its container starts again a second later
        again = elector(api, me, clock)
        assert await again.try_acquire_or_renew() and again.leading
        spec = api.held["spec"]
        assert spec["acquireTime"] == acquired["acquireTime"] and spec["leaseTransitions"] == 0
        assert not await standby.try_acquire_or_renew()
        assert not await elector(api, "ddpjob-operator-7d9f-abcde_2d7a", clock).try_acquire_or_renew()

    run(go())


def test_the_guard_runs_before_each_request_is_sent() -> None:
    api = LeaseAPI()
    kube = api.client("a")

    def lost() -> None:
        raise SystemExit("lost")

    kube.guard = lost
    with pytest.raises(SystemExit):
        run(kube.get(LEASE_URL))
    assert api.requests == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_standby_answers_the_liveness_endpoint_with_who_leads_and_fails_after_a_long_outage() -> None:
    api, clock = LeaseAPI(), Clock()
    api.put({"holderIdentity": "a", "leaseDurationSeconds": 10})
    b = elector(api, "b", clock)
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz"

    async def go() -> list[tuple[int, Any]]:
        await b.try_acquire_or_renew()
        answers = []
        async with operator_main.standby_probe(url, b, outage_limit=60), aiohttp.ClientSession() as session:
            for outage in (None, 30.0, 61.0):
                b.kube.failing_since = None if outage is None else time.monotonic() - outage
                async with session.get(url) as response:
                    answers.append((response.status, await response.json()))
        async with aiohttp.ClientSession() as session:  # closed with the context: the port is kopf's again
            with pytest.raises(aiohttp.ClientConnectionError):
                await session.get(url)
        return answers

    answers = run(go())
    standby = {"standby": {"lease": "Lease ddpjob-system/ddpjob-operator", "leader": "a"}}
    assert answers == [(200, standby), (200, standby), (500, standby)]


def test_run_operator_refuses_kopf_peering_in_one_line() -> None:
    with pytest.raises(SystemExit) as info:
        operator_main.run_operator("ns", False, None, None, "my-peering")
    assert "kopf peering is replaced by leader election" in str(info.value) and "\n" not in str(info.value)


# ---- its settings (operator/settings.py) -------------------------------------------------


def test_the_election_is_off_without_a_lease_and_read_whole_with_one() -> None:
    assert settings.from_env({}).leader_election is None
    assert settings.from_env(
        {settings.LEASE_ENV: "ddpjob-operator", settings.LEASE_NAMESPACE_ENV: "ops"}
    ).leader_election == LeaderElection("ops", "ddpjob-operator", 10, 7, 2)
    config = settings.from_env(
        {
            settings.LEASE_ENV: "l",
            settings.LEASE_NAMESPACE_ENV: "ops",
            settings.LEASE_SECONDS_ENV: "15",
            settings.RENEW_DEADLINE_ENV: "10",
            settings.RETRY_PERIOD_ENV: "2.5",
        }
    ).leader_election
    assert config == LeaderElection("ops", "l", 15, 10, 2.5)


@pytest.mark.parametrize(
    "env, name, says",
    [
        ({settings.LEASE_ENV: "Bad_Name"}, settings.LEASE_ENV, "must be a Lease name"),
        ({settings.LEASE_NAMESPACE_ENV: None}, settings.LEASE_NAMESPACE_ENV, "must name the Lease's namespace"),
        ({settings.LEASE_NAMESPACE_ENV: "a.b"}, settings.LEASE_NAMESPACE_ENV, "must name the Lease's namespace"),
        ({settings.LEASE_SECONDS_ENV: "1"}, settings.LEASE_SECONDS_ENV, "must be within [2, 300]"),
        ({settings.RENEW_DEADLINE_ENV: "10"}, settings.RENEW_DEADLINE_ENV, "must be below"),
        ({settings.RETRY_PERIOD_ENV: "6"}, settings.RETRY_PERIOD_ENV, "1.2 x it must be below"),
        ({settings.RETRY_PERIOD_ENV: "soon"}, settings.RETRY_PERIOD_ENV, "is not a number"),
    ],
)
def test_a_bad_election_setting_is_one_line_naming_it(env: dict[str, str | None], name: str, says: str) -> None:
    given = {settings.LEASE_ENV: "ddpjob-operator", settings.LEASE_NAMESPACE_ENV: "ops", **env}  # None: unset
    with pytest.raises(settings.SettingsError) as err:
        settings.from_env({k: v for k, v in given.items() if v is not None})
    message = str(err.value)
    assert message.startswith(name) and says in message and "\n" not in message
