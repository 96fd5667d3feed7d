"""`make demo-cluster`: a whole ddpjob cluster on this machine (`main.py`)."""
