// Runs side by side: each picked run's figure at every cell all of them measured, and its change from the
// reference (the first picked), grey where the change lies within the noise floor. The build wrote every figure's
// text and every floor (present/deltas.py: runs/ID/compare.js, floors/CONFIGURATION.js); this script only picks
// runs, loads their scripts, and tests each change against its floor's bounds.
(function () {
  "use strict";
  var index = window.SERVEBOOK_INDEX || [];
  var figures = window.SERVEBOOK_FIGURES || [];
  var store = window.SERVEBOOK_COMPARE = window.SERVEBOOK_COMPARE || {runs: {}, floors: {}};
  var LISTED = 200;  // checkboxes drawn at once: typing narrows the rest
  var known = {};
  index.forEach(function (r) { known[r.run_id] = r; });
  function $(id) { return document.getElementById(id); }
  var filter = $("pick-filter"), list = $("pick-list"), reference = $("reference"), picked = [];
  var head = document.querySelector("#delta thead"), body = document.querySelector("#delta tbody");

  function describe(id) {
    var r = known[id] || store.runs[id] || {};
    return id + " · " + (r.label || "?") + " · " + (r.status || "?");
  }
  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function drawList() {
    var text = filter.value.toLowerCase();
    var rows = index.filter(function (r) {
      return [r.run_id, r.label, r.study, r.status].join(" ").toLowerCase().indexOf(text) !== -1;
    });
    clear(list);
    rows.slice(0, LISTED).forEach(function (r) {
      var label = element("label"), box = element("input");
      box.type = "checkbox";
      box.value = r.run_id;
      box.checked = picked.indexOf(r.run_id) !== -1;
      label.appendChild(box);
      label.appendChild(document.createTextNode(" " + describe(r.run_id) + (r.study ? " · " + r.study : "")));
      list.appendChild(label);
    });
    if (rows.length > LISTED) list.appendChild(element("p", (rows.length - LISTED) + " more runs: type to narrow", "muted"));
  }
  function drawReference() {
    clear(reference);
    picked.forEach(function (id) {
      var option = element("option", describe(id));
      option.value = id;
      reference.appendChild(option);
    });
    reference.disabled = picked.length < 2;
    $("picked").textContent = picked.length ? "Picked, the reference first: " + picked.join(", ") : "";
  }

  function load(src, then) {
    var tag = document.createElement("script");
    tag.src = src;
    tag.onload = tag.onerror = then;
    document.head.appendChild(tag);
  }
  // every picked run's script, then the reference's floor, then `then`
  function loadPicked(then) {
    var missing = picked.filter(function (id) { return !store.runs[id]; });
    var left = missing.length;
    function floor() {
      var ref = store.runs[picked[0]];
      var key = ref && ref.floor;
      if (key && !store.floors[key]) load("floors/" + encodeURIComponent(key) + ".js", then);
      else then();
    }
    if (!left) { floor(); return; }
    missing.forEach(function (id) {
      load("runs/" + encodeURIComponent(id) + "/compare.js", function () { left -= 1; if (!left) floor(); });
    });
  }

  function changeText(pct) { return (pct >= 0 ? "+" : "") + pct.toFixed(1) + "%"; }
  function figureCell(row, entry, metric, base, bound, figure) {
    var td = row.insertCell();
    var value = entry && entry.figures[metric];
    td.textContent = value ? value[1] : "-";
    if (entry && !entry.valid) td.appendChild(element("span", " (invalid)", "muted"));
    if (bound) td.title = bound.text;
    if (!base || !value) return;
    if (!bound) td.title = "no noise floor at this cell: the reference's configuration has too few runs of it";
    var ratio = value[0] / base[0];
    if (!isFinite(ratio)) return;
    var change = element("span", " " + changeText(100 * (ratio - 1)), "change");
    td.appendChild(change);
    if (bound && ratio >= bound.low && ratio <= bound.high) { td.className = "within-floor"; return; }
    if (figure.better) change.className += (figure.better === "higher") === (ratio > 1) ? " delta-up" : " delta-down";
  }
  function drawHead(runs) {
    clear(head);
    var row = head.insertRow();
    row.appendChild(element("th", "cell: figure"));
    picked.forEach(function (id, i) {
      var run = runs[i] || {};
      var th = element("th", id + " (" + (run.label || "?") + ")");
      if (!i) th.insertBefore(element("span", "reference ", "muted"), th.firstChild);
      row.appendChild(th);
    });
  }
  // cell id -> its entry in each picked run (null where that run lacks it), in the reference's cell order first
  function cellsOf(runs) {
    var order = [], found = {};
    runs.forEach(function (run, i) {
      run.cells.forEach(function (entry) {
        if (!found[entry.cell]) { found[entry.cell] = runs.map(function () { return null; }); order.push(entry.cell); }
        found[entry.cell][i] = entry;
      });
    });
    return order.map(function (cell) { return {cell: cell, entries: found[cell]}; });
  }
  function drawUnshared(unshared) {
    var box = $("unshared");
    clear(box);
    if (!unshared.length) return;
    box.appendChild(element("p", unshared.length + " cell" + (unshared.length === 1 ? " is" : "s are") +
                            " not in every picked run, so not listed:"));
    var items = element("ul");
    unshared.forEach(function (c) {
      var lacking = picked.filter(function (id, i) { return !c.entries[i]; });
      items.appendChild(element("li", c.cell + ": not in " + lacking.join(", ")));
    });
    box.appendChild(items);
  }

  function render() {
    clear(body);
    var note = $("delta-note"), floorNote = $("floor-note");
    var runs = picked.map(function (id) { return store.runs[id] || {label: "?", cells: [], floor: null}; });
    drawHead(runs);
    if (picked.length < 2) {
      note.textContent = "Pick two runs or more: the first picked is the reference.";
      floorNote.textContent = "";
      drawUnshared([]);
      return;
    }
    var floor = runs[0].floor ? store.floors[runs[0].floor] : null;
    var cells = cellsOf(runs);
    var shared = cells.filter(function (c) { return c.entries.every(Boolean); });
    // the count below is of these rows' cells: one list draws the table and says how many it holds
    shared.forEach(function (c) {
      var bounds = (floor && floor.cells[c.cell]) || {};
      figures.forEach(function (figure) {
        if (figure.kind !== c.entries[0].kind) return;
        if (!c.entries.some(function (e) { return figure.metric in e.figures; })) return;
        var row = body.insertRow();
        row.setAttribute("data-cell", c.cell);
        row.setAttribute("data-metric", figure.metric);
        // one column for both, the figure under its cell: at a phone's width the runs' figures stay in view
        var what = row.insertCell();
        what.className = "what";
        what.appendChild(element("span", c.cell));
        what.appendChild(element("span", figure.title, "muted figure"));
        var base = c.entries[0].figures[figure.metric];
        c.entries.forEach(function (entry, i) {
          figureCell(row, entry, figure.metric, i ? base : null, bounds[figure.metric], figure);
        });
      });
    });
    note.textContent = shared.length ? shared.length + " cell" + (shared.length === 1 ? "" : "s") +
      " measured by all " + picked.length + " runs listed." : "These runs share no cell with figures to compare.";
    drawUnshared(cells.filter(function (c) { return !c.entries.every(Boolean); }));
    floorNote.textContent = floor && floor.runs > 1
      ? "Noise floor: " + floor.runs + " completed runs of " + floor.label + ", the reference's configuration."
      : "No noise floor: the reference's configuration has " + (floor ? floor.runs : 0) +
        " completed run" + (floor && floor.runs === 1 ? "" : "s") + " of its own, so nothing is greyed.";
  }

  function update() {
    window.location.hash = picked.length ? "runs=" + picked.map(encodeURIComponent).join(",") : "";
    drawReference();
    loadPicked(render);
  }
  function fromHash() {
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv.length === 2) params[kv[0]] = kv[1];
    });
    // #a=RUN&b=RUN as pages linked before several runs could be picked (B against A: A the reference)
    var ids = params.runs ? params.runs.split(",") : [params.a, params.b];
    picked = ids.filter(Boolean).map(decodeURIComponent).filter(function (id, i, all) {
      return all.indexOf(id) === i;
    });
  }

  list.addEventListener("change", function (event) {
    var id = event.target.value, at = picked.indexOf(id);
    if (event.target.checked && at === -1) picked.push(id);
    if (!event.target.checked && at !== -1) picked.splice(at, 1);
    update();
  });
  reference.addEventListener("change", function () {
    picked.splice(picked.indexOf(reference.value), 1);
    picked.unshift(reference.value);
    update();
  });
  filter.addEventListener("input", drawList);
  fromHash();
  drawList();
  update();
})();
