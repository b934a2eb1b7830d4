/* Graph explorer: draws the JSON of console:graph-data with cytoscape.js.
 * Click a node to expand its neighbourhood; the as_of slider greys out facts that
 * were not current at the chosen moment (each fact carries its validity interval).
 * No inline handlers: everything is wired here from data-* attributes. */
(function () {
  "use strict";

  var box = document.getElementById("graph");
  if (!box || typeof cytoscape === "undefined") return;
  var statusEl = document.getElementById("graph-status");
  var selection = document.getElementById("graph-selection");
  var slider = document.getElementById("as-of-slider");
  var sliderOut = document.getElementById("as-of-value");
  var range = { start: null, end: null };
  var expanded = {};

  var cy = cytoscape({
    container: box,
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 10, "text-wrap": "wrap", "text-max-width": 140, "text-valign": "bottom", "text-margin-y": 3, color: "#1d2330" } },
      { selector: 'node[type = "item"]', style: { shape: "round-rectangle", "background-color": "#2f5bd3", width: 28, height: 20 } },
      { selector: 'node[type = "entity"]', style: { shape: "ellipse", "background-color": "#0f8a6a", width: 16, height: 16, "font-style": "italic" } },
      { selector: "node[?focus]", style: { "border-width": 3, "border-color": "#f59e0b" } },
      { selector: "edge", style: { width: 1.5, "curve-style": "bezier", "font-size": 8, color: "#5b6472" } },
      { selector: 'edge[type = "mention"]', style: { "line-style": "dashed", "line-color": "#9aa3b0" } },
      { selector: 'edge[type = "causes"]', style: { "line-color": "#b42318", "target-arrow-color": "#b42318", "target-arrow-shape": "triangle", width: 2.5, label: "data(label)" } },
      { selector: 'edge[type = "supersedes"]', style: { "line-style": "dotted", "line-color": "#7c3aed", "target-arrow-color": "#7c3aed", "target-arrow-shape": "vee", width: 2, label: "supersedes" } },
      { selector: ".stale", style: { opacity: 0.18 } },
      { selector: ":selected", style: { "overlay-color": "#f59e0b", "overlay-opacity": 0.25 } }
    ]
  });
  window.fedmemGraph = cy; // for tests and the curious: the live graph

  function say(text) { if (statusEl) statusEl.textContent = text; }

  function load(params) {
    var url = box.dataset.src + "?" + new URLSearchParams(params).toString();
    say("Loading…");
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
      .then(function (res) {
        if (!res.ok) { say(res.body.error ? res.body.error.message : "Could not load the graph."); return; }
        add(res.body);
      })
      .catch(function () { say("Could not load the graph."); });
  }

  function add(data) {
    var fresh = [];
    data.nodes.forEach(function (n) {
      if (cy.getElementById(n.id).empty()) fresh.push({ group: "nodes", data: n });
    });
    data.edges.forEach(function (e) {
      if (cy.getElementById(e.id).empty()) fresh.push({ group: "edges", data: e });
    });
    cy.add(fresh);
    widen(data.time_range);
    cy.layout({ name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true }).run();
    applyTime();
    listNodes();
    var facts = cy.nodes('[type = "item"]').length, ents = cy.nodes('[type = "entity"]').length;
    say(facts + " facts, " + ents + " entities, " + cy.edges().length + " links. Click a node to expand it.");
  }

  // The slider spans the earliest to the latest change among drawn facts, and now.
  function widen(tr) {
    var now = Date.now();
    if (tr && tr.start) {
      var s = Date.parse(tr.start);
      range.start = range.start === null ? s : Math.min(range.start, s);
    }
    range.end = now;
    if (range.start !== null) {
      slider.disabled = false;
      // Start a moment before the first fact so the left end shows an empty past.
      if (range.start >= range.end) range.start = range.end - 1000;
      // The slider's ends as instants, for assistive text and tests.
      slider.dataset.start = new Date(range.start - 1000).toISOString();
      slider.dataset.end = new Date(range.end).toISOString();
      slider.setAttribute("aria-valuetext", sliderOut.textContent);
    }
  }

  function sliderTime() {
    if (range.start === null || Number(slider.value) >= Number(slider.max)) return null;
    var span = range.end - (range.start - 1000);
    return range.start - 1000 + span * (Number(slider.value) / Number(slider.max));
  }

  function applyTime() {
    var t = sliderTime();
    var at = t === null ? Date.now() : t;
    sliderOut.textContent = t === null ? "now" : new Date(t).toISOString().replace("T", " ").slice(0, 19) + " UTC";
    box.dataset.asOf = t === null ? "" : new Date(t).toISOString();
    slider.setAttribute("aria-valuetext", sliderOut.textContent);
    cy.batch(function () {
      cy.nodes('[type = "item"]').forEach(function (n) {
        var from = Date.parse(n.data("valid_from"));
        var until = n.data("invalid_at") ? Date.parse(n.data("invalid_at")) : null;
        var current = from <= at && (until === null || until > at);
        n.toggleClass("stale", !current);
      });
      // An entity is current when a current fact mentions it; a link when both ends are.
      cy.nodes('[type = "entity"]').forEach(function (n) {
        var live = n.connectedEdges().connectedNodes('[type = "item"]').filter(function (m) { return !m.hasClass("stale"); });
        n.toggleClass("stale", live.empty());
      });
      cy.edges().forEach(function (e) {
        e.toggleClass("stale", e.source().hasClass("stale") || e.target().hasClass("stale"));
      });
    });
    box.dataset.stale = String(cy.elements(".stale").length);
  }

  slider.addEventListener("input", applyTime);

  function describe(node) {
    var d = node.data();
    selection.textContent = "";
    var h = document.createElement("h2");
    h.textContent = d.type === "item" ? "Fact" : "Entity";
    selection.appendChild(h);
    var p = document.createElement("p");
    p.textContent = d.type === "item" ? d.content : d.label + (d.ner ? " (" + d.ner + ")" : "");
    selection.appendChild(p);
    if (d.type === "item") {
      var meta = document.createElement("p");
      meta.className = "muted";
      meta.textContent = "valid " + d.valid_from.slice(0, 19) + " → " + (d.invalid_at ? d.invalid_at.slice(0, 19) : "now") + (d.session_id ? " · session " + d.session_id : "");
      selection.appendChild(meta);
      var a = document.createElement("a");
      a.href = box.dataset.detail + d.item_id + "/";
      a.textContent = "Open this memory";
      selection.appendChild(a);
    }
  }

  function expand(node) {
    describe(node);
    if (expanded[node.id()]) return;
    expanded[node.id()] = true;
    var d = node.data();
    load(d.type === "item" ? { item: d.item_id } : { entity: d.entity_id });
  }

  cy.on("tap", "node", function (evt) { expand(evt.target); });

  // The same nodes as buttons, for keyboards and screen readers.
  var list = document.getElementById("graph-nodes");
  function listNodes() {
    if (!list) return;
    list.textContent = "";
    cy.nodes().forEach(function (n) {
      var li = document.createElement("li");
      var b = document.createElement("button");
      b.type = "button";
      b.className = "link";
      b.textContent = (n.data("type") === "item" ? "Fact: " : "Entity: ") + n.data("label");
      b.addEventListener("click", function () { cy.$(":selected").unselect(); n.select(); expand(n); });
      li.appendChild(b);
      list.appendChild(li);
    });
  }

  var start = box.dataset.item ? { item: box.dataset.item }
    : box.dataset.entity ? { entity: box.dataset.entity }
    : box.dataset.q ? { q: box.dataset.q } : null;
  if (start) {
    if (start.item) expanded["i:" + start.item] = true;
    if (start.entity) expanded["e:" + start.entity] = true;
    load(start);
  }
})();
