// The delta at every cell two runs share, computed in the browser from runs-data.js.
(function () {
  "use strict";
  var data = window.SERVEBOOK_RUNS || {runs: {}};
  var ids = Object.keys(data.runs).sort().reverse();
  var selectA = document.getElementById("run-a"), selectB = document.getElementById("run-b");
  var body = document.querySelector("#delta tbody"), note = document.getElementById("delta-note");
  var METRICS = [["aggregate_tok_s", "aggregate tok/s", 1], ["per_request_tok_s", "per-request tok/s", 1],
                 ["ttft_s", "TTFT ms", 1000], ["prefill_tok_s", "cold prefill tok/s", 1]];
  ids.forEach(function (id) {
    var run = data.runs[id];
    [selectA, selectB].forEach(function (select) {
      var option = document.createElement("option");
      option.value = id;
      option.textContent = id + " · " + run.label + " · " + run.status;
      select.appendChild(option);
    });
  });
  function fromHash() {
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv.length === 2) params[kv[0]] = decodeURIComponent(kv[1]);
    });
    if (params.a && data.runs[params.a]) selectA.value = params.a;
    if (params.b && data.runs[params.b]) selectB.value = params.b;
    else if (ids.length > 1 && selectB.value === selectA.value) selectB.value = ids.find(function (i) { return i !== selectA.value; });
  }
  function text(value, scale) { return value === null || value === undefined ? "-" : (value * scale).toFixed(1); }
  function render() {
    while (body.firstChild) body.removeChild(body.firstChild);
    var a = data.runs[selectA.value], b = data.runs[selectB.value];
    if (!a || !b) { note.textContent = "The journal holds fewer than two runs."; return; }
    var cellsB = {};
    b.cells.forEach(function (cell) { cellsB[cell.cell_id] = cell; });
    // A cell is counted where it is listed: one both runs measured, with a figure of METRICS in either (a capacity
    // row or a load cell has none of them, and counting it said "5 shared cells" above 4 listed).
    var shared = 0, unlisted = 0;
    a.cells.forEach(function (cellA) {
      var cellB = cellsB[cellA.cell_id];
      if (!cellB) return;
      var listed = false;
      METRICS.forEach(function (metric) {
        var x = cellA[metric[0]], y = cellB[metric[0]];
        if ((x === null || x === undefined) && (y === null || y === undefined)) return;
        if (!listed) { listed = true; shared += 1; }
        var row = body.insertRow();
        var diff = (x !== null && y !== null && x !== undefined && y !== undefined) ? y - x : null;
        var pct = diff !== null && x ? 100 * diff / x : null;
        [cellA.cell_id + (cellA.valid && cellB.valid ? "" : " (invalid in a run)"), metric[1], text(x, metric[2]),
         text(y, metric[2]), text(diff, metric[2]), pct === null ? "-" : (pct >= 0 ? "+" : "") + pct.toFixed(1) + "%"]
          .forEach(function (value) { row.insertCell().textContent = value; });
        if (pct !== null) {
          var better = metric[0] === "ttft_s" ? pct < 0 : pct > 0;
          row.cells[5].className = better ? "delta-up" : "delta-down";
        }
      });
      if (!listed) unlisted += 1;
    });
    var others = unlisted ? " " + unlisted + " more shared cell" + (unlisted === 1 ? " has" : "s have") +
      " none of these figures (capacity, open-loop load: see the runs' pages)." : "";
    note.textContent = shared ? shared + " shared cell" + (shared === 1 ? "" : "s") + " listed." + others +
                                " Runs without figures (failed or incomplete) have no cells to compare."
                              : "These runs share no cell with these figures." + others;
    window.location.hash = "a=" + encodeURIComponent(selectA.value) + "&b=" + encodeURIComponent(selectB.value);
  }
  if (ids.length) { selectA.value = ids[0]; selectB.value = ids[Math.min(1, ids.length - 1)]; }
  fromHash();
  selectA.addEventListener("change", render);
  selectB.addEventListener("change", render);
  render();
})();
