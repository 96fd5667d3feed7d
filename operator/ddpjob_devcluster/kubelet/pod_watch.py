"""The process kubelet's view of its Pods: list, then watch from the list's version, and
list again on any error (410 Gone, a dropped stream, a restarting server), as a
reflector does. Events go onto a queue that the kubelet's work loop drains; a list is
one `SYNC` event, so Pods deleted while nobody watched are noticed too.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import queue
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
import urllib3

WATCH_TIMEOUT_SECONDS = 5  # server-side: the watch ends and is re-listed this often


def api_client(server: str, kubeconfig: pathlib.Path | None) -> kubernetes.client.CoreV1Api:
    """A kubeconfig's identity (a node's certificate), else a client of `server` with none
    (a kubelet under test that never reaches a server)."""
    config = kubernetes.client.Configuration()
    if kubeconfig is not None:
        kubernetes.config.load_kube_config(str(kubeconfig), client_configuration=config)
    else:
        config.host = server
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


class PodWatch:
    def __init__(
        self,
        api: Callable[[], kubernetes.client.CoreV1Api],
        events: queue.Queue,
        stopping: threading.Event,
        *,
        namespace: str | None = None,
        node_name: str | None = None,
    ):
        self._api, self._events, self._stopping = api, events, stopping
        self.namespace, self.node_name = namespace, node_name
        self._watch_response: Any = None

    def interrupt(self) -> None:
        response = self._watch_response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks the watch thread's read

    def run(self) -> None:
        self._watch_loop()

    def _list_pods(self, core: kubernetes.client.CoreV1Api, **kwargs: Any) -> Any:
        if self.node_name is not None:
            kwargs["field_selector"] = f"spec.nodeName={self.node_name}"
        if self.namespace:
            return core.list_namespaced_pod(self.namespace, **kwargs)
        return core.list_pod_for_all_namespaces(**kwargs)

    def _watch_loop(self) -> None:
        core = self._api()
        try:
            while not self._stopping.is_set():
                try:
                    listing = core.api_client.sanitize_for_serialization(self._list_pods(core, _request_timeout=10))
                    self._events.put(("SYNC", listing))
                    self._watch(core, listing["metadata"].get("resourceVersion"))
                except (
                    kubernetes.client.ApiException,
                    urllib3.exceptions.HTTPError,
                    OSError,
                    ValueError,
                    AttributeError,
                ):  # AttributeError: the stream was shut down under its reader
                    if self._stopping.wait(0.2):  # the server may be restarting; list again soon
                        return
        finally:
            core.api_client.close()

    def _watch(self, core: kubernetes.client.CoreV1Api, resource_version: str | None) -> None:
        """One watch request, read line by line; `stop()` shuts its socket to end it at once."""
        response = self._list_pods(
            core,
            watch=True,
            resource_version=resource_version,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
            _preload_content=False,
            _request_timeout=WATCH_TIMEOUT_SECONDS + 10,
        )
        self._watch_response = response
        try:
            if self._stopping.is_set():
                return
            for line in kubernetes.watch.watch.iter_resp_lines(response):
                event = json.loads(line)
                if event.get("type") == "ERROR":  # e.g. 410 Gone: the version is too old; re-list
                    return
                self._events.put((event["type"], event["object"]))
        finally:
            self._watch_response = None
            response.release_conn()
