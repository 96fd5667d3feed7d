"""The whole system on one machine: the API emulator, the real operator as its own
process (`ddpjob operator`, exactly what the operator image runs), and the process
kubelet. Used by the system tests, `make demo-cluster` and the latency benchmark.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import kubernetes
import yaml
from kmock._internal import rendering

from ddpjob.api import names
from ddpjob_devcluster.emulator import KubeEmulator
from ddpjob_devcluster.operator_runner import Abort, wait_for
from ddpjob_devcluster.kubelet import ProcessKubelet
from ddpjob_devcluster import logs as pod_logs
from ddpjob_devcluster.scheduler import NodeSpec, Scheduler, serve_native_pod_groups

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / 'manifests' / 'crd' / 'ddpjobs.ddpjob.io.yaml'
EXAMPLE = ROOT / 'manifests' / 'examples' / 'mnist-cpu.yaml'
JOBS = f'{names.GROUP}/{names.VERSION}/{names.PLURAL}'
BIN = pathlib.Path(sys.executable).parent  # the venv's console scripts: ddpjob, kubectl


class ClusterEmulator(KubeEmulator):
    """The emulator, with the two things kubectl reads differently from kopf and the
    Python client (to be removed once the emulator does them): subresources
    carry no singular or short names (else `kubectl get po` is ambiguous with
    pods/status), and a watch is served as `application/json` (kmock streams say
    application/octet-stream, which `kubectl get -w` refuses to decode)."""

    async def _serve_version(self, request: Any) -> Any:
        doc = await super()._serve_version(request)
        if isinstance(doc, dict):
            for resource in doc.get('resources') or []:
                if '/' in resource['name']:
                    resource.update(singularName='', shortNames=[])
        return doc

    def _serve_watch(self, request: Any) -> Any:
        return rendering.Response(payload=super()._serve_watch(request), headers={'Content-Type': 'application/json'})


def serve_empty_openapi(emulator: KubeEmulator) -> None:
    """`kubectl apply` validates against the server's OpenAPI document and refuses to
    apply when there is none. An empty v2 document (a zero-length protobuf message) says
    "no schemas": kubectl then leaves validation to the server, as it does for any type
    the document does not describe."""
    emulator['get /openapi/v2'] << b''


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    # Linux: the operator gets SIGTERM when the process that started it dies, so a
    # crashed test or a killed demo leaves no operator behind.
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def ddpjob_command() -> list[str]:
    script = BIN / 'ddpjob'
    if script.exists():
        return [str(script)]
    return [sys.executable, '-c', 'import sys; from ddpjob.cli import main; sys.exit(main())']


class OperatorProcess:
    """`ddpjob operator --standalone` against a kubeconfig; its output goes to a log file."""

    def __init__(self, kubeconfig: pathlib.Path, log_path: pathlib.Path, namespace: str | None = None):
        self.kubeconfig, self.log_path, self.namespace = kubeconfig, log_path, namespace
        self.popen: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> OperatorProcess:
        scope = ['--namespace', self.namespace] if self.namespace else ['--all-namespaces']
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), PYTHONUNBUFFERED='1')
        self.starts += 1
        log = open(self.log_path, 'a', encoding='utf-8')
        log.write(f'===== operator start #{self.starts} =====\n')
        log.flush()
        with log:
            self.popen = subprocess.Popen([*ddpjob_command(), 'operator', '--standalone', *scope], env=env,
                                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          preexec_fn=_die_with_parent)
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int | None:
        """Stop it (SIGTERM: kopf's graceful stop; SIGKILL: a crash); SIGKILL if it lingers."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode

    def log_tail(self, lines: int = 60) -> str:
        with contextlib.suppress(OSError):
            return '\n'.join(self.log_path.read_text(errors='replace').splitlines()[-lines:])
        return ''


class LocalCluster:
    """Emulator + CRD + operator process + process kubelet, in a work directory."""

    def __init__(self, workdir: str | pathlib.Path, *, namespace: str = 'default', operator_namespace: str | None = None,
                 stop_grace: float = 5.0, nodes: list[NodeSpec] | None = None):
        """nodes: start the development scheduler with these Nodes (and the native
        PodGroup API); the kubelet then runs only Pods bound to a node. None: no
        scheduler, every Pod runs at once (no capacity)."""
        self.workdir = pathlib.Path(workdir)
        self.nodes = nodes
        self.scheduler: Scheduler | None = None
        self.namespace = namespace
        self.operator_namespace = operator_namespace
        self.stop_grace = stop_grace
        self.emulator = ClusterEmulator()
        self.api: kubernetes.client.ApiClient | None = None
        self.kubelet: ProcessKubelet | None = None
        self.operator: OperatorProcess | None = None
        self.kubeconfig = self.workdir / 'kubeconfig'

    # ---- lifecycle ----

    def start(self, *, operator: bool = True) -> LocalCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.emulator.start()
            serve_empty_openapi(self.emulator)
            self.emulator.write_kubeconfig(self.kubeconfig, namespace=self.namespace)
            self.api = kubernetes.config.new_client_from_config(str(self.kubeconfig))
            self.apply_crd()
            if self.nodes is not None:
                serve_native_pod_groups(self.emulator.store)
                self.scheduler = Scheduler(self.emulator.store)
                self.scheduler.add_nodes(self.nodes)
                self.scheduler.start()
            self.kubelet = ProcessKubelet(self.emulator.url, self.workdir / 'kubelet', stop_grace=self.stop_grace,
                                          bound_only=self.scheduler is not None).start()
            pod_logs.attach(self.emulator, pod_logs.kubelet_source(self.kubelet))  # kubectl logs
            self.operator = OperatorProcess(self.kubeconfig, self.workdir / 'operator.log', self.operator_namespace)
            if operator:
                self.operator.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Operator first (so it does not react to the kubelet's teardown), then every
        training process, then the API server. Safe to call more than once."""
        if self.operator is not None:
            self.operator.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.api is not None:
            self.api.close()
            self.api = None
        self.emulator.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- API helpers ----

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)

    def apply_crd(self) -> None:
        body = yaml.safe_load(CRD_PATH.read_text())
        ext = kubernetes.client.ApiextensionsV1Api(self.api)
        try:
            ext.create_custom_resource_definition(body)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
        # The group is served once discovery lists it (kubectl and kopf both look there).
        wait_until(lambda: any(g.name == names.GROUP for g in
                               kubernetes.client.ApisApi(self.api).get_api_versions().groups),
                   10, 'the DDPJob CRD is not served')

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        ns = body['metadata'].get('namespace', self.namespace)
        return self.custom.create_namespaced_custom_object(names.GROUP, names.VERSION, ns, names.PLURAL, body)

    def job(self, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.emulator.get_object(JOBS, namespace or self.namespace, name)

    def status(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return (self.job(name, namespace) or {}).get('status') or {}

    def wait_phase(self, name: str, phase: str, timeout: float = 60, **fields: Any) -> dict[str, Any]:
        """Wait for `phase` (and fields); fail at once if the job finishes otherwise."""
        finished = {'Succeeded', 'Failed'} - {phase}

        def check() -> dict[str, Any] | None:
            st = self.status(name)
            if st.get('phase') in finished:
                raise Abort(f'{name} ended {st.get("phase")} while waiting for {phase}: {st}')
            return st if st.get('phase') == phase and all(st.get(k) == v for k, v in fields.items()) else None
        return wait_until(check, timeout, f'{name} did not reach {phase} {fields or ""}',
                          lambda: f'status {self.status(name)}')

    def pods(self, job: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        pods = self.emulator.list_objects('v1/pods', namespace or self.namespace)
        if job is not None:
            pods = [p for p in pods if (p['metadata'].get('labels') or {}).get(names.LABEL_JOB_NAME) == job]
        return sorted(pods, key=lambda p: p['metadata']['name'])

    def events(self, name: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.emulator.list_objects('v1/events', namespace or self.namespace)
                if (e.get('involvedObject') or {}).get('name') == name]

    def kubectl(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        exe = shutil.which('kubectl', path=os.pathsep.join([str(BIN), os.environ.get('PATH', '')]))
        if exe is None:
            raise FileNotFoundError('kubectl is not installed (the test extra ships it in .venv/bin)')
        cmd = [exe, f'--kubeconfig={self.kubeconfig}', f'--cache-dir={self.workdir / "kube-cache"}', *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f'{" ".join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}')
        return done

    def diagnostics(self) -> str:
        """Everything needed to understand a failure: job statuses, Pods, events, logs."""
        parts = []
        for job in self.emulator.list_objects(JOBS):
            parts.append(f'DDPJob {job["metadata"]["name"]}: {json.dumps(job.get("status"), indent=1)}')
        for pod in self.emulator.list_objects('v1/pods'):
            parts.append(f'Pod {pod["metadata"]["name"]} labels={pod["metadata"].get("labels")} '
                         f'status={json.dumps(pod.get("status"))}')
        for event in self.emulator.list_objects('v1/events'):
            parts.append(f'Event {event.get("type")} {event.get("reason")}: {event.get("message")}')
        if self.operator is not None:
            parts.append('--- operator log ---\n' + self.operator.log_tail())
        if self.kubelet is not None:
            parts.append('--- containers ---\n' + self.kubelet.logs())
            if self.kubelet.errors:
                parts.append(f'--- kubelet errors --- {self.kubelet.errors!r}')
        return '\n'.join(parts)


def wait_until(predicate: Any, timeout: float, message: str, describe: Any = None, interval: float = 0.05) -> Any:
    return wait_for(predicate, timeout=timeout, interval=interval, message=message, describe=describe)


def read_metrics(path: pathlib.Path) -> list[dict[str, Any]]:
    """The trainer's JSON-lines metrics; a line being written is not a record yet."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            records.append(json.loads(line))
    return records


def load_example() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def elapsed(since: float) -> float:
    return round(time.time() - since, 3)
