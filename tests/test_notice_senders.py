"""Who sends the notices (ddpjob.notice): the operator's Notifier and `ddpjob run`'s
LocalNotices tell each running survivor, once per lost Pod, with a body the Pod's own
check (notice.verify) takes; the token reaches an elastic job's Pods only."""

import http.server
import threading
import time

import pytest

from ddpjob import notice, render
from ddpjob.api.spec import parse_job
from ddpjob.job.observe import PodState
from ddpjob.local.notices import LocalNotices
from ddpjob.operator.notices import Notifier


@pytest.fixture
def receiver():
    """A Pod's notice port on 127.0.0.1: what it was sent, as (signature, body)."""
    got: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the http.server API
            got.append((self.headers.get(notice.HEADER), self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], got
    server.shutdown()
    server.server_close()


def wait_for(got, n):
    deadline = time.monotonic() + 10
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} notices arrived in 10 s"
        time.sleep(0.02)
    time.sleep(0.2)  # and no more than n
    return got


def pod(rank, phase="Running", ip="127.0.0.1", **kw):
    return PodState(name=f"j-{rank}", node_rank=rank, restart_count=0, phase=phase, ip=ip, uid=f"u{rank}", **kw)


def test_the_operator_tells_each_running_survivor_once(receiver):
    port, got = receiver
    notifier = Notifier(key=b"k" * 32, port=port)
    try:
        pods = [pod(0), pod(1, "Failed"), pod(2, deleting=True), pod(3, "Pending", ip=None), pod(4)]
        assert notifier.tell(("ns", "j"), "uid", ["j-1", "j-2"], pods) == 2  # j-0 and j-4 only
        assert notifier.tell(("ns", "j"), "uid", ["j-1", "j-2"], pods) == 0  # told already
        token = notifier.token("ns", "j", "uid")
        # Each survivor keeps its own replay guard; the two here share one receiver, and
        # their notices may be the same bytes (one loss, sent within one clock tick).
        for signature, body in wait_for(got, 2):
            assert notice.verify(token, body, signature, time.time(), notice.ReplayGuard()) == (1, 2)
        # A Pod re-created under the same name (a new uid) is news again.
        assert (
            notifier.tell(
                ("ns", "j"),
                "uid",
                ["j-1"],
                [pod(0), PodState(name="j-1", node_rank=1, restart_count=0, phase="Failed", uid="u1-again")],
            )
            == 1
        )
        notifier.forget(("ns", "j"))
        assert notifier.tell(("ns", "j"), "uid", ["j-2"], pods) == 2
    finally:
        notifier.close()


def test_ddpjob_run_tells_the_survivors_once(receiver):
    port, got = receiver
    local = LocalNotices(port=port)
    threads = local.tell({101: 2}, ["127.0.0.1", "127.0.0.1"])
    for t in threads:
        t.join(5)
    assert local.tell({101: 2}, ["127.0.0.1"]) == []  # once per lost process tree
    guard = notice.ReplayGuard()
    taken = [notice.verify(local.token, b, s, time.time(), guard) for s, b in wait_for(got, 2)[:1]]
    assert taken == [(2,)]
    assert LocalNotices().token != local.token  # one per run
    local.tell({102: 0}, ["127.0.0.2"])  # nobody there: no error, the survivor finds out itself


def test_the_token_reaches_an_elastic_jobs_trainer_only():
    def job(elastic):
        spec = {"image": "img", "nodes": 2, **({"elastic": {"minNodes": 1, "maxNodes": 2}} if elastic else {})}
        return parse_job(
            {
                "apiVersion": "ddpjob.io/v1alpha1",
                "kind": "DDPJob",
                "metadata": {"name": "j", "namespace": "ns"},
                "spec": spec,
            }
        )

    def env(p):
        return {e["name"]: e.get("value") for c in p["spec"]["containers"] for e in c.get("env", [])}

    el = job(True)
    assert "DDPJOB_NOTICE_TOKEN" not in env(render.render_pod(el, 0))  # `ddpjob render` shows none
    assert env(render.with_notice_token(render.render_pod(el, 0), el, "t0k"))["DDPJOB_NOTICE_TOKEN"] == "t0k"
    rigid = job(False)
    assert "DDPJOB_NOTICE_TOKEN" not in env(render.with_notice_token(render.render_pod(rigid, 0), rigid, "t0k"))


def test_the_controller_tells_the_survivors_before_it_deletes_and_gives_new_pods_the_token():
    from tests.operator.test_controller import job_body, make, once, pod

    class Recording(Notifier):
        def tell(self, job, uid, lost, pods):
            kube.calls.append(("tell", tuple(lost)))
            return super().tell(job, uid, lost, pods)

    body = job_body(nodes=3, elastic={"minNodes": 2, "maxNodes": 3}, restartPolicy="OnFailure")
    body["status"] = {"phase": "Running", "restarts": 0, "startTime": "2026-01-01T00:00:00Z", "nodes": "3/3"}
    c, kube, _, index = make(body, [pod(0), pod(1, "Failed", exit_code=137), pod(2)])
    c.notifier.close()
    c.notifier = Recording(key=b"k" * 32, port=1)  # nothing listens on port 1: no error either
    c.children.notice_token = c.notifier.token
    try:
        once(c)
        kinds = [k for k, _ in kube.calls]
        assert ("tell", ("j-1",)) in kube.calls and kinds.index("tell") < kinds.index("delete"), kube.calls
        index["pods"] = [pod(0), pod(2)]  # j-1 gone: created again, with the job's token
        created = []
        real_create = kube.create

        async def create(obj, read_existing=True):
            created.append(obj)
            return await real_create(obj, read_existing)

        kube.create = create
        once(c)
        env = {
            e["name"]: e.get("value")
            for p in created
            if p["kind"] == "Pod"
            for ct in p["spec"]["containers"]
            for e in ct.get("env", [])
        }
        assert env.get("DDPJOB_NOTICE_TOKEN") == c.notifier.token("ns", "j", "u1")
    finally:
        c.notifier.close()
