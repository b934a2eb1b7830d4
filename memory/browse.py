"""Console reads of the builtin memory: what one console user may see, listed,
searched, opened and drawn as a graph.

A console user reads memory through the agents they may view
(``governance.selectors.agents_for(user, viewer)``), each agent through its own
policy (:func:`memory.enforcement.visible_q`): the visible set is the union of
those conditions, always inside the active tenant. Nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import EntityNotFound, MemoryNotFound
from governance.models import Agent, Tenant
from governance.models.agents import AgentPermission
from governance.selectors import agents_for, as_uuid, memory_policies_for_tenant
from memory.enforcement import Actor, Keys, MemoryAccess
from memory.models import CausalEdge, Entity, MemoryHistory, MemoryItem, Mention, Supersession
from memory.readers import MemoryReader
from memory.reasoning import graph
from memory.retrieval.hybrid import RecallQuery, keyword_query, retrieve
from memory.selectors import HEAVY_FIELDS

PAGE_SIZE = 50
SEARCH_TOP_K = 50
VALIDITY = ("current", "superseded", "all")


# The console's reader is the read model every surface uses (memory.readers).
Reader = MemoryReader


def console_reader(user: Any, tenant: Tenant) -> MemoryReader:
    """Three queries: the viewable agents, and the tenant's policies in force."""
    agents = tuple(agents_for(user, AgentPermission.VIEWER, tenant=tenant).order_by("name"))
    policies = memory_policies_for_tenant(tenant) if agents else {}
    actor = Actor("user", str(user.pk), user.get_username())
    accesses = tuple(
        MemoryAccess(agent=a, policy=policies[a.pk], actor=actor, default_user_id=user.get_username())
        for a in agents
    )
    return MemoryReader(tenant_id=tenant.pk, accesses=accesses, lenient=True)


# --- listing and search -------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    agent: Agent | None = None
    scope: str = ""
    kind: str = ""
    classification: int | None = None
    session: str = ""
    validity: str = "current"
    as_of: datetime | None = None
    q: str = ""
    mode: str = "text"  # text (full-text filter, paginated) | semantic (ranked, top 50)


def _visible(reader: Reader, f: Filters) -> Q:
    include_superseded = f.validity != "current"
    q = reader.q(at=f.as_of, include_superseded=include_superseded)
    if f.validity == "superseded":
        q &= Q(invalid_at__lte=f.as_of or timezone.now())
    if f.agent is not None:
        q &= Q(agent_id=f.agent.pk)
    if f.scope:
        q &= Q(scopes__contains=[f.scope])
    if f.kind:
        q &= Q(kind=f.kind)
    if f.classification is not None:
        q &= Q(classification=f.classification)
    if f.session:
        q &= Q(session_id=f.session)
    return q


def encode_cursor(item: MemoryItem) -> str:
    raw = f"{item.created_at.isoformat()}|{item.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: str) -> tuple[datetime, Any] | None:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        stamp, _, pk = raw.partition("|")
        at, uid = parse_datetime(stamp), as_uuid(pk)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return (at, uid) if at is not None and uid is not None else None


@dataclass
class Page:
    items: list[MemoryItem]
    next_cursor: str | None = None
    prev_cursor: str | None = None
    ranked: bool = False
    scores: dict[Any, float] = field(default_factory=dict)


def memory_page(reader: Reader, f: Filters, *, after: str | None = None, before: str | None = None) -> Page:
    """One page, newest first, by keyset on (created_at, id): a page costs the same
    on the first and the thousandth page. A semantic search is ranked (top 50)."""
    visible = _visible(reader, f)
    if f.q and f.mode == "semantic":
        return _ranked(reader, f, visible)
    qs = MemoryItem.objects.filter(visible).select_related("agent").defer(*HEAVY_FIELDS)
    if f.q:
        tsquery = keyword_query(f.q, require_all=True)
        qs = qs.filter(search_vector=tsquery) if tsquery is not None else qs.none()
    backwards = False
    if after and (cursor := decode_cursor(after)):
        at, pk = cursor
        qs = qs.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=pk))
    elif before and (cursor := decode_cursor(before)):
        at, pk = cursor
        qs = qs.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=pk))
        backwards = True
    order = ("created_at", "id") if backwards else ("-created_at", "-id")
    rows = list(qs.order_by(*order)[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    if backwards:
        rows.reverse()
    page = Page(items=rows)
    if rows:
        if more or backwards:
            page.next_cursor = encode_cursor(rows[-1])
        if (more and backwards) or (after and not backwards):
            page.prev_cursor = encode_cursor(rows[0])
    return page


def _ranked(reader: Reader, f: Filters, visible: Q) -> Page:
    if not reader.accesses:
        return Page(items=[], ranked=True)
    rq = RecallQuery(
        query=f.q,
        scopes=(),
        keys=Keys(),
        top_k=SEARCH_TOP_K,
        mode="hybrid",
        as_of=f.as_of,
        include_superseded=f.validity != "current",
    )
    hits = retrieve(reader.accesses[0], rq, visible=visible)
    agents = {a.pk: a for a in reader.agents}
    missing = {h.item.agent_id for h in hits} - set(agents)
    agents.update({a.pk: a for a in Agent.objects.filter(pk__in=missing)})
    for hit in hits:
        hit.item.agent = agents[hit.item.agent_id]
    return Page(items=[h.item for h in hits], ranked=True, scores={h.item.pk: h.score for h in hits})


# --- one item -----------------------------------------------------------------------


def item_get(reader: Reader, item_id: Any) -> MemoryItem:
    """A visible item, retired ones included; anything else is the same 404."""
    pk = as_uuid(item_id)
    item = None
    if pk is not None:
        item = (
            MemoryItem.objects.filter(reader.q(include_superseded=True), pk=pk)
            .select_related("agent")
            .defer(*HEAVY_FIELDS)
            .first()
        )
    if item is None:
        raise MemoryNotFound("Memory not found.")
    return item


@dataclass
class ItemDetail:
    item: MemoryItem
    history: list[MemoryHistory]
    supersedes: list[Supersession]
    superseded_by: list[Supersession]
    edges: list[CausalEdge]
    mentions: list[Mention]


def item_detail(reader: Reader, item_id: Any) -> ItemDetail:
    item = item_get(reader, item_id)
    visible_ids = MemoryItem.objects.filter(reader.q(include_superseded=True)).values("pk")
    links = Supersession.objects.select_related("old_item", "new_item").defer(
        "old_item__embedding", "old_item__search_vector", "new_item__embedding", "new_item__search_vector"
    )
    return ItemDetail(
        item=item,
        history=list(MemoryHistory.objects.filter(tenant_id=reader.tenant_id, item_id=item.pk)),
        supersedes=list(links.filter(new_item=item, old_item__in=visible_ids)),
        superseded_by=list(links.filter(old_item=item, new_item__in=visible_ids)),
        edges=list(CausalEdge.objects.filter(tenant_id=reader.tenant_id, item=item).order_by("id")),
        mentions=list(
            Mention.objects.filter(tenant_id=reader.tenant_id, item=item)
            .select_related("entity")
            .order_by("start")
        ),
    )


# --- dashboard ----------------------------------------------------------------------


@dataclass
class Overview:
    counts: list[dict[str, Any]]  # per agent: {"agent", "total", "by_kind": {kind: n}}
    kinds: list[str]
    pending: int
    failed: int
    oldest_pending: datetime | None
    failures: list[MemoryItem]
    activity: list[tuple[MemoryHistory, MemoryItem | None]]


def overview(reader: Reader, *, activity: int = 12, failures: int = 8) -> Overview:
    """Counts per agent and kind (current items), the extraction queue and its
    failures, and the latest memory events of the agents the user may view."""
    visible = reader.q()
    rows = MemoryItem.objects.filter(visible).values("agent_id", "kind").annotate(n=Count("id")).order_by()
    per_agent: dict[Any, dict[str, int]] = {}
    for row in rows:
        per_agent.setdefault(row["agent_id"], {})[row["kind"]] = row["n"]
    names = {a.pk: a for a in reader.agents}
    kinds = sorted({k for counts in per_agent.values() for k in counts})
    counts = [
        {"agent": names.get(agent_id), "agent_id": agent_id, "total": sum(c.values()), "by_kind": c}
        for agent_id, c in per_agent.items()
    ]
    counts.sort(key=lambda r: (-r["total"], str(r["agent"] or "")))
    queue = MemoryItem.objects.filter(visible).exclude(extraction_status=MemoryItem.Extraction.DONE)
    stats = queue.aggregate(
        pending=Count("id", filter=Q(extraction_status=MemoryItem.Extraction.PENDING)),
        failed=Count("id", filter=Q(extraction_status=MemoryItem.Extraction.FAILED)),
    )
    oldest = (
        queue.filter(extraction_status=MemoryItem.Extraction.PENDING)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    failed_items = list(
        queue.filter(extraction_status=MemoryItem.Extraction.FAILED)
        .select_related("agent")
        .defer(*HEAVY_FIELDS)
        .order_by("-updated_at")[:failures]
    )
    events = list(
        MemoryHistory.objects.filter(
            tenant_id=reader.tenant_id, agent_id__in=[a.pk for a in reader.agents]
        ).order_by("-created_at", "-id")[:activity]
    )
    shown = {
        i.pk: i
        for i in MemoryItem.objects.filter(
            reader.q(include_superseded=True), pk__in=[e.item_id for e in events]
        ).only("id", "content", "invalid_at")
    }
    return Overview(
        counts=counts,
        kinds=kinds,
        pending=stats["pending"],
        failed=stats["failed"],
        oldest_pending=oldest,
        failures=failed_items,
        activity=[(e, shown.get(e.item_id)) for e in events],
    )


# --- graph --------------------------------------------------------------------------

NEIGHBOURS_PER_ENTITY = 8
ENTITY_ITEMS = 25
QUERY_SEEDS = 8


@dataclass
class Elements:
    """Cytoscape elements, keyed so that expanding twice never duplicates a node."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: dict[str, dict[str, Any]] = field(default_factory=dict)

    def item(self, item: MemoryItem, at: datetime, *, focus: bool = False) -> str:
        key = f"i:{item.pk}"
        current = item.valid_from <= at and (item.invalid_at is None or item.invalid_at > at)
        node = self.nodes.setdefault(
            key,
            {
                "id": key,
                "type": "item",
                "item_id": str(item.pk),
                "label": item.content[:60] + ("…" if len(item.content) > 60 else ""),
                "content": item.content,
                "kind": item.kind,
                "session_id": item.session_id,
                "valid_from": item.valid_from.isoformat(),
                "invalid_at": item.invalid_at.isoformat() if item.invalid_at else None,
                "current": current,
            },
        )
        if focus:
            node["focus"] = True
        return key

    def entity(self, entity: Entity, *, focus: bool = False) -> str:
        key = f"e:{entity.pk}"
        node = self.nodes.setdefault(
            key,
            {"id": key, "type": "entity", "entity_id": entity.pk, "label": entity.name, "ner": entity.label},
        )
        if focus:
            node["focus"] = True
        return key

    def edge(self, kind: str, source: str, target: str, **data: Any) -> None:
        key = f"{kind}:{source}->{target}"
        self.edges.setdefault(key, {"id": key, "type": kind, "source": source, "target": target, **data})

    def as_json(self, focus: str | None, at: datetime) -> dict[str, Any]:
        return {
            "focus": focus,
            "as_of": at.isoformat(),
            "nodes": list(self.nodes.values()),
            "edges": list(self.edges.values()),
        }


def _items(qs: QuerySet[MemoryItem]) -> QuerySet[MemoryItem]:
    return qs.only("id", "content", "kind", "session_id", "valid_from", "invalid_at", "agent_id")


def _around_items(reader: Reader, seeds: list[MemoryItem], out: Elements, at: datetime) -> None:
    """Entities the seeds mention (and who else mentions them), causal continuations
    both ways, and supersession links: every neighbour is a visible item."""
    view = reader.view(include_superseded=True)
    visible = view.items()
    seed_ids = [s.pk for s in seeds]
    tenant = reader.tenant_id
    mentions = list(
        Mention.objects.filter(tenant_id=tenant, item_id__in=seed_ids).select_related("entity").order_by("id")
    )
    entity_ids = sorted({m.entity_id for m in mentions})
    for m in mentions:
        out.edge("mention", f"i:{m.item_id}", out.entity(m.entity), text=m.text)
    if entity_ids:
        others = (
            Mention.objects.filter(
                tenant_id=tenant, entity_id__in=entity_ids, item_id__in=visible.values("pk")
            )
            .exclude(item_id__in=seed_ids)
            .order_by("entity_id", "-id")
        )
        picked: dict[int, list[Mention]] = {}
        for m in others[: NEIGHBOURS_PER_ENTITY * len(entity_ids) * 2]:
            bucket = picked.setdefault(m.entity_id, [])
            if len(bucket) < NEIGHBOURS_PER_ENTITY:
                bucket.append(m)
        wanted = {m.item_id for bucket in picked.values() for m in bucket}
        rows = {i.pk: i for i in _items(visible.filter(pk__in=wanted))}
        for bucket in picked.values():
            for m in bucket:
                if m.item_id in rows:
                    out.item(rows[m.item_id], at)
                    out.edge("mention", f"i:{m.item_id}", f"e:{m.entity_id}", text=m.text)
    # Causal: one item's effect is another's cause (span linking, as trace does).
    # The span links stored at extraction, read for all the seeds' edges at once.
    linked: list[tuple[Any, Any, bool]] = []
    seed_edges = {e.pk: e for e in view.edges_of(seed_ids)}
    for direction, forward in ((graph.EFFECTS, True), (graph.CAUSES, False)):
        for source, other, _score in view.links(list(seed_edges), direction, per_edge=6):
            if other.pk != source:
                linked.append((seed_edges[source], other, forward))
    rows = {i.pk: i for i in _items(visible.filter(pk__in={o.item_id for _, o, _ in linked}))}
    for edge, other, forward in linked:
        if other.item_id not in rows or other.item_id == edge.item_id:
            continue
        out.item(rows[other.item_id], at)
        a, b = (edge, other) if forward else (other, edge)
        out.edge("causes", f"i:{a.item_id}", f"i:{b.item_id}", label=a.cue, cause=a.effect, effect=b.cause)
    # Supersession, new -> old, both directions from the seeds.
    records = Supersession.objects.filter(
        Q(old_item_id__in=seed_ids) | Q(new_item_id__in=seed_ids), tenant_id=tenant
    )
    records = list(records.filter(old_item__in=visible.values("pk"), new_item__in=visible.values("pk")))
    ends = {r.old_item_id for r in records} | {r.new_item_id for r in records}
    rows = {i.pk: i for i in _items(visible.filter(pk__in=ends))}
    for r in records:
        out.item(rows[r.old_item_id], at)
        out.item(rows[r.new_item_id], at)
        out.edge(
            "supersedes",
            f"i:{r.new_item_id}",
            f"i:{r.old_item_id}",
            reason=r.reason,
            reverted=r.reverted_at is not None,
        )


def graph_around(
    reader: Reader,
    *,
    item_id: Any = None,
    entity_id: Any = None,
    query: str = "",
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """The neighbourhood of an item, an entity or a query, as cytoscape elements.
    Retired items are included with their validity interval and ``current`` at
    ``as_of`` (default now), so the console can grey out what was not current then."""
    at = as_of or timezone.now()
    out = Elements()
    focus: str | None = None
    visible = reader.view(include_superseded=True).items()
    if item_id is not None:
        item = _items(visible.filter(pk=as_uuid(item_id))).first() if as_uuid(item_id) else None
        if item is None:
            raise MemoryNotFound("Memory not found.")
        focus = out.item(item, at, focus=True)
        _around_items(reader, [item], out, at)
    elif entity_id is not None:
        entity = _visible_entity(reader, entity_id, visible)
        focus = out.entity(entity, focus=True)
        mentions = Mention.objects.filter(
            tenant_id=reader.tenant_id, entity=entity, item_id__in=visible.values("pk")
        ).order_by("-id")[:ENTITY_ITEMS]
        mentions = list(mentions)
        rows = {i.pk: i for i in _items(visible.filter(pk__in={m.item_id for m in mentions}))}
        for m in mentions:
            out.edge("mention", out.item(rows[m.item_id], at), focus, text=m.text)
    elif query:
        page = memory_page(reader, Filters(q=query, mode="semantic", validity="all"))
        seeds = page.items[:QUERY_SEEDS]
        for seed in seeds:
            out.item(seed, at, focus=True)
        if seeds:
            _around_items(reader, seeds, out, at)
    return out.as_json(focus, at)


def _visible_entity(reader: Reader, entity_id: Any, visible: QuerySet[MemoryItem]) -> Entity:
    """An entity of the tenant that at least one visible item mentions."""
    try:
        pk = int(entity_id)
    except (TypeError, ValueError):
        pk = None
    seen = Mention.objects.filter(entity_id=OuterRef("pk"), item_id__in=visible.values("pk"))
    entity = (
        Entity.objects.filter(tenant_id=reader.tenant_id, pk=pk)
        .filter(Exists(seen))
        .defer("embedding")
        .first()
        if pk is not None
        else None
    )
    if entity is None:
        raise EntityNotFound("Entity not found.")
    return entity


def time_bounds(data: dict[str, Any]) -> tuple[str | None, str | None]:
    """The earliest and latest moment the drawn items changed (the slider's range)."""
    stamps = [
        s for n in data["nodes"] if n["type"] == "item" for s in (n["valid_from"], n["invalid_at"]) if s
    ]
    return (min(stamps), max(stamps)) if stamps else (None, None)
