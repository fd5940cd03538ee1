// Sorting and filtering for tables marked "sortable", with no server and no library. The runs index is
// rendered from window.SERVEBOOK_INDEX a page at a time, so a journal of 10,000 runs stays one quick page.
(function () {
  "use strict";
  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var number = parseFloat(raw);
    return isNaN(number) ? -Infinity : number;
  }
  function sortableInPlace(table) {
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(headers, function (th, index) {
      th.addEventListener("click", function () {
        var numeric = th.getAttribute("data-type") === "number";
        var ascending = !th.classList.contains("sorted-asc");
        Array.prototype.forEach.call(headers, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(ascending ? "sorted-asc" : "sorted-desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
          return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function rowHtml(r) {
    var verdict = r.verdict ? '<span class="badge verdict-' + esc(r.verdict) + '">' + esc(r.verdict) + "</span>"
      : '<span class="muted">not judged</span>';
    var study = r.study ? '<a href="studies/' + esc(r.study_slug) + '.html">' + esc(r.study) + "</a>" : "";
    var cells = r.cells === null || r.cells === undefined ? "" : esc(r.valid_cells) + " / " + esc(r.cells);
    return '<tr data-status="' + esc(r.status) + '"><td><a href="runs/' + esc(r.run_id) + '.html">' + esc(r.run_id) +
      '</a></td><td><span class="badge status-' + esc(r.status) + '">' + esc(r.status) + "</span></td><td>" + verdict +
      "</td><td>" + study + "</td><td>" + esc(r.label) + "</td><td>" + esc(r.engine) + "</td><td>" +
      esc(r.decode_text) + "</td><td>" + esc(r.prefill_text) + "</td><td>" + esc(r.capacity_text) + "</td><td>" + cells + "</td><td>" + esc(r.cause) +
      "</td></tr>";
  }
  function pagedIndex(table, data) {
    var pager = document.getElementById("pager");
    var size = parseInt(pager.getAttribute("data-page-size"), 10) || 100;
    var filter = document.getElementById("filter");
    var statusFilter = document.getElementById("status-filter");
    var headers = table.tHead.rows[0].cells;
    var state = {key: null, ascending: true, page: 0};
    data.forEach(function (r) {
      r._text = [r.run_id, r.status, r.verdict, r.study, r.label, r.engine, r.decode_text, r.prefill_text,
                 r.capacity_text, r.cause].join(" ").toLowerCase();
    });
    function chosen() {
      var text = filter ? filter.value.toLowerCase() : "";
      var status = statusFilter ? statusFilter.value : "";
      var rows = data.filter(function (r) {
        return r._text.indexOf(text) !== -1 && (!status || r.status === status);
      });
      if (state.key) {
        var numeric = state.numeric, key = state.key, sign = state.ascending ? 1 : -1;
        rows.sort(function (a, b) {
          var x = a[key], y = b[key];
          if (numeric) { x = x === null || x === undefined ? -Infinity : x; y = y === null || y === undefined ? -Infinity : y; }
          else { x = String(x === null || x === undefined ? "" : x).toLowerCase(); y = String(y === null || y === undefined ? "" : y).toLowerCase(); }
          return (x < y ? -1 : x > y ? 1 : 0) * sign;
        });
      }
      return rows;
    }
    function render() {
      var rows = chosen();
      var pages = Math.max(1, Math.ceil(rows.length / size));
      state.page = Math.min(state.page, pages - 1);
      var start = state.page * size;
      table.tBodies[0].innerHTML = rows.slice(start, start + size).map(rowHtml).join("");
      pager.innerHTML = rows.length <= size ? "" :
        '<button type="button" data-step="-1"' + (state.page === 0 ? " disabled" : "") + '>newer</button> ' +
        (start + 1) + "-" + Math.min(start + size, rows.length) + " of " + rows.length + " runs " +
        '<button type="button" data-step="1"' + (state.page >= pages - 1 ? " disabled" : "") + ">older</button>";
    }
    pager.addEventListener("click", function (event) {
      var step = event.target.getAttribute && event.target.getAttribute("data-step");
      if (step) { state.page += parseInt(step, 10); render(); }
    });
    Array.prototype.forEach.call(headers, function (th) {
      th.addEventListener("click", function () {
        state.ascending = !(state.key === th.getAttribute("data-key") && state.ascending);
        state.key = th.getAttribute("data-key");
        state.numeric = th.getAttribute("data-type") === "number";
        Array.prototype.forEach.call(headers, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
        th.classList.add(state.ascending ? "sorted-asc" : "sorted-desc");
        state.page = 0;
        render();
      });
    });
    if (filter) filter.addEventListener("input", function () { state.page = 0; render(); });
    if (statusFilter) statusFilter.addEventListener("change", function () { state.page = 0; render(); });
    render();
  }

  // Charts are drawn after the page's text and tables have painted: plotly is 4.8 MB of script, and loading it in
  // <head> held a study page blank for 2 to 4 s. The bundle is fetched once the first frame is up; the charts in
  // view are drawn first, the others as they scroll near, and any left when the browser is idle, so a page read
  // to the end (or printed) has them all. <html data-charts="drawn"> says every chart is drawn.
  function drawCharts(charts) {
    var left = charts.slice();
    function draw(chart) {
      var at = left.indexOf(chart);
      if (at < 0) return;
      left.splice(at, 1);
      var element = document.getElementById(chart.id);
      if (element) Plotly.newPlot(element, chart.figure.data, chart.figure.layout, {displaylogo: false, responsive: true});
      if (!left.length) document.documentElement.setAttribute("data-charts", "drawn");
    }
    function idle(next) { (window.requestIdleCallback || function (f) { return setTimeout(f, 50); })(next); }
    function drainWhenIdle() { if (left.length) idle(function () { draw(left[0]); drainWhenIdle(); }); }
    var near = "IntersectionObserver" in window && new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        near.unobserve(entry.target);
        left.filter(function (c) { return c.id === entry.target.id; }).forEach(draw);
      });
    }, {rootMargin: "300px"});
    left.forEach(function (chart) {
      var element = document.getElementById(chart.id);
      if (near && element) near.observe(element);
    });
    drainWhenIdle();
  }
  function loadPlotly(then) {
    var script = document.createElement("script");
    script.src = window.SERVEBOOK_PLOTLY;
    script.onload = then;
    document.head.appendChild(script);
  }

  // At a phone's width a table's rows become cards (site.css): each value is shown under its column's name.
  function labelCells(table) {
    var head = table.tHead && table.tHead.rows[0];
    if (!head) return;
    var names = Array.prototype.map.call(head.cells, function (th) { return th.textContent.trim(); });
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        Array.prototype.forEach.call(row.cells, function (cell, i) {
          if (names[i]) cell.setAttribute("data-label", names[i]);
        });
      });
    });
    table.classList.add("cards");
  }

  document.addEventListener("DOMContentLoaded", function () {
    // the runs index and compare.html's table are filled by script after this: they scroll in their frame instead
    document.querySelectorAll("main table.data:not(#runs):not(#delta)").forEach(labelCells);
    if (window.SERVEBOOK_CHARTS && window.SERVEBOOK_CHARTS.length) {
      var charts = window.SERVEBOOK_CHARTS;
      requestAnimationFrame(function () { setTimeout(function () { loadPlotly(function () { drawCharts(charts); }); }, 0); });
    }
    var index = document.getElementById("runs");
    document.querySelectorAll("table.sortable").forEach(function (table) {
      if (table === index && window.SERVEBOOK_INDEX) return;
      sortableInPlace(table);
    });
    if (index && window.SERVEBOOK_INDEX) pagedIndex(index, window.SERVEBOOK_INDEX);
  });
})();
