"""Django admin of governance: platform staff only (governance.admin_base); keys, audit, holds,
erasures and candidates read-only (their changes go through the services, which
audit them); identity edits audited."""

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin

from core.admin import ReadOnlyModelAdmin
from governance.admin_base import AuditedModelAdmin, ContentHiddenAdmin
from governance.models import (
    Agent,
    AgentPolicyVersion,
    ApiKey,
    AuditChainHead,
    AuditEvent,
    Candidate,
    ErasureFence,
    ErasureRequest,
    Job,
    LegalHold,
    Membership,
    Tenant,
    User,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(User)
class FedmemUserAdmin(AuditedModelAdmin, UserAdmin):
    inlines = [MembershipInline]


@admin.register(Tenant)
class TenantAdmin(AuditedModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]


@admin.register(Membership)
class MembershipAdmin(AuditedModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]


@admin.register(Agent)
class AgentAdmin(ReadOnlyModelAdmin):
    """Agents, their activation and their grants change through the console or API
    (audited there)."""

    list_display = ["name", "tenant", "is_active", "created_at"]
    list_filter = ["tenant", "is_active"]
    search_fields = ["name"]


@admin.action(description="Revoke the selected keys")
def revoke_keys(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    from governance.services.agents import api_key_revoke

    for key in queryset.filter(revoked_at__isnull=True):
        api_key_revoke(key=key, actor=request.user)
    modeladmin.message_user(request, "Revoked (and audited).", messages.SUCCESS)


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyModelAdmin):
    """Keys are created through the console or API (the secret is shown once there).
    Every field is read-only: clearing ``revoked_at`` here brought a revoked key back
    with no trace. Revocation runs through the service, which audits it."""

    list_display = ["name", "prefix", "tenant", "agent", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    exclude = ["key_hash"]
    actions = [revoke_keys]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        # The list page needs it for the action; the change form stays read-only.
        return obj is None and super(ReadOnlyModelAdmin, self).has_change_permission(request, obj)

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return [f.name for f in self.model._meta.fields if f.name != "key_hash"]


@admin.register(Job)
class JobAdmin(ReadOnlyModelAdmin):
    list_display = ["kind", "tenant", "status", "progress", "total", "created_at", "finished_at"]
    list_filter = ["status", "kind"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyModelAdmin):
    list_display = ["seq", "chain", "action", "actor_label", "target_type", "target_id", "created_at"]
    list_filter = ["action", "actor_type"]
    search_fields = ["action", "actor_label", "target_id"]


@admin.register(AuditChainHead)
class AuditChainHeadAdmin(ReadOnlyModelAdmin):
    list_display = ["chain", "seq", "hash"]


@admin.register(AgentPolicyVersion)
class AgentPolicyVersionAdmin(ReadOnlyModelAdmin):
    """Versions are immutable: the admin shows them, changes go through the API."""

    list_display = ["agent", "version", "engine", "created_by", "created_at"]
    list_filter = ["engine"]


@admin.register(LegalHold)
class LegalHoldAdmin(ReadOnlyModelAdmin):
    """Holds are placed and released through the API (two-person rule, audit)."""

    list_display = ["target", "tenant", "agent", "scope", "item_id", "placed_by", "released_at"]
    list_filter = ["target"]
    exclude = ["subject"]


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ReadOnlyModelAdmin):
    """Erasures run through the API and the worker; the admin only shows them."""

    list_display = ["id", "tenant", "scope", "status", "requested_by", "created_at", "completed_at"]
    list_filter = ["status", "scope"]
    exclude = ["subject"]


@admin.register(ErasureFence)
class ErasureFenceAdmin(ReadOnlyModelAdmin):
    list_display = ["request", "tenant", "subject_hash", "erased_at"]


@admin.register(Candidate)
class CandidateAdmin(ContentHiddenAdmin):
    """Review and promotion go through the API (owner rule, fence, audit); what the
    record says and whom it is about stay out of the admin."""

    hidden_fields = ("content", "subject", "metadata", "provenance")

    list_display = ["provider", "external_id", "record_kind", "status", "agent", "created_at"]
    list_filter = ["status", "record_kind", "provider"]
