"""Django admin for engine instances and tenant credential references.

The admin shows references (``env://…``, ``openbao://…``), never resolved values:
no secret is ever stored. Prefer the API, which validates them; changes made here
are audited too (which fields changed, never their values).
"""

from django.contrib import admin

from governance.admin_base import AuditedModelAdmin, ContentHiddenAdmin
from providers.models import EngineInstance, ProviderWrite, TenantEngineCredential


class TenantEngineCredentialInline(admin.TabularInline):
    model = TenantEngineCredential
    extra = 0
    fields = ["tenant", "credential_ref", "set_by", "updated_at"]
    readonly_fields = ["set_by", "updated_at"]


@admin.register(EngineInstance)
class EngineInstanceAdmin(AuditedModelAdmin):
    list_display = ["id", "provider", "base_url", "tenant", "access_control", "timeout_seconds"]
    list_filter = ["provider", "access_control", "allow_development_hosts"]
    search_fields = ["id", "base_url"]
    readonly_fields = ["created_by", "created_at", "updated_at"]
    inlines = [TenantEngineCredentialInline]


@admin.register(TenantEngineCredential)
class TenantEngineCredentialAdmin(admin.ModelAdmin):
    list_display = ["engine", "tenant", "credential_ref", "set_by", "updated_at"]
    list_filter = ["engine"]
    readonly_fields = ["set_by", "updated_at"]


@admin.register(ProviderWrite)
class ProviderWriteAdmin(ContentHiddenAdmin):
    """Queued provider writes as the reconcile task follows them. Read-only, and the
    scope and ids (which name the subject) never shown."""

    list_display = ["operation", "engine", "status", "attempts", "created_at", "settled_at"]
    list_filter = ["status", "operation"]
    hidden_fields = ("scope", "external_ids", "handle", "detail")
