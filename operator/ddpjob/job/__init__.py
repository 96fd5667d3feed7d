"""The job state machine: observed Pods + previous status -> the next status and what to
create or delete. Pure; the operator calls `lifecycle.decide`, the local runner
`lifecycle.plan` (the same decision, from what it knows)."""
