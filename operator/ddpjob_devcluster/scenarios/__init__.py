"""What the tests and benchmarks do to a cluster, and measure: the gang deadlock, a Pod lost
from an elastic job, a struggling API server."""
