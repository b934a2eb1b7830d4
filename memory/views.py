"""Console pages of the builtin memory: browser, item detail, causal trace and
what-if, graph explorer (page + JSON), and the dashboard's memory overview.

Thin: parse with a form, call one selector of memory.browse or one operation of
memory.operations, render. Visibility always comes from memory.browse.console_reader (the agents the
user may view, each through its policy); a foreign or invisible id is a 404.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.errors import ApiError, NotFound, error_body
from core.htmx import render_page
from memory import browse
from memory.forms import BrowseForm, GraphForm, GraphWhyForm, TraceForm, WhatIfForm
from memory.operations import graph as ops
from memory.reasoning import graph

TRACE_MAX_VISITED = 100


def _reader(request: HttpRequest) -> browse.Reader:
    tenant = getattr(request, "tenant", None)
    if tenant is None:
        raise Http404("You are not a member of any tenant.")
    return browse.console_reader(request.user, tenant)


def _item_or_404(reader: browse.Reader, item_id: Any) -> Any:
    try:
        return browse.item_get(reader, item_id)
    except NotFound as exc:
        raise Http404 from exc


@login_required
@require_GET
def memories(request: HttpRequest) -> HttpResponse:
    reader = _reader(request)
    form = BrowseForm(request.GET or None, agents=reader.agents)
    status = 200
    page = browse.Page(items=[])
    filters = browse.Filters()
    if form.is_bound and not form.is_valid():
        status = 400
    else:
        data = form.cleaned_data if form.is_bound else {}
        filters = browse.Filters(
            agent=reader.agent(data["agent"]) if data.get("agent") else None,
            scope=data.get("scope") or "",
            kind=data.get("kind") or "",
            classification=data.get("classification"),
            session=data.get("session") or "",
            validity=data.get("validity") or "current",
            as_of=data.get("as_of"),
            q=data.get("q") or "",
            mode=data.get("mode") or "text",
        )
        page = browse.memory_page(
            reader, filters, after=request.GET.get("after"), before=request.GET.get("before")
        )
    query = request.GET.copy()
    for key in ("after", "before"):
        query.pop(key, None)
    context = {
        "form": form,
        "page": page,
        "filters": filters,
        "query": query.urlencode(),
        "has_agents": bool(reader.agents),
    }
    return render_page(
        request, "memory/memories.html", "memory/partials/memory_list.html", context, status=status
    )


@login_required
@require_GET
def memory_detail(request: HttpRequest, item_id: str) -> HttpResponse:
    reader = _reader(request)
    try:
        detail = browse.item_detail(reader, item_id)
    except NotFound as exc:
        raise Http404 from exc
    return render(request, "memory/memory_detail.html", {"d": detail, "item": detail.item})


@login_required
@require_GET
def memory_trace(request: HttpRequest, item_id: str) -> HttpResponse:
    """Causes or effects of one fact, drawn as a chain (the trace of memory.reasoning)."""
    reader = _reader(request)
    item = _item_or_404(reader, item_id)
    form = TraceForm(request.GET)
    status, result = 200, None
    if form.is_valid():
        data = form.cleaned_data
        # A retired fact traced "now" walks among retired facts too (else it has no chain);
        # with as_of, exactly what was current then.
        retired_now = data["as_of"] is None and item.invalid_at is not None
        request_ = ops.TraceRequest(
            direction=data["direction"] or graph.EFFECTS,
            item_id=item.pk,
            max_depth=data["max_depth"] or 5,
            max_visited=TRACE_MAX_VISITED,
            window=ops.Window(as_of=data["as_of"], include_superseded=retired_now),
        )
        try:
            result = ops.trace(reader, request_).body()
        except NotFound:
            result = None  # not current at as_of: nothing to follow then
    else:
        status = 400
    steps = result["chain"] if result else []
    context = {"item": item, "form": form, "result": result, "steps": steps}
    return render_page(
        request, "memory/memory_trace.html", "memory/partials/trace_chain.html", context, status=status
    )


@login_required
@require_GET
def memory_what_if(request: HttpRequest, item_id: str) -> HttpResponse:
    """What collapses if this fact were removed (hypothetical, nothing is written)."""
    reader = _reader(request)
    item = _item_or_404(reader, item_id)
    form = WhatIfForm(request.GET or None)
    status, result, origin = 200, None, ""
    if form.is_bound and not form.is_valid():
        status = 400
    else:
        data = form.cleaned_data if form.is_bound else {}
        direction = data.get("direction") or graph.EFFECTS
        origin = data.get("origin") or _default_origin(reader, item.pk)
        if origin:
            try:
                result = ops.what_if(
                    reader,
                    ops.WhatIfRequest(
                        item_id=item.pk,
                        origin=origin,
                        direction=direction,
                        max_depth=5,
                        max_visited=TRACE_MAX_VISITED,
                    ),
                ).body()
            except NotFound:
                result = None  # the fact is retired: nothing current depends on it
    context = {"item": item, "form": form, "result": result, "origin": origin}
    return render_page(
        request, "memory/memory_what_if.html", "memory/partials/what_if.html", context, status=status
    )


def _default_origin(reader: browse.Reader, item_id: Any) -> str:
    """The root cause of the fact's first edge: the natural start of its chain."""
    edge = reader.view().edges().filter(item_id=item_id).order_by("id").first()
    if edge is None:
        return ""
    try:
        traced = ops.trace(
            reader,
            ops.TraceRequest(
                direction=graph.CAUSES, item_id=item_id, max_depth=5, max_visited=TRACE_MAX_VISITED
            ),
        ).body()
    except NotFound:
        return edge.cause
    roots = traced["root_causes"]
    return roots[0]["span"] if roots else edge.cause


@login_required
@require_GET
def graph_page(request: HttpRequest) -> HttpResponse:
    reader = _reader(request)
    form = GraphForm(request.GET or None)
    status = 200 if not form.is_bound or form.is_valid() else 400
    context = {"form": form, "has_agents": bool(reader.agents), "agents": reader.agents}
    return render(request, "memory/graph.html", context, status=status)


@login_required
@require_GET
def graph_data(request: HttpRequest) -> JsonResponse:
    """Cytoscape elements around ?item=, ?entity= or ?q= (one of them), ``as_of`` optional."""
    reader = _reader(request)
    form = GraphForm(request.GET)
    if not form.is_valid():
        fields = {name: [str(e) for e in errors] for name, errors in form.errors.items()}
        return JsonResponse(error_body("validation_error", "Invalid input.", {"fields": fields}), status=400)
    data = form.cleaned_data
    given = [name for name in ("item", "entity", "q") if data.get(name)]
    if len(given) != 1:
        return JsonResponse(
            error_body(
                "validation_error",
                "Give exactly one of item, entity or q.",
                {"fields": {"item": ["Give exactly one of item, entity or q."]}},
            ),
            status=400,
        )
    try:
        elements = browse.graph_around(
            reader,
            item_id=data.get("item"),
            entity_id=data.get("entity"),
            query=data.get("q") or "",
            as_of=data.get("as_of"),
        )
    except ApiError as exc:
        return JsonResponse(error_body(exc.code, exc.message, exc.details), status=exc.status_code)
    start, end = browse.time_bounds(elements)
    elements["time_range"] = {"start": start, "end": end}
    return JsonResponse(elements)


@login_required
@require_GET
def graph_why(request: HttpRequest) -> HttpResponse:
    """Why each fact ranked for ?q= in one viewable agent's memory (?agent=): the
    retrieval core's signals, the bridge entities and causal links that reached it."""
    reader = _reader(request)
    form = GraphWhyForm(request.GET)
    if not form.is_valid():
        return render(request, "memory/partials/graph_why.html", {"form": form}, status=400)
    access = next((a for a in reader.accesses if a.agent.pk == form.cleaned_data["agent"]), None)
    if access is None:
        raise Http404("Agent not found.")
    found = ops.discover(access, ops.DiscoverRequest(query=form.cleaned_data["q"], max_results=10))
    context = {"form": form, "agent": access.agent, "results": found.results}
    return render(request, "memory/partials/graph_why.html", context)


@login_required
@require_GET
def dashboard_memory(request: HttpRequest) -> HttpResponse:
    """The dashboard's memory panel, loaded after the page (it counts whole tables)."""
    reader = _reader(request)
    return render(request, "memory/partials/dashboard_memory.html", {"o": browse.overview(reader)})
