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

  document.addEventListener("DOMContentLoaded", function () {
    var index = document.getElementById("runs");
    document.querySelectorAll("table.sortable").forEach(function (table) {
      if (table === index && window.SERVEBOOK_INDEX) return;
      sortableInPlace(table);
    });
    if (index && window.SERVEBOOK_INDEX) pagedIndex(index, window.SERVEBOOK_INDEX);
  });
})();
