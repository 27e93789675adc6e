"""journal-agent: a learning journal for ML training systems that writes itself.

Heavy dependencies (anthropic, torch, mcp, matplotlib) are imported only where used, so
importing this package stays cheap.
"""

from profiling._version import __version__

__all__ = ["__version__"]
