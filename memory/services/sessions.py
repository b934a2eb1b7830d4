"""Session memory writes: append a message to an agent's session log."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from core.vocabulary import Classification, Scope
from memory import enforcement
from memory.enforcement import MemoryAccess
from memory.models import SessionMessage
from memory.pii import detect_personal_data
from memory.text import ContentError, check_content, check_metadata


def session_message_append(
    *,
    access: MemoryAccess,
    session_id: str,
    role: str,
    content: str,
    user_id: str | None = None,
    classification: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> SessionMessage:
    """Append one message; the same policy rules as any memory write apply."""
    try:
        text = check_content(content)
    except ContentError as exc:
        raise InvalidInput("Invalid input: content.", details={"fields": {"content": [str(exc)]}}) from exc
    try:
        check_metadata(metadata or {})
    except ContentError as exc:
        raise InvalidInput("Invalid input: metadata.", details={"fields": {"metadata": [str(exc)]}}) from exc
    level = Classification.from_name(classification) if classification else Classification.INTERNAL
    enforcement.check_write(access, scope=Scope.SESSION, classification=level)
    finding = detect_personal_data([text])[0]
    enforcement.check_personal_data(access, personal_data=finding.personal_data, types=finding.types)
    days = enforcement.effective_retention_days(access, None)
    with transaction.atomic():
        return SessionMessage.objects.create(
            tenant_id=access.tenant_id,
            agent=access.agent,
            session_id=session_id,
            user_id=user_id if user_id is not None else access.default_user_id,
            role=SessionMessage.Role(role),
            content=text,
            classification=level,
            personal_data=finding.personal_data,
            personal_data_types=list(finding.types),
            metadata=metadata or {},
            retention_until=timezone.now() + timedelta(days=days) if days else None,
            legal_hold=access.policy.legal_hold,
        )
