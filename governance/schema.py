"""drf-spectacular description of the bearer-key authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[misc]
    target_class = "governance.authentication.BearerKeyAuthentication"
    name = "bearerKey"

    def get_security_definition(self, auto_schema):  # type: ignore[no-untyped-def]
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's or a user's API key: `Authorization: Bearer fm_<prefix>_<secret>`.",
        }
