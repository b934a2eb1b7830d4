from fedmem_mcp.tests.live import asgi_server  # noqa: F401
from memory.tests.conftest import loaded_models  # noqa: F401
