// ragen result pages: sortable tables, filters and chart legends. Inlined into every page;
// it reads only attributes and text the page already holds and never writes HTML.
(function () {
  "use strict";
  // Sort and filter controls are shown only when this script runs (page.css hides them
  // under <html> without the "js" class): without JavaScript they would do nothing.
  document.documentElement.classList.add("js");

  // Sortable tables: <table class="sortable"> with <th data-sort="num|text">; a cell may
  // carry data-value (the number to sort by). Numbers sort high-to-low on the first click,
  // text A-to-Z; a second click reverses. Empty values sort last either way.
  function cellKey(row, index, kind) {
    var cell = row.cells[index];
    if (!cell) return null;
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (raw === "") return null;
    if (kind === "num") { var x = parseFloat(raw); return isNaN(x) ? null : x; }
    return raw.toLowerCase();
  }
  function sortBy(table, th) {
    var headers = Array.prototype.slice.call(th.parentNode.cells);
    var index = headers.indexOf(th), kind = th.getAttribute("data-sort");
    var current = th.getAttribute("aria-sort");
    var dir = current ? (current === "descending" ? "ascending" : "descending") : (kind === "num" ? "descending" : "ascending");
    headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) { return {row: r, key: cellKey(r, index, kind), i: i}; });
    var sign = dir === "ascending" ? 1 : -1;
    rows.sort(function (a, b) {
      if (a.key === null || b.key === null) return (a.key === null) - (b.key === null) || a.i - b.i;
      if (a.key < b.key) return -sign;
      if (a.key > b.key) return sign;
      return a.i - b.i;
    });
    rows.forEach(function (r) { body.appendChild(r.row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll("thead th[data-sort]"), function (th) {
      th.setAttribute("tabindex", "0");
      th.addEventListener("click", function () { sortBy(table, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, th); } });
    });
  });

  // Filters: a <div class="toolbar" data-filter-for="SELECTOR"> holding <select data-filter-attr="NAME">
  // (keeps items whose data-NAME equals the choice; "" = all), <input type="search" data-filter-search>
  // (keeps items whose text contains every word, case-insensitive) and <span data-filter-count>
  // (how many items are shown).
  Array.prototype.forEach.call(document.querySelectorAll("[data-filter-for]"), function (bar) {
    var items = Array.prototype.slice.call(document.querySelectorAll(bar.getAttribute("data-filter-for")));
    var selects = Array.prototype.slice.call(bar.querySelectorAll("select[data-filter-attr]"));
    var search = bar.querySelector("input[data-filter-search]");
    var count = bar.querySelector("[data-filter-count]");
    var texts = items.map(function (el) { return el.textContent.toLowerCase(); });
    function apply() {
      var words = search ? search.value.toLowerCase().split(/\s+/).filter(Boolean) : [];
      var shown = 0;
      items.forEach(function (el, i) {
        var ok = selects.every(function (s) { return !s.value || el.getAttribute("data-" + s.getAttribute("data-filter-attr")) === s.value; });
        ok = ok && words.every(function (w) { return texts[i].indexOf(w) !== -1; });
        el.hidden = !ok;
        if (ok) shown += 1;
      });
      if (count) count.textContent = shown + " of " + items.length;
    }
    selects.forEach(function (s) { s.addEventListener("change", apply); });
    if (search) search.addEventListener("input", apply);
    apply();
  });

  // Chart legends: <input type="checkbox" data-series-toggle="ID"> shows or hides the SVG group with that id.
  Array.prototype.forEach.call(document.querySelectorAll("input[data-series-toggle]"), function (box) {
    var target = document.getElementById(box.getAttribute("data-series-toggle"));
    if (!target) return;
    box.addEventListener("change", function () { target.style.display = box.checked ? "" : "none"; });
  });

  // Expand / collapse all episodes.
  Array.prototype.forEach.call(document.querySelectorAll("button[data-open-all]"), function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-open-all") === "1";
      Array.prototype.forEach.call(document.querySelectorAll(button.getAttribute("data-target")), function (d) {
        if (!d.hidden) d.open = open;
      });
    });
  });
})();
