"""Django admin building blocks: platform staff only, memory content never shown,
every edit audited.

The admin is a platform operator's tool, outside the tenant gate and the policy
checks. So it opens only to platform staff (:func:`platform_staff`), shows rows
that only services may write read-only, hides what end users said (memory
content, session messages, history text, spans), and writes an audit event for
each change it does allow, in the same transaction as the change.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction

from core.admin import ReadOnlyModelAdmin
from governance.models import Membership, Role, Tenant
from governance.services.audit import audit_record


def platform_staff(user: Any) -> bool:
    """Active staff who are superusers or platform admins in some tenant."""
    if not (user.is_active and user.is_staff):
        return False
    if user.is_superuser:
        return True
    return Membership.objects.filter(user=user, role=Role.PLATFORM_ADMIN).exists()


def _admin_site_has_permission(request: Any) -> bool:
    return platform_staff(request.user)


# One admin site: every app's registrations inherit the gate.
admin.site.has_permission = _admin_site_has_permission  # type: ignore[method-assign]


class _Named:
    """Stands in for a row in admin page titles and breadcrumbs, which print
    ``str(row)`` (a memory item's string starts with its content)."""

    def __init__(self, obj: Any) -> None:
        self.pk = obj.pk
        self._meta = obj._meta
        self._label = f"{obj._meta.verbose_name} {obj.pk}"

    def __str__(self) -> str:
        return self._label


class ContentHiddenAdmin(ReadOnlyModelAdmin):
    """Read-only, and ``hidden_fields`` (what end users said, and anything derived
    from it) never appear: not in lists, detail pages, titles or search."""

    hidden_fields: tuple[str, ...] = ()

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):  # type: ignore[no-untyped-def]
        if obj is not None:
            named = _Named(obj)
            context.update(original=named, subtitle=str(named))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def history_view(self, request, object_id, extra_context=None):  # type: ignore[no-untyped-def]
        obj = self.get_object(request, object_id)
        if obj is not None:
            named = _Named(obj)
            extra_context = {**(extra_context or {}), "title": f"Change history: {named}", "object": named}
        return super().history_view(request, object_id, extra_context)

    def get_exclude(self, request, obj=None):  # type: ignore[no-untyped-def]
        return [*(super().get_exclude(request, obj) or ()), *self.hidden_fields]

    def get_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return [f for f in super().get_fields(request, obj) if f not in self.hidden_fields]

    def get_list_display(self, request):  # type: ignore[no-untyped-def]
        return [f for f in super().get_list_display(request) if f not in self.hidden_fields]

    def get_search_fields(self, request):  # type: ignore[no-untyped-def]
        return [f for f in super().get_search_fields(request) if f.lstrip("^=@") not in self.hidden_fields]


class AuditedModelAdmin(admin.ModelAdmin):
    """An editable admin whose saves and deletes are written to the audit trail
    (which fields changed, never their values) with the change."""

    def _audit(self, request: Any, obj: Any, verb: str, fields: list[str]) -> None:
        tenant_id = getattr(obj, "tenant_id", None)
        tenant = Tenant.objects.filter(pk=tenant_id).first() if tenant_id else None
        audit_record(
            tenant=tenant,
            actor=request.user,
            action=f"admin.{obj._meta.model_name}.{verb}",
            target_type=obj._meta.label_lower,
            target_id=str(obj.pk),
            data={"fields": sorted(fields), "via": "django_admin"},
        )

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            self._audit(request, obj, "changed" if change else "added", list(form.changed_data))

    def delete_model(self, request, obj):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            pk = obj.pk
            super().delete_model(request, obj)
            obj.pk = pk
            self._audit(request, obj, "deleted", [])

    def delete_queryset(self, request, queryset):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            for obj in list(queryset):
                self.delete_model(request, obj)

    def save_formset(self, request, form, formset, change):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            instances = formset.save()
            for obj in instances:
                self._audit(request, obj, "changed", [])
            for obj in formset.deleted_objects:
                self._audit(request, obj, "deleted", [])
            formset.save_m2m()
