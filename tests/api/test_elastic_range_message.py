"""`nodes` outside an elastic job's range: the cluster (the CRD's CEL rule, its
messageExpression) says the size and the range, in the words `ddpjob validate` uses
(the real API server's answer: tests/system/test_elastic_real.py)."""

from ddpjob.api import spec
from ddpjob_devcluster.apiserver import crd_validator
from tests.api.bad_jobs import job

SAID = "must be from spec.elastic.minNodes (2) to spec.elastic.maxNodes (4) (got 5)"


def test_the_cluster_says_the_size_and_the_range_as_validate_does():
    doc = job({"nodes": 5, "elastic": {"minNodes": 2, "maxNodes": 4}})
    assert [str(e) for e in spec.validate(doc)] == [f"spec.nodes: {SAID}"]
    kube = [e.message for e in crd_validator.load().validate(doc)]
    assert kube == [f"spec.nodes: {SAID}"]
