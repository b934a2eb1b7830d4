from django.apps import AppConfig


class FedmemMcpConfig(AppConfig):
    name = "fedmem_mcp"
    verbose_name = "MCP server"
