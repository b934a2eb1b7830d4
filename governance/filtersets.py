"""One FilterSet per list, shared by the API and the console page."""

from __future__ import annotations

import django_filters

from governance.models import AuditEvent


class AuditEventFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_label", lookup_expr="iexact", label="Actor")
    actor_type = django_filters.ChoiceFilter(
        choices=[("user", "user"), ("agent", "agent"), ("system", "system")], label="Actor type"
    )
    action = django_filters.CharFilter(lookup_expr="istartswith", label="Action (prefix)")
    target_type = django_filters.CharFilter(label="Target type")
    target_id = django_filters.CharFilter(label="Target id")
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte", label="Since")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt", label="Until")

    class Meta:
        model = AuditEvent
        fields = ["actor", "actor_type", "action", "target_type", "target_id", "since", "until"]
