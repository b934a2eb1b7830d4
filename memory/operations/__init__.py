"""Use cases of the agent memory, one typed function each.

Every surface (REST views, MCP tools, console views, tasks, commands, benches)
parses its input into a frozen request dataclass, resolves the caller's access
once (:func:`access.agent_memory_access`) and calls one operation, which returns
a result dataclass; ``result.body()`` is the JSON both REST and MCP answer with.
Operations compose services (writes), selectors (reads) and the engine seam
(:mod:`memory.engines`); they hold no HTTP or DRF types.
"""
