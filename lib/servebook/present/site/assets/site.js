// Sorting and filtering for tables marked "sortable", with no server and no library.
(function () {
  "use strict";
  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var number = parseFloat(raw);
    return isNaN(number) ? -Infinity : number;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
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
  });
  var filter = document.getElementById("filter");
  var statusFilter = document.getElementById("status-filter");
  function applyFilter() {
    var text = filter ? filter.value.toLowerCase() : "";
    var status = statusFilter ? statusFilter.value : "";
    document.querySelectorAll("#runs tbody tr").forEach(function (row) {
      var visible = row.textContent.toLowerCase().indexOf(text) !== -1 &&
        (!status || row.getAttribute("data-status") === status);
      row.style.display = visible ? "" : "none";
    });
  }
  if (filter) filter.addEventListener("input", applyFilter);
  if (statusFilter) statusFilter.addEventListener("change", applyFilter);
})();
