"""The job state machine: observed Pods + previous status -> the next status and what to
create or delete. Pure; the operator and the local runner both call `lifecycle.plan`."""
