"""The names a wait or a filter takes: a DDPJob's phases, and Kubeflow Trainer's
`TrainerClient` status names where they mean the same.

A DDPJob is `Pending` until the operator wrote its status, then `Running`, `Restarting`,
`Suspended`, and ends `Succeeded` or `Failed` (ddpjob/job/decision.py). TrainerClient's
TrainJob is `Created`, `Running`, `Complete` or `Failed`: `Complete` is `Succeeded` and
`Created` (made, not running yet) is `Pending`. Any other name is refused with the list,
where a silent typo would wait out the whole timeout or end the wait with JobFailed.
"""

from __future__ import annotations

from collections.abc import Iterable

PHASES = ("Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed")
TERMINAL = frozenset({"Succeeded", "Failed"})
# TrainerClient's name -> the phase it means.
TRAINER_NAMES = {"Created": "Pending", "Complete": "Succeeded"}
# The phase -> how TrainerClient says it (`Job.status`).
AS_TRAINER = {phase: name for name, phase in TRAINER_NAMES.items()}


def phases(names: Iterable[str] | str, what: str = "status") -> frozenset[str]:
    """The phases `names` mean; a name that is neither a phase nor TrainerClient's is a
    ValueError naming it and every name accepted. A lone string is one name."""
    given = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in given if n not in PHASES and n not in TRAINER_NAMES]
    if unknown:
        accepted = ", ".join([*PHASES, *(f"{name} (= {phase})" for name, phase in TRAINER_NAMES.items())])
        raise ValueError(f"{what}: unknown status {', '.join(map(repr, unknown))}; one of {accepted}")
    if not given:
        raise ValueError(f"{what}: give at least one status")
    return frozenset(TRAINER_NAMES.get(n, n) for n in given)


def as_trainer(phase: str) -> str:
    """The phase as TrainerClient names it (`Complete` for `Succeeded`, `Created` for
    `Pending`); the others are the same or DDPJob's own."""
    return AS_TRAINER.get(phase, phase)
