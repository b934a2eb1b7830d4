"""One FilterSet per list, shared by the API and the console page."""

from __future__ import annotations

from datetime import UTC

import django_filters

from governance.models import AuditEvent


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO datetime sent to the database in UTC: PostgreSQL refuses offsets past
    ±15:59 that ISO 8601 and Python accept, which would fail the query."""

    def filter(self, qs, value):  # type: ignore[no-untyped-def]
        if value is not None and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:  # year 1 minus an offset: before any stored event
                value = value.replace(tzinfo=None).replace(tzinfo=UTC)
        return super().filter(qs, value)


class AuditEventFilterSet(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_label", lookup_expr="iexact", label="Actor")
    actor_type = django_filters.ChoiceFilter(
        choices=[("user", "user"), ("agent", "agent"), ("system", "system")], label="Actor type"
    )
    action = django_filters.CharFilter(lookup_expr="istartswith", label="Action (prefix)")
    target_type = django_filters.CharFilter(label="Target type")
    target_id = django_filters.CharFilter(label="Target id")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte", label="Since")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt", label="Until")

    class Meta:
        model = AuditEvent
        fields = ["actor", "actor_type", "action", "target_type", "target_id", "since", "until"]
