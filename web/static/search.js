// The search box: every section of every page is in SEARCH_INDEX (search-index.js, written by the build), so it
// works from a served site and from files opened directly, with no server and nothing downloaded.
(function () {
  "use strict";
  var box = document.getElementById("search");
  var list = document.getElementById("search-results");
  var root = document.body.getAttribute("data-root") || "";
  var nothing = document.body.getAttribute("data-nothing") || "Nothing found for";
  var sections = window.SEARCH_INDEX || [];

  function snippet(text, term) {
    var at = text.toLowerCase().indexOf(term);
    var start = Math.max(0, at - 60);
    return (start > 0 ? "…" : "") + text.slice(start, start + 160) + (start + 160 < text.length ? "…" : "");
  }

  function show(query) {
    var terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    list.textContent = "";
    if (!terms.length) { list.hidden = true; return; }
    var found = sections.filter(function (s) {
      var words = (s.page + " " + s.heading + " " + s.text).toLowerCase();
      return terms.every(function (t) { return words.indexOf(t) >= 0; });
    }).slice(0, 20);
    if (!found.length) {
      var none = document.createElement("li");
      none.textContent = nothing + " " + query;
      list.appendChild(none);
    }
    found.forEach(function (s) {
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = root + s.href;
      link.textContent = s.page + (s.heading ? " › " + s.heading : "");
      var text = document.createElement("span");
      text.textContent = snippet(s.text, terms[0]);
      item.appendChild(link);
      item.appendChild(text);
      list.appendChild(item);
    });
    list.hidden = false;
  }

  box.addEventListener("input", function () { show(box.value); });
  box.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { box.value = ""; show(""); }
  });
})();
