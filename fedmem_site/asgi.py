"""ASGI entry point: HTTP through Django, the MCP server at /mcp, WebSockets through Channels."""

import os

from channels.routing import ProtocolTypeRouter, URLRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedmem_site.settings.base")
django_asgi = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from fedmem_mcp.http import is_mcp_path, mcp_app  # noqa: E402
from fedmem_site.routing import websocket_urlpatterns  # noqa: E402
from providers.apps import start_warmup  # noqa: E402

start_warmup(models="web")


async def http(scope, receive, send):  # type: ignore[no-untyped-def]
    if is_mcp_path(scope["path"]):
        await mcp_app(scope, receive, send)
    else:
        await django_asgi(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
