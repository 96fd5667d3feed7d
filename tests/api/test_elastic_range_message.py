"""`nodes` outside an elastic job's range: the cluster (the CRD's CEL rule, its
messageExpression) says the size and the range, in the words `ddpjob validate` uses
(the real API server's answer, a dry run on the worker's control plane)."""

from ddpjob.api import spec
from tests.api.bad_jobs import job
from tests.support import real_crd

SAID = "must be from spec.elastic.minNodes (2) to spec.elastic.maxNodes (4) (got 5)"


def test_the_cluster_says_the_size_and_the_range_as_validate_does(ddpjob_validator):
    doc = job({"nodes": 5, "elastic": {"minNodes": 2, "maxNodes": 4}})
    assert [str(e) for e in spec.validate(doc)] == [f"spec.nodes: {SAID}"]
    kube = ddpjob_validator.validate(doc)
    assert kube == [real_crd.ServerError("spec.nodes", f"Invalid value: spec.nodes: {SAID}")]
