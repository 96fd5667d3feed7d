"""One way to set a condition (as meta.SetStatusCondition): lastTransitionTime moves only
when the status flips; reason and message always follow; a new type goes at the end."""

from ddpjob.job.conditions import build_conditions, set_condition

T1, T2 = "2026-01-01T12:00:00Z", "2026-01-01T12:05:00Z"


def test_a_condition_keeps_its_transition_time_until_its_status_flips():
    first = set_condition([], "PodsCreated", "False", "Forbidden", "quota", T1)
    assert first == [
        {"type": "PodsCreated", "status": "False", "reason": "Forbidden", "message": "quota", "lastTransitionTime": T1}
    ]
    same = set_condition(first, "PodsCreated", "False", "Forbidden", "quota again", T2)
    assert same[0]["lastTransitionTime"] == T1 and same[0]["message"] == "quota again"
    flipped = set_condition(same, "PodsCreated", "True", "Created", "all Pods created", T2)
    assert flipped[0]["lastTransitionTime"] == T2 and flipped[0]["reason"] == "Created"
    assert first[0]["message"] == "quota"  # the input is not changed


def test_a_condition_is_set_in_its_place_and_a_new_one_goes_last():
    conds = [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]
    out = set_condition(conds, "A", "False", "r", "m", T1)
    assert [c["type"] for c in out] == ["A", "B"] and out[0]["lastTransitionTime"] == T1
    assert [c["type"] for c in set_condition(conds, "C", "True", "r", "m", T1)] == ["A", "B", "C"]


def test_the_phase_conditions_go_through_the_same_rule():
    running = build_conditions([], "Running", "AllNodesRunning", "2 nodes running", T1)
    assert running == [
        {
            "type": "Running",
            "status": "True",
            "reason": "AllNodesRunning",
            "message": "2 nodes running",
            "lastTransitionTime": T1,
        }
    ]
    done = build_conditions([*running, {"type": "Stalled", "status": "False"}], "Succeeded", "Succeeded", "done", T2)
    by_type = {c["type"]: c for c in done}
    # Running turns False with the reason of what ended it, at the flip; other types stay as they were.
    assert by_type["Running"] == {
        "type": "Running",
        "status": "False",
        "reason": "Succeeded",
        "message": "done",
        "lastTransitionTime": T2,
    }
    assert by_type["Stalled"] == {"type": "Stalled", "status": "False"}
    assert [c["type"] for c in done] == ["Running", "Succeeded", "Stalled"]
    # A condition that stays False keeps its words and its time.
    later = build_conditions(done, "Succeeded", "Succeeded", "done later", "2026-01-01T13:00:00Z")
    assert {c["type"]: c for c in later}["Running"] == by_type["Running"]
