"""What of `metadata` the API server cannot decode: `ddpjob validate` refuses it, naming the
field, and the dev cluster's emulator answers it with the server's 400, from one rule
(ddpjob/api/object_meta.py)."""

from __future__ import annotations

import pytest

from ddpjob.api import spec
from ddpjob_devcluster.apiserver.errors import ApiError, decodable
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


@pytest.mark.parametrize("meta, path", CASES, ids=[p for _, p in CASES])
def test_validate_refuses_what_the_server_cannot_decode(meta, path):
    errors = spec.validate(job(metadata=meta))
    assert [e.path for e in errors] == [path], [str(e) for e in errors]
    with pytest.raises(ApiError) as refused:  # the emulator, from the same rule
        decodable(job(metadata=meta))
    assert refused.value.code == 400 and "cannot unmarshal" in refused.value.message


@pytest.mark.parametrize("meta", DECODABLE, ids=[str(m) for m in DECODABLE])
def test_what_the_server_decodes_passes_both(meta):
    assert spec.validate(job(metadata=meta)) == []
    decodable(job(metadata=meta))


def test_the_emulator_answers_as_kube_apiserver_words_it():
    with pytest.raises(ApiError) as refused:
        decodable({"kind": "DDPJob", "metadata": {"name": "j", "generation": "abc"}})
    assert refused.value.message == (
        "DDPJob cannot be handled as a DDPJob: json: cannot unmarshal string into "
        "Go struct field ObjectMeta.metadata.generation of type int64"
    )
