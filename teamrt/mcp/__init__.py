"""MCP servers: their configuration (``config``), how teamrt reaches them (``transport``), a run's servers at
work (``servers``) and their tools (``tools``). The ``mcp`` SDK is imported only where a server is used."""
