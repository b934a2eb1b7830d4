from fedmem_mcp.tests.live import asgi_server  # noqa: F401
from providers.tests.conftest import local_server  # noqa: F401
