/* distea impact report: draws the swimlane timeline from the JSON island.
 *
 * The data (distea/report/model.py) already says everything: lanes, method
 * executions with happens-before times t0/t1, message edges, explanation
 * chains. This script only lays out what is visible — x is the rank of a
 * time among the times shown (one axis for every lane, drawn on top), y is
 * the lane, bars are packed into rows (the query and impacted methods first,
 * at most MAX_ROWS rows per lane until the lane is expanded) — draws it as
 * SVG, and wires the filter, toggles and the explanation panel.
 *
 * Readability at a thousand messages: messages are drawn under the bars,
 * and those between the same two lanes that start and end within a few
 * pixels of each other are one line, as thick as it is many (its tooltip
 * counts them); the receive where the impact arrives is always its own line.
 * No dependencies; sets body[data-ready] when done (and body[data-error] if
 * anything throws).
 */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var HEAD_H = 46, AXIS_Y = 14, ROW_H = 18, BAR_H = 14, COLLAPSED_H = 46, PAD_X = 24;
  var TOP_AXIS_H = 24, MAX_ROWS = 8, BUNDLE_PX = 24, TICK_PX = 110;

  var data = JSON.parse(document.getElementById("distea-data").textContent);
  var lanes = data.lanes, nodes = data.nodes, methods = data.methods, edges = data.edges;
  var state = {
    hideOther: false, byModule: false, allMessages: false, filter: "", zoom: 1,
    collapsed: {}, allRows: {}, selected: null
  };
  // big runs start tidy: lanes the impact never reaches are collapsed, methods grouped
  if (lanes.length > 12) {
    lanes.forEach(function (l) { if (!l.impacted) state.collapsed[l.index] = true; });
  }
  if (nodes.length > 400) state.byModule = true;

  var byLane = lanes.map(function () { return []; });
  nodes.forEach(function (n, i) { n.id = i; byLane[n.lane].push(n); });

  var wrap = document.getElementById("timeline");
  var panel = document.getElementById("panel");
  var measureCtx = document.createElement("canvas").getContext("2d");
  var widthCache = {};
  function textWidth(s) {
    var w = widthCache[s];
    if (w === undefined) {
      measureCtx.font = "600 11px system-ui, sans-serif";
      w = widthCache[s] = Math.ceil(measureCtx.measureText(s).width);
    }
    return w;
  }

  function el(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function h(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : (many || one + "s")); }
  function laneLabel(l) { return l.pid === null ? l.role : l.role + " (pid " + l.pid + ")"; }
  /* The lane's bold name: its role, its rank, and its pid where another lane has the same role. */
  function laneName(l) {
    var name = l.rank !== null && l.role.indexOf("rank") < 0
      ? shortRole(l.role) + " · rank " + l.rank + (l.world_size ? "/" + l.world_size : "") : shortRole(l.role);
    return l.twin && l.pid !== null ? name + " · pid " + l.pid : name;
  }
  /* Long dotted roles (module names) keep their informative tail: "…param_server.worker". */
  function shortRole(role) {
    if (role.length <= 26) return role;
    var parts = role.split("."), out = parts.pop();
    while (parts.length && out.length + parts[parts.length - 1].length < 24) out = parts.pop() + "." + out;
    return "…" + out;
  }
  /* Module-level code is "<module>" in every module: say which. */
  function barLabel(m) { return m.short === "<module>" ? m.module.split(".").pop() + ".<module>" : m.short; }
  function nodeClass(n) { return n.query ? "query" : n.impacted ? "impacted" : "other"; }

  /* What each lane shows: executions, or one aggregate per module. */
  function items(lane) {
    var list = byLane[lane.index].filter(function (n) {
      return !state.hideOther || n.impacted || n.query;
    });
    if (!state.byModule) {
      return list.map(function (n) {
        return { label: barLabel(methods[n.method]), name: methods[n.method].name, t0: n.t0, t1: n.t1,
                 cls: nodeClass(n), members: [n], node: n };
      });
    }
    var groups = {}, order = [];
    list.forEach(function (n) {
      var mod = methods[n.method].module;
      var g = groups[mod];
      if (!g) { g = groups[mod] = { module: mod, t0: n.t0, t1: n.t1, members: [] }; order.push(g); }
      g.t0 = Math.min(g.t0, n.t0); g.t1 = Math.max(g.t1, n.t1); g.members.push(n);
    });
    return order.map(function (g) {
      var imp = g.members.filter(function (n) { return n.impacted; }).length;
      var q = g.members.some(function (n) { return n.query; });
      return { label: g.module + "  " + imp + "/" + g.members.length, name: g.module, t0: g.t0,
               t1: g.t1, cls: q ? "query" : imp ? "impacted" : "other", members: g.members,
               node: null };
    });
  }

  function matches(item) {
    if (!state.filter) return false;
    return item.members.some(function (n) {
      return methods[n.method].name.toLowerCase().indexOf(state.filter) >= 0;
    });
  }
  function laneMatches(l) {
    return !!state.filter && (laneLabel(l) + " " + l.host).toLowerCase().indexOf(state.filter) >= 0;
  }

  var layout = null;

  function rank(it) { return it.cls === "query" ? 0 : it.cls === "impacted" ? 1 : 2; }
  function overlaps(spans, a, b) {
    for (var i = 0; i < spans.length; i++) if (spans[i][0] < b && a < spans[i][1]) return true;
    return false;
  }

  /* Messages between the same two lanes, starting and ending within BUNDLE_PX of each other,
     become one line; the impact's arrival is never bundled away. */
  function bundle(list, xOf) {
    var out = [], byKey = {};
    list.forEach(function (e) {
      var x1 = xOf(e.src_t), x2 = xOf(e.dst_t);
      var k = e.arrival ? null : [e.src, e.dst, e.carries ? 1 : 0, e.ambiguous ? 1 : 0,
                                  Math.round(x1 / BUNDLE_PX), Math.round(x2 / BUNDLE_PX)].join("|");
      var b = k === null ? null : byKey[k];
      if (!b) {
        b = { e: e, x1: x1, x2: x2, n: 0, channels: {} };
        out.push(b);
        if (k !== null) byKey[k] = b;
      }
      b.n++;
      b.channels[e.channel] = 1;
    });
    return out;
  }
  function draw() {
    var visibleEdges = edges.filter(function (e) { return e.carries || state.allMessages; });
    var perLane = lanes.map(function (l) { return state.collapsed[l.index] ? [] : items(l); });

    // x: rank of each time among the times shown (happens-before order, no gaps)
    var tset = {};
    perLane.forEach(function (its) { its.forEach(function (it) { tset[it.t0] = 1; tset[it.t1] = 1; }); });
    visibleEdges.forEach(function (e) { tset[e.src_t] = 1; tset[e.dst_t] = 1; });
    lanes.forEach(function (l) { if (l.start_t !== null) tset[l.start_t] = 1; });
    var times = Object.keys(tset).map(Number).sort(function (a, b) { return a - b; });
    var avail = Math.max(400, wrap.clientWidth - 250 - 2 * PAD_X - 110);
    var step = Math.max(3, Math.min(48, avail / Math.max(1, times.length))) * state.zoom;
    var index = {};
    times.forEach(function (t, i) { index[t] = i; });
    function xOf(t) {
      if (index[t] !== undefined) return PAD_X + index[t] * step;
      var lo = 0, hi = times.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (times[mid] < t) lo = mid + 1; else hi = mid; }
      return PAD_X + (lo - 0.5) * step;
    }

    // rows: bars and their labels packed per lane, the query and impacted methods first; the
    // not-impacted ones fill rows up to MAX_ROWS (the rest wait for a click), the impact never waits
    var maxX = PAD_X + times.length * step;
    var ys = [], y = TOP_AXIS_H;
    lanes.forEach(function (l, li) {
      var rows = [], hidden = 0, cap = state.allRows[l.index] ? Infinity : MAX_ROWS;
      var order = perLane[li].slice().sort(function (a, b) {
        return rank(a) - rank(b) || a.t0 - b.t0;
      });
      order.forEach(function (it) {
        it.x0 = xOf(it.t0);
        it.x1 = Math.max(it.x0 + 6, xOf(it.t1));
        var tw = textWidth(it.label) + 10;
        it.inside = it.x1 - it.x0 >= tw;
        var end = it.inside ? it.x1 : it.x1 + tw;
        var r = 0;
        while (r < rows.length && overlaps(rows[r], it.x0 - 4, end)) r++;
        if (r >= cap && rank(it) === 2) { it.row = -1; hidden++; return; }  // never hide the impact
        (rows[r] = rows[r] || []).push([it.x0 - 4, end]);
        it.row = r;
        maxX = Math.max(maxX, end);
      });
      perLane[li] = perLane[li].filter(function (it) { return it.row >= 0; });
      var extra = hidden ? ROW_H : 0;
      var hgt = state.collapsed[l.index] ? COLLAPSED_H : Math.max(HEAD_H, 28 + rows.length * ROW_H + 8 + extra);
      ys.push({ top: y, height: hgt, rows: rows.length, hidden: hidden });
      y += hgt;
    });
    var width = Math.max(Math.ceil(maxX + PAD_X), wrap.clientWidth - 250), height = y;
    layout = { xOf: xOf, ys: ys, perLane: perLane, width: width };

    var grid = h("div", { "class": "timeline" });
    var heads = h("div", { "class": "lane-heads" });
    var axisHead = h("div", { "class": "axis-head", title: "Lamport time of the recorded happens-before order: one axis for every lane" },
                     "happens-before time →");
    axisHead.style.height = TOP_AXIS_H + "px";
    heads.appendChild(axisHead);
    grid.appendChild(heads);
    var svg = el("svg", { "class": "lanes", width: width, height: height, viewBox: "0 0 " + width + " " + height,
                          role: "img", "aria-label": "process swimlanes" });
    grid.appendChild(svg);

    var back = el("g", {}, svg);
    drawTopAxis(svg, times, xOf, width, height);
    var edgeLayer = el("g", { "class": "edges" + (state.selected ? " dim" : "") }, svg);
    var nodeLayer = el("g", { "class": "nodes" }, svg);
    el("g", { id: "chain-overlay" }, svg);

    var drawnNodes = 0, matchCount = 0, matchLanes = 0;
    lanes.forEach(function (l, li) {
      var box = ys[li], axis = box.top + AXIS_Y;
      var collapsed = !!state.collapsed[l.index];
      // header
      var head = h("div", { "class": "lane-head" + (l.start !== null ? " reached" : "") +
                            (l.complete ? "" : " incomplete") + (laneMatches(l) ? " match" : ""),
                            "data-lane": String(l.index), title: l.key });
      head.style.height = box.height + "px";
      var role = h("div", { "class": "role" });
      role.appendChild(h("span", { "class": "twisty" }, collapsed ? "▸" : "▾"));
      role.appendChild(document.createTextNode(laneName(l)));
      role.title = laneLabel(l);
      head.appendChild(role);
      head.appendChild(h("div", { "class": "proc" },
        [l.pid === null ? "" : "pid " + l.pid, l.host].filter(Boolean).join(" · ")));
      var counts = h("div", { "class": "counts" });
      counts.appendChild(h("span", { "class": "lane-count" }, l.impacted + "/" + l.methods));
      var mini = h("span", { "class": "mini" });
      var fill = h("span");
      fill.style.width = (l.methods ? 100 * l.impacted / l.methods : 0) + "%";
      mini.appendChild(fill);
      counts.appendChild(mini);
      counts.appendChild(h("span", { "class": "sub" }, "impacted"));
      head.appendChild(counts);
      head.addEventListener("click", function () {
        state.collapsed[l.index] = !state.collapsed[l.index]; redraw();
      });
      heads.appendChild(head);

      // background, impact region, axis
      el("rect", { "class": "lane-bg" + (li % 2 ? " odd" : ""), x: 0, y: box.top, width: width, height: box.height }, back);
      if (l.start_t !== null) {
        var sx = xOf(l.start_t);
        el("rect", { "class": "region", x: sx, y: box.top, width: Math.max(0, width - sx), height: box.height }, back);
        el("line", { "class": "start-line", x1: sx, x2: sx, y1: box.top + 2, y2: box.top + box.height - 2 }, back);
        var lbl = el("text", { "class": "start-label", x: sx + 4, y: box.top + AXIS_Y - 4 }, back);
        lbl.textContent = "impact arrives (t " + l.start_t + ")";
      }
      el("line", { "class": "axis", x1: PAD_X / 2, x2: width - PAD_X / 2, y1: axis, y2: axis }, back);
      el("line", { "class": "lane-sep", x1: 0, x2: width, y1: box.top + box.height - 0.5, y2: box.top + box.height - 0.5 }, back);
      if (collapsed) {
        var note = el("text", { "class": "collapsed-note", x: PAD_X, y: axis + 20 }, back);
        note.textContent = l.methods + " methods, " + l.impacted + " impacted (collapsed: click the lane name)";
      } else if (box.hidden) {
        var more = el("text", { "class": "more-rows", x: PAD_X, y: box.top + box.height - 10 }, back);
        more.textContent = "+ " + box.hidden + " more not-impacted method" + (box.hidden === 1 ? "" : "s") +
                           " (click to show every row)";
        more.addEventListener("click", function () { state.allRows[l.index] = true; redraw(); });
      }
      if (laneMatches(l)) matchLanes++;

      // bars
      layout.perLane[li].forEach(function (it) {
        var isMatch = matches(it);
        if (isMatch) matchCount += it.members.length;
        var cls = "node " + it.cls + (state.filter ? (isMatch ? " match" : " faded") : "") +
                  (state.selected && state.selected.item && state.selected.key === key(it) ? " selected" : "");
        var g = el("g", { "class": cls, "data-method": it.name, "data-lane": String(l.index),
                          "data-kind": it.node ? "method" : "module" }, nodeLayer);
        var by = box.top + 28 + it.row * ROW_H;
        el("rect", { x: it.x0, y: by, width: it.x1 - it.x0, height: BAR_H }, g);
        var t = el("text", { "class": it.inside ? "in" : "out", x: it.inside ? it.x0 + 5 : it.x1 + 4, y: by + 11 }, g);
        t.textContent = it.label;
        var tip = el("title", {}, g);
        tip.textContent = it.name + (it.node ? "  [clocks " + it.node.first + "–" + it.node.last + "]" : "");
        g.addEventListener("click", function (ev) { ev.stopPropagation(); select(it); });
        it.g = g;
        drawnNodes++;
      });
    });

    // messages: a curve from the send on one lane's axis to the receive on another's
    var bundles = bundle(visibleEdges, xOf);
    bundles.forEach(function (b) {
      var e = b.e, x1 = b.x1, y1 = ys[e.src].top + AXIS_Y, x2 = b.x2, y2 = ys[e.dst].top + AXIS_Y;
      var dx = Math.max(12, (x2 - x1) / 2);
      var cls = "edge" + (e.carries ? " carries" : "") + (e.arrival ? " arrival" : "") + (e.ambiguous ? " ambiguous" : "") +
                (b.n > 1 ? " bundle" : "");
      var p = el("path", { "class": cls, d: "M" + x1 + "," + y1 + " C" + (x1 + dx) + "," + y1 + " " + (x2 - dx) + "," + y2 + " " + x2 + "," + y2,
                           "marker-end": e.carries ? "url(#arrow-hot)" : "url(#arrow)",
                           "data-src": String(e.src), "data-dst": String(e.dst), "data-count": String(b.n) }, edgeLayer);
      if (b.n > 1) p.style.strokeWidth = String(Math.min(6, 1.2 + Math.log2(b.n)));
      var tip = el("title", {}, p);
      tip.textContent = b.n > 1
        ? b.n + " messages, " + laneName(lanes[e.src]) + " → " + laneName(lanes[e.dst]) + "  (" + Object.keys(b.channels).slice(0, 3).join(", ") + ")"
        : e.channel + "  (clock " + e.src_clock + " → " + e.dst_clock + ")" + (e.ambiguous ? "  ambiguous pairing" : "");
      el("circle", { "class": "tick" + (e.carries ? " carries" : ""), cx: x1, cy: y1, r: 2.5 }, edgeLayer);
    });
    var defs = el("defs", {}, svg);
    [["arrow", "var(--edge-other)"], ["arrow-hot", "var(--edge)"]].forEach(function (a) {
      var mk = el("marker", { id: a[0], viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 8, markerHeight: 8,
                              markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
      el("path", { d: "M0,0 L8,4 L0,8 z", style: "fill:" + a[1] }, mk);
    });

    wrap.querySelectorAll(".timeline").forEach(function (old) { old.remove(); });
    wrap.appendChild(grid);
    wrap.dataset.nodes = String(drawnNodes);
    wrap.dataset.edges = String(visibleEdges.length);
    wrap.dataset.lines = String(bundles.length);

    var mc = document.getElementById("match-count");
    mc.textContent = state.filter ? plural(matchCount, "execution") + " match" + (matchLanes ? ", " + plural(matchLanes, "process", "processes") : "") : "";
    if (state.selected) drawChain(state.selected);
  }

  /* One axis over every lane: ticks about TICK_PX apart, labelled with the happens-before time. */
  function drawTopAxis(svg, times, xOf, width, height) {
    var g = el("g", { "class": "top-axis" }, svg);
    el("rect", { "class": "top-axis-bg", x: 0, y: 0, width: width, height: TOP_AXIS_H }, g);
    el("line", { "class": "axis", x1: PAD_X / 2, x2: width - PAD_X / 2, y1: TOP_AXIS_H - 1, y2: TOP_AXIS_H - 1 }, g);
    var last = -Infinity;
    times.forEach(function (t) {
      var x = xOf(t);
      if (x - last < TICK_PX) return;
      last = x;
      el("line", { "class": "tick-line", x1: x, x2: x, y1: TOP_AXIS_H - 5, y2: height }, g);
      var label = el("text", { "class": "tick-label", x: x + 3, y: TOP_AXIS_H - 8 }, g);
      label.textContent = "t " + t;
    });
  }

  function key(it) { return (it.node ? "n" + it.node.id : "m" + it.name + "@" + it.members[0].lane); }

  function redraw() {
    var sl = wrap.scrollLeft, st = wrap.scrollTop;
    draw();
    wrap.scrollLeft = sl; wrap.scrollTop = st;
  }

  /* The explanation chain as a path over the lanes: along a lane, then a message, ... */
  function drawChain(sel) {
    var overlay = document.getElementById("chain-overlay");
    while (overlay.firstChild) overlay.removeChild(overlay.firstChild);
    var n = sel.item && sel.item.node;
    if (!n || n.chain === null || n.chain === undefined) return;
    var steps = data.chains[n.chain].concat([{ lane: n.lane, t: Math.max(n.t1, lanes[n.lane].start_t || n.t1), action: "runs" }]);
    var d = "", prev = null;
    steps.forEach(function (s) {
      var x = layout.xOf(s.t), y = layout.ys[s.lane].top + AXIS_Y;
      if (!prev) d += "M" + x + "," + y;
      else if (prev.lane === s.lane) d += " L" + x + "," + y;
      else { var dx = Math.max(12, (x - prev.x) / 2); d += " C" + (prev.x + dx) + "," + prev.y + " " + (x - dx) + "," + y + " " + x + "," + y; }
      prev = { lane: s.lane, x: x, y: y };
      el("circle", { "class": "chain-dot", cx: x, cy: y, r: 4 }, overlay);
    });
    el("path", { "class": "chain-path", d: d }, overlay);
  }

  function select(it) {
    state.selected = { item: it, key: key(it) };
    redraw();
    showPanel(it);
  }

  function fact(dl, k, v, cls) { dl.appendChild(h("dt", {}, k)); dl.appendChild(h("dd", cls ? { "class": cls } : {}, v)); }

  function showPanel(it) {
    panel.innerHTML = "";
    var lane = lanes[it.members[0].lane];
    if (!it.node) {
      panel.appendChild(h("h2", {}, it.name));
      panel.appendChild(h("div", { "class": "fq" }, "module in " + laneLabel(lane)));
      var imp = it.members.filter(function (n) { return n.impacted; }).length;
      panel.appendChild(h("p", {}, imp + " of " + plural(it.members.length, "method") + " impacted. Click one for its explanation."));
      var ul = h("ul", { "class": "members" });
      it.members.forEach(function (n) {
        var li = h("li");
        var a = h("a", { "class": nodeClass(n) }, barLabel(methods[n.method]));
        a.addEventListener("click", function () {
          showPanel({ label: barLabel(methods[n.method]), name: methods[n.method].name, t0: n.t0, t1: n.t1,
                      cls: nodeClass(n), members: [n], node: n });
          state.selected = { item: { node: n }, key: "n" + n.id };
          drawChain(state.selected);
        });
        li.appendChild(a);
        ul.appendChild(li);
      });
      panel.appendChild(ul);
      return;
    }
    var n = it.node, m = methods[n.method];
    panel.appendChild(h("h2", {}, barLabel(m)));
    panel.appendChild(h("div", { "class": "fq" }, m.name));
    var cls = nodeClass(n);
    panel.appendChild(h("span", { "class": "badge " + cls, id: "panel-verdict" },
      cls === "query" ? "query method" : cls === "impacted" ? "impacted" : "not impacted"));
    var dl = h("dl", { "class": "facts" });
    fact(dl, "process", laneLabel(lane) + (lane.host ? " · " + lane.host : ""));
    if (m.file) fact(dl, "defined", m.file + ":" + m.line, "path");
    fact(dl, "first start", "clock " + n.first);
    fact(dl, "last executing", "clock " + n.last);
    fact(dl, "impact arrives", lane.start === null ? "never, in this process" : "clock " + lane.start);
    if (lane.distia_start !== null && lane.distia_start !== lane.start) fact(dl, "DistIA start", "clock " + lane.distia_start);
    panel.appendChild(dl);
    panel.appendChild(h("h3", {}, n.impacted ? "Why it is impacted" : "Why not"));
    panel.appendChild(h("p", { "class": "why" }, n.why || "No explanation was precomputed; run distea explain."));
    if (n.chain === null || n.chain === undefined) return;
    var ol = h("ol", { "class": "chain", id: "chain" });
    data.chains[n.chain].forEach(function (s) { ol.appendChild(step(s.action, s.lane, s.clock, s.method, s.detail)); });
    ol.appendChild(step("runs", n.lane, n.last, m.name,
      "executes at clock " + n.last + (lane.start !== null ? ", at or after the impact start " + lane.start : "")));
    panel.appendChild(ol);
  }

  var ACTIONS = { start: "query starts", send: "sends", recv: "receives", runs: "runs" };
  function step(action, laneIdx, clock, method, detail) {
    var li = h("li", { "data-action": action });
    li.appendChild(h("div", { "class": "act" }, ACTIONS[action] || action));
    li.appendChild(h("div", { "class": "where" }, laneLabel(lanes[laneIdx]) + " · clock " + clock));
    if (method) li.appendChild(h("code", {}, method));
    if (detail && action !== "start") li.appendChild(h("div", { "class": "sub" }, detail));
    return li;
  }

  function scrollToFirstMatch() {
    var hit = wrap.querySelector(".node.match");
    if (!hit) return;
    var r = hit.querySelector("rect");
    wrap.scrollLeft = Math.max(0, Number(r.getAttribute("x")) - 100);
    wrap.scrollTop = Math.max(0, Number(r.getAttribute("y")) - 60);
  }

  function bind(id, fn) { document.getElementById(id).addEventListener("change", fn); }
  /* State from the address: #filter=TEXT&hide=1&module=1&all=1&expand=1&select=METHOD[@PID]
     (links to a view; the tests drive the page this way too). */
  function hashParams() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("=");
      out[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? "1" : decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function hops(n) {
    var seen = {};
    data.chains[n.chain].forEach(function (s) { seen[s.lane] = 1; });
    seen[n.lane] = 1;
    return Object.keys(seen).length;
  }
  /* Reached only because a process ended (its exit seen by its parent): the least telling path. */
  function lifecycle(n) {
    var recvs = data.chains[n.chain].filter(function (s) { return s.action === "recv"; });
    var last = recvs[recvs.length - 1];
    return last && /^(exit|proc) /.test(last.detail) ? 1 : 0;
  }
  function anonymous(n) { return methods[n.method].short.indexOf("<") >= 0 ? 1 : 0; }

  function itemOf(n) {
    return layout.perLane[n.lane].filter(function (i) { return i.members.indexOf(n) >= 0; })[0];
  }

  function init() {
    var params = hashParams();
    var search = document.getElementById("search");
    if (params.filter) { search.value = params.filter; state.filter = params.filter.trim().toLowerCase(); }
    if ("hide" in params) state.hideOther = params.hide === "1";
    if ("module" in params) state.byModule = params.module === "1";
    if ("all" in params) state.allMessages = params.all === "1";
    if (params.expand === "1") { state.collapsed = {}; lanes.forEach(function (l) { state.allRows[l.index] = true; }); }
    var hide = document.getElementById("hide-other"), mod = document.getElementById("by-module");
    hide.checked = state.hideOther; mod.checked = state.byModule;
    document.getElementById("all-messages").checked = state.allMessages;
    bind("hide-other", function (e) { state.hideOther = e.target.checked; redraw(); });
    bind("by-module", function (e) { state.byModule = e.target.checked; state.selected = null; redraw(); });
    bind("all-messages", function (e) { state.allMessages = e.target.checked; redraw(); });
    search.addEventListener("input", function () { state.filter = search.value.trim().toLowerCase(); redraw(); });
    search.addEventListener("keydown", function (e) { if (e.key === "Enter") scrollToFirstMatch(); });
    document.getElementById("collapse-all").addEventListener("click", function () {
      lanes.forEach(function (l) { state.collapsed[l.index] = true; }); redraw();
    });
    document.getElementById("expand-all").addEventListener("click", function () {
      state.collapsed = {}; lanes.forEach(function (l) { state.allRows[l.index] = true; }); redraw();
    });
    document.getElementById("zoom-in").addEventListener("click", function () { state.zoom *= 1.5; redraw(); });
    document.getElementById("zoom-out").addEventListener("click", function () { state.zoom = Math.max(0.2, state.zoom / 1.5); redraw(); });
    var resizeTimer = null;
    window.addEventListener("resize", function () { clearTimeout(resizeTimer); resizeTimer = setTimeout(redraw, 150); });
    draw();

    var pick = null;
    if (params.select) {
      var at = params.select.lastIndexOf("@");
      var want = at > 0 ? params.select.slice(0, at) : params.select;
      var pid = at > 0 ? params.select.slice(at + 1) : null;
      pick = nodes.filter(function (n) {
        return methods[n.method].name === want && (pid === null || String(lanes[n.lane].pid) === pid);
      })[0] || null;
      if (pick && state.collapsed[pick.lane]) { delete state.collapsed[pick.lane]; draw(); }
    } else {
      // first, the query's farthest effect: the impacted method whose explanation crosses the
      // most processes, a named function rather than a lambda or module body, the latest
      pick = nodes.filter(function (n) { return n.impacted && !n.query && n.chain !== null; })
        .sort(function (a, b) {
          return lifecycle(a) - lifecycle(b) || hops(b) - hops(a) || anonymous(a) - anonymous(b) ||
                 data.chains[b.chain].length - data.chains[a.chain].length || b.t1 - a.t1 || a.id - b.id;
        })[0] || null;
    }
    var it = pick && itemOf(pick);
    if (it) {
      select(it);
      if (!it.node) {  // grouped by module: explain the method itself, not its module
        showPanel({ label: barLabel(methods[pick.method]), name: methods[pick.method].name,
                    t0: pick.t0, t1: pick.t1, cls: nodeClass(pick), members: [pick], node: pick });
        state.selected = { item: { node: pick }, key: "n" + pick.id };
        drawChain(state.selected);
      }
    }
    if (state.filter && params.select === undefined) scrollToFirstMatch();
    document.body.dataset.ready = "1";
    document.body.dataset.lanes = String(lanes.length);
  }

  try {
    init();
  } catch (err) {
    document.body.dataset.error = String(err && err.stack || err);
    throw err;
  }
})();
