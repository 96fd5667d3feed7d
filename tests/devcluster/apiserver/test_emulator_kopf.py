"""kopf against the emulator through ddpjob_devcluster.clusters.operator_runner."""

from __future__ import annotations

import pathlib

import pytest

from ddpjob_devcluster.clusters.operator_runner import run_operator, wait_for
from tests.devcluster.emulator_helpers import widget
from tests.support.deadlines import REACTION

HANDLERS = pathlib.Path(__file__).with_name("kopf_handlers_widgets.py")


def _status(widgets, name):
    return widgets.get_namespaced_custom_object("example.com", "v1", "ns1", "widgets", name).get("status")


@pytest.mark.parametrize("scope", [{"namespace": "ns1"}, {"clusterwide": True}], ids=["namespaced", "clusterwide"])
def test_kopf_reacts_to_a_created_object(emulator, widgets, scope):
    widgets.create_namespaced_custom_object("example.com", "v1", "ns1", "widgets", widget("before", size=1))

    with run_operator(emulator, HANDLERS, **scope) as operator:
        widgets.create_namespaced_custom_object("example.com", "v1", "ns1", "widgets", widget("after", size=2))
        assert wait_for(lambda: _status(widgets, "after"), timeout=REACTION)["phase"] == "Seen"
        assert wait_for(lambda: _status(widgets, "before"), timeout=REACTION)["size"] == 1
        assert operator.alive

    # kopf wrote the status through the /status subresource (the CRD declares it).
    status_writes = [r for r in emulator.requests if r.verb == "patch" and r.subresource == "status"]
    assert status_writes


def test_kopf_retries_through_injected_api_errors(emulator, widgets):
    widgets.create_namespaced_custom_object("example.com", "v1", "ns1", "widgets", widget("w", size=1))
    fault = emulator.inject_fault(verb="patch", resource="widgets", subresource="status", status=503, count=2)

    with run_operator(emulator, HANDLERS, namespace="ns1"):
        assert wait_for(lambda: _status(widgets, "w"), timeout=REACTION)["phase"] == "Seen"

    assert fault.count == 0  # both failures were served, and kopf retried past them
