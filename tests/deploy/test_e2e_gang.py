"""The kind e2e script's optional gang stage (hack/e2e-gang.sh, run by hack/e2e-kind.sh
with E2E_GANG=coscheduling|volcano) cannot run here: its steps are checked by a dry run,
and what it applies is linted: the DDPJob (the CRD and the model), the operator chart
with the stage's values (Kubernetes 1.37 schema, strict), and the PodGroup and Pods the
operator would make for that job (the upstream CRD, the 1.37 schema)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from ddpjob import render
from ddpjob.api import spec
from ddpjob.operator.gang import GangSupport
from tests.deploy.deploy_helpers import ROOT, helm_template, require_tool
from tests.support.real_crd import RealCRD

SCRIPT = ROOT / "hack" / "e2e-gang.sh"
SCHEDULERS = {"coscheduling": "scheduler-plugins-scheduler", "volcano": "volcano"}


def dry_run(gang: str, tmp_path: pathlib.Path) -> tuple[list[str], pathlib.Path]:
    out = tmp_path / gang
    done = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--render", str(out), gang],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PY": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")], out


def index(steps: list[str], fragment: str) -> int:
    return next(i for i, s in enumerate(steps) if fragment in s)


@pytest.mark.parametrize("gang", ["coscheduling", "volcano"])
def test_dry_run_steps_come_in_order(gang: str, tmp_path: pathlib.Path) -> None:
    steps, _ = dry_run(gang, tmp_path)
    install = index(steps, "helm install scheduler-plugins" if gang == "coscheduling" else "volcano-development.yaml")
    crd = index(steps, "wait crd/podgroups.")
    ready = index(steps, "wait deployment --all")
    upgrade = index(steps, "helm upgrade ddpjob-operator")
    apply_job = index(steps, "apply -f") if gang == "coscheduling" else index(steps, "job.yaml")
    wait_job = index(steps, "--for=condition=Succeeded")
    assert install < crd < ready < upgrade < apply_job < wait_job
    # released versions, pinned
    assert "--version 0.35.7" in steps[install] or "/v1." in steps[install]


def test_dry_run_refuses_an_unknown_integration(tmp_path: pathlib.Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--dry-run", "kueue"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


@pytest.mark.parametrize("gang, upstream", [(g, g) for g in ("coscheduling", "volcano")], indirect=["upstream"])
def test_the_applied_job_is_valid_and_renders_valid_objects(
    gang: str, upstream: RealCRD, ddpjob_validator: RealCRD, tmp_path: pathlib.Path
) -> None:
    _, out = dry_run(gang, tmp_path)
    body = yaml.safe_load((out / "job.yaml").read_text())
    assert body["spec"]["scheduling"]["gang"] == gang
    assert spec.validate(body) == []
    assert ddpjob_validator.validate(body) == []
    body["metadata"].update(namespace="ddpjob-e2e", uid="0d1c2b3a-0000-4000-8000-000000000001")
    values = yaml.safe_load((out / "operator-values.yaml").read_text())
    options = GangSupport.from_env(
        {
            "DDPJOB_COSCHEDULING_SCHEDULER": values["gang"][gang]["schedulerName"],
            "DDPJOB_VOLCANO_SCHEDULER": values["gang"][gang]["schedulerName"],
        }
    ).options
    group, service, *pods = render.render(spec.parse_job(body), options=options)
    assert upstream.validate(group) == []
    for obj in (service, *pods):
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
    assert {p["spec"]["schedulerName"] for p in pods} == {SCHEDULERS[gang]}


@pytest.mark.parametrize("gang", ["coscheduling", "volcano"])
def test_the_operator_chart_with_the_stage_values_is_valid(gang: str, tmp_path: pathlib.Path) -> None:
    helm = require_tool("helm", "run `make tools` (hack/fetch-tools.sh) or install helm")
    _, out = dry_run(gang, tmp_path)
    objects = helm_template(helm, tmp_path, yaml.safe_load((out / "operator-values.yaml").read_text()))
    for obj in objects:
        kubernetes_validate.validate(obj, "1.37.0", strict=True)
    env = {
        e["name"]: e.get("value")
        for e in next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    assert env["DDPJOB_GANG_INTEGRATIONS"] == gang


def test_e2e_kind_runs_the_stage_only_when_asked() -> None:
    text = (ROOT / "hack" / "e2e-kind.sh").read_text()
    assert 'if [[ -n "${E2E_GANG:-}" ]]; then' in text and 'hack/e2e-gang.sh "$E2E_GANG"' in text
    for script in ("e2e-kind.sh", "e2e-gang.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / "hack" / script)]).returncode == 0
