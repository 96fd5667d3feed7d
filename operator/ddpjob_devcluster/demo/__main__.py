"""`python -m ddpjob_devcluster.demo`: see main.py."""

import sys

from ddpjob_devcluster.demo.main import main

sys.exit(main())
