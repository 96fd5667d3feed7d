"""The nodes a Pod made next must avoid (render/placement.py): added to every required node
selector term the template has, as a `metadata.name` field, so no term lets the Pod on."""

from __future__ import annotations

from ddpjob.render.placement import avoiding


def terms(pod):
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]


EXCLUDE = {"key": "metadata.name", "operator": "NotIn", "values": ["n1", "n2"]}


def test_no_nodes_leave_the_pod_as_it_is():
    pod = {"spec": {"containers": []}}
    assert avoiding(pod, ()) is pod


def test_a_pod_without_affinity_gets_one_term():
    pod = {"spec": {"containers": []}}
    out = avoiding(pod, ["n2", "n1", "n2"])
    assert terms(out) == [{"matchFields": [EXCLUDE]}]
    assert "affinity" not in pod["spec"]  # the rendered Pod itself is not changed


def test_every_term_of_the_templates_own_affinity_keeps_its_selectors_and_excludes_the_nodes():
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    own = {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [zone]}, {"matchFields": [own]}]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
                },
                "podAntiAffinity": {"x": 1},
            }
        }
    }
    out = avoiding(pod, ["n1", "n2"])
    assert terms(out) == [{"matchExpressions": [zone], "matchFields": [EXCLUDE]}, {"matchFields": [own, EXCLUDE]}]
    assert out["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
    assert out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 1, "preference": {}}
    ]
