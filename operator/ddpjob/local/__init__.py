"""`ddpjob run`: a DDPJob on one machine. Never imports the operator (no kopf)."""
