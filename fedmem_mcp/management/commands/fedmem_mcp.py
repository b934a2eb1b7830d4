"""Serve the MCP tools over stdio, for desktop and coding assistants that start
their servers as a subprocess:

    python manage.py fedmem_mcp --key fm_…        (or FEDMEM_MCP_KEY=fm_… in the environment)

The key is checked at start-up and again on every tool call, so revoking it takes
effect at once. Nothing but MCP messages may go to stdout: logs go to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import anyio
from asgiref.sync import sync_to_async
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server
from rest_framework import exceptions

from core.env import env_str
from fedmem_mcp.http import authenticate_key
from fedmem_mcp.server import build_server

KEY_ENV = "FEDMEM_MCP_KEY"


class Command(BaseCommand):
    help = "Serve fedmem's MCP tools over stdio with an API key (--key or FEDMEM_MCP_KEY)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--key", help=f"An API key (default: ${KEY_ENV}).")

    def handle(self, *args: Any, **options: Any) -> None:
        raw = options["key"] or env_str("FEDMEM_MCP_KEY") or ""
        if not raw:
            raise CommandError(f"An API key is required: --key fm_… or {KEY_ENV}.")
        try:
            authenticate_key(raw)
        except exceptions.AuthenticationFailed as exc:
            raise CommandError(str(exc.detail)) from exc
        # stdout carries the protocol: every log line goes to stderr.
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is sys.stdout:
                handler.setStream(sys.stderr)  # type: ignore[attr-defined]

        async def caller(ctx: Any) -> tuple[Any, Any]:
            return await sync_to_async(authenticate_key, thread_sensitive=True)(raw)

        server = build_server(caller)

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)
