"""What kubectl and `ddpjob` need beyond CRUD: Tables from printer columns, per-resource
field selectors, server-side apply, pods/log."""

from __future__ import annotations

import json
import pathlib
import time

import kubernetes
import pytest

from ddpjob_devcluster.apiserver import pod_logs, tables
from ddpjob_devcluster.apiserver.emulator import KubeEmulator
from tests.devcluster.emulator_helpers import WIDGET_CRD, widget

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
APPLY = "application/apply-patch+yaml"


def printer_crd() -> dict:
    crd = json.loads(json.dumps(WIDGET_CRD))
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Colour", "type": "string", "jsonPath": ".spec.colour", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return crd


def raw(response) -> dict:
    return json.loads(response.data)


def test_human_duration_matches_apimachinery() -> None:
    cases = {
        -5: "<invalid>",
        -0.5: "0s",
        59: "59s",
        119: "119s",
        125: "2m5s",
        600: "10m",
        7199: "119m",
        3 * 3600 + 60: "3h1m",
        30 * 3600: "30h",
        3 * 86400 + 3600: "3d1h",
        20 * 86400: "20d",
        3 * 365 * 86400: "3y",
        10 * 365 * 86400: "10y",
    }
    assert {s: tables.human_duration(s) for s in cases} == cases


def test_an_empty_date_cell_reads_unknown_as_the_servers_zero_time() -> None:
    started = {"name": "Started", "type": "date", "jsonPath": ".status.started"}
    cols, row = tables.crd_printer({"additionalPrinterColumns": [started]})
    assert [c["name"] for c in cols] == ["Name", "Started"]
    assert row({"metadata": {"name": "w"}, "status": {"started": ""}}, None) == ["w", "<unknown>"]
    assert row({"metadata": {"name": "w"}, "status": {"started": "soon"}}, None) == ["w", "soon"]


def test_custom_resources_come_back_as_tables_with_printer_columns(api, custom) -> None:
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(printer_crd())  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", widget("w1", size=3))
    table = raw(
        custom.list_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", _headers=TABLE, _preload_content=False
        )
    )
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0),
        ("Size", "integer", 0),
        ("Colour", "string", 1),
        ("Age", "date", 0),
    ]
    (row,) = table["rows"]
    assert row["cells"][:3] == ["w1", 3, None] and row["cells"][3].endswith("s")
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "w1"
    one = raw(
        custom.get_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", "w1", _headers=TABLE, _preload_content=False
        )
    )
    assert one["kind"] == "Table" and len(one["rows"]) == 1
    plain = custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert plain["items"][0]["metadata"]["name"] == "w1"  # no Table unless asked


def test_a_watch_of_tables_has_headers_on_the_first_event_only(emulator: KubeEmulator, api, custom) -> None:
    kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(printer_crd())  # type: ignore[arg-type]  # a dict body: the client sends it as it is
    for name in ("a", "b"):
        custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", widget(name, size=1))
    response = custom.list_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", watch=True, timeout_seconds=1, _headers=TABLE, _preload_content=False
    )
    events = [json.loads(line) for line in response.data.splitlines() if line.strip()]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert events[0]["object"]["columnDefinitions"] and events[1]["object"]["columnDefinitions"] == []


def test_events_by_involved_object_as_kubectl_describe_asks(core) -> None:
    for name, obj in (("e1", "job-a"), ("e2", "job-b")):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": name},
                "involvedObject": {"kind": "DDPJob", "name": obj, "namespace": "default"},
                "reason": "Created",
                "type": "Normal",
                "message": "m",
            },
        )
    found = core.list_namespaced_event(
        "default",
        field_selector="involvedObject.name=job-a,involvedObject.namespace=default,involvedObject.kind=DDPJob",
    )
    assert [e.metadata.name for e in found.items] == ["e1"]
    with pytest.raises(kubernetes.client.ApiException) as info:
        core.list_namespaced_event("default", field_selector="spec.nodeName=x")  # a Pod field, not an Event's
    assert info.value.status == 400


def test_pods_by_status_phase(core) -> None:
    core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    )
    assert [
        p.metadata.name for p in core.list_namespaced_pod("default", field_selector="status.phase!=Running").items
    ] == ["p"]


def test_server_side_apply_creates_updates_removes_and_detects_conflicts(widgets) -> None:
    def apply(manager: str, force: bool | None = None, **spec):
        return widgets.patch_namespaced_custom_object(
            "example.com",
            "v1",
            "default",
            "widgets",
            "w",
            widget("w", **spec),
            field_manager=manager,
            force=force,
            _content_type=APPLY,
        )

    created = apply("alice", size=1, colour="red")
    assert created["spec"] == {"size": 1, "colour": "red"}
    assert [m["manager"] for m in created["metadata"]["managedFields"]] == ["alice"]
    assert apply("alice", size=2)["spec"] == {"size": 2}  # colour left out: removed
    with pytest.raises(kubernetes.client.ApiException) as info:
        apply("bob", size=5)
    assert (
        info.value.status == 409 and 'conflict with "alice": .spec.size' in json.loads(str(info.value.body))["message"]
    )
    assert apply("bob", size=2, colour="blue")["spec"] == {"size": 2, "colour": "blue"}  # same value: shared
    taken = apply("bob", force=True, size=9)
    assert taken["spec"]["size"] == 9
    owners = {m["manager"]: m["fieldsV1"] for m in taken["metadata"]["managedFields"]}
    assert "alice" not in owners and owners["bob"] == {"f:metadata": {"f:name": {}}, "f:spec": {"f:size": {}}}
    with pytest.raises(kubernetes.client.ApiException) as info:
        widgets.patch_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", "w", widget("w"), _content_type=APPLY
        )
    assert info.value.status == 400  # fieldManager is required


def test_pod_log_serves_the_kubelets_file(emulator: KubeEmulator, core, tmp_path: pathlib.Path) -> None:
    pod = core.create_namespaced_pod(
        "default", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "trainer", "image": "i"}]}}
    )
    with pytest.raises(kubernetes.client.ApiException) as info:
        core.read_namespaced_pod_log("p", "default")
    assert info.value.status == 400 and "is waiting to start" in str(info.value.body)
    log = tmp_path / "trainer.log"
    log.write_text("[p] one\n[p] two\n[p] three\n")
    running = {"now": True}
    pod_logs.attach(
        emulator,
        lambda ns, name, uid, c: (
            (log, lambda: running["now"]) if (ns, name, uid) == ("default", "p", pod.metadata.uid) else None
        ),
    )
    assert core.read_namespaced_pod_log("p", "default") == "one\ntwo\nthree\n"
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "three\n"
    with pytest.raises(kubernetes.client.ApiException) as info:
        core.read_namespaced_pod_log("missing", "default")
    assert info.value.status == 404
    with pytest.raises(kubernetes.client.ApiException) as info:
        core.read_namespaced_pod_log("p", "default", container="sidecar")
    assert info.value.status == 400

    def finish():
        time.sleep(0.3)
        with open(log, "a") as f:
            f.write("[p] four\n")
        running["now"] = False

    import threading

    threading.Thread(target=finish).start()
    followed = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    assert followed.data.decode() == "one\ntwo\nthree\nfour\n"  # ends once the container has exited
