"""What a valid job still hears, where `validate/render/run` import it; the notices
themselves are ddpjob/api/notices.py (the Python client says them too)."""

from ddpjob.api.notices import lines, say

__all__ = ["lines", "say"]
