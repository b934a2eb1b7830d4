"""fedmem's MCP server: the agent memory tools over streamable HTTP (/mcp) and stdio.

The tools are entry points like the REST views: each parses its arguments with the
same serializer, resolves access through the same gate and calls the same service
or selector; its result is framed as untrusted data, as recall is.
"""
