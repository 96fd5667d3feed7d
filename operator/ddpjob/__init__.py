"""ddpjob: the DDPJob API, its rendering, the job state machine, the local runner, the
kopf operator and the `ddpjob` CLI. Each subpackage serves one audience; docs/design.md
says what each may import."""
