"""The operator's template policy: what a job's template may ask for."""

from __future__ import annotations

import pytest

from ddpjob.api import template_policy as tp
from ddpjob.cli.main import main

HOSTILE = {
    "privileged": (
        {"containers": [{"name": "trainer", "securityContext": {"privileged": True}}]},
        "spec.template.spec.containers[0].securityContext.privileged",
    ),
    "hostPath": (
        {"volumes": [{"name": "d", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]},
        "spec.template.spec.volumes[1].hostPath",
    ),
    "hostNamespaces": ({"hostNetwork": True}, "spec.template.spec.hostNetwork"),
    "capabilities": (
        {"initContainers": [{"name": "i", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]},
        "spec.template.spec.initContainers[0].securityContext.capabilities.add",
    ),
}


@pytest.mark.parametrize("allowance", sorted(HOSTILE))
def test_refused_by_default_and_allowed_by_an_admin(allowance: str) -> None:
    spec, path = HOSTILE[allowance]
    errors = tp.check({"spec": spec})
    assert [e.path for e in errors] == [path]
    assert "refused by the operator's template policy" in errors[0].message and allowance in errors[0].message
    assert tp.check({"spec": spec}, frozenset({allowance})) == []


def test_host_pid_and_ipc_are_host_namespaces_too() -> None:
    errors = tp.check({"spec": {"hostPID": True, "hostIPC": True, "hostNetwork": False}})
    assert [e.path for e in errors] == ["spec.template.spec.hostPID", "spec.template.spec.hostIPC"]


def test_unknown_allowance_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown template allowance 'root'"):
        tp.parse_allowances("hostPath, root")
    assert tp.parse_allowances("hostPath, privileged") == {"hostPath", "privileged"}


def test_validate_applies_the_policy(tmp_path, capsys) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "apiVersion: ddpjob.io/v1alpha1\nkind: DDPJob\nmetadata: {name: j}\n"
        "spec:\n  image: i\n  template:\n    spec:\n      volumes: [{name: h, hostPath: {path: /data}}]\n"
    )
    assert main(["validate", str(job)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{job}: spec.template.spec.volumes[0].hostPath: ")
    assert main(["validate", "--template-allow", "hostPath", str(job)]) == 0
    assert main(["validate", "--template-allow", "nope", str(job)]) == 1
    assert "unknown template allowance 'nope'" in capsys.readouterr().err
