from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from guardian.admin import GuardedModelAdmin

from core.admin import ReadOnlyModelAdmin
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
class FedmemUserAdmin(UserAdmin):
    inlines = [MembershipInline]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]


@admin.register(Agent)
class AgentAdmin(GuardedModelAdmin):
    list_display = ["name", "tenant", "is_active", "created_at"]
    list_filter = ["tenant", "is_active"]
    search_fields = ["name"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are created through the console or API (the secret is shown once there)."""

    list_display = ["name", "prefix", "tenant", "agent", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["tenant"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
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
class AgentPolicyVersionAdmin(admin.ModelAdmin):
    """Versions are immutable: the admin shows them, changes go through the API."""

    list_display = ["agent", "version", "engine", "created_by", "created_at"]
    list_filter = ["engine"]
    readonly_fields = ["agent", "version", "engine", "policy", "note", "created_by", "created_at"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(LegalHold)
class LegalHoldAdmin(ReadOnlyModelAdmin):
    """Holds are placed and released through the API (two-person rule, audit)."""

    list_display = ["target", "tenant", "subject", "agent", "scope", "item_id", "placed_by", "released_at"]
    list_filter = ["target"]


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
class CandidateAdmin(ReadOnlyModelAdmin):
    """Review and promotion go through the API (owner rule, fence, audit)."""

    list_display = ["provider", "external_id", "record_kind", "status", "agent", "created_at"]
    list_filter = ["status", "record_kind", "provider"]
