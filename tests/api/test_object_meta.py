"""What of `metadata` the API server cannot decode: `ddpjob validate` refuses it, naming the
field (ddpjob/api/object_meta.py), as the real kube-apiserver does with its 400 (a dry run
on the worker's control plane)."""

from __future__ import annotations

import pytest

from ddpjob.api import spec
from tests.api.bad_jobs import job

CASES = [
    ({"generation": "abc"}, "metadata.generation"),
    ({"generation": 1 << 63}, "metadata.generation"),
    ({"generation": True}, "metadata.generation"),
    ({"deletionGracePeriodSeconds": 1.5}, "metadata.deletionGracePeriodSeconds"),
    ({"labels": {"team": 7}}, "metadata.labels.team"),
    ({"labels": {"app.kubernetes.io/name": False}}, "metadata.labels[app.kubernetes.io/name]"),
    ({"labels": "team=a"}, "metadata.labels"),
    ({"annotations": ["a"]}, "metadata.annotations"),
    ({"finalizers": "x"}, "metadata.finalizers"),
    ({"uid": 12}, "metadata.uid"),
    ({"name": 5}, "metadata.name"),
    ({"namespace": 3}, "metadata.namespace"),
]
DECODABLE = [
    {"generation": 7},
    {"generation": -(1 << 63)},
    {"labels": {"team": "a", "empty": None}},
    {"annotations": {}},
    {"finalizers": []},
    {"uid": None},
]


@pytest.fixture
def crd(ddpjob_validator):
    return ddpjob_validator


@pytest.mark.parametrize("meta, path", CASES, ids=[p for _, p in CASES])
def test_validate_refuses_what_the_server_cannot_decode(meta, path, crd):
    errors = spec.validate(job(metadata=meta))
    assert [e.path for e in errors] == [path], [str(e) for e in errors]
    [refused] = crd.validate(job(metadata=meta))
    assert "cannot unmarshal" in refused.message and path.startswith(refused.path), refused


@pytest.mark.parametrize("meta", DECODABLE, ids=[str(m) for m in DECODABLE])
def test_what_the_server_decodes_passes_both(meta, crd):
    assert spec.validate(job(metadata=meta)) == []
    assert crd.validate(job(metadata=meta)) == []
