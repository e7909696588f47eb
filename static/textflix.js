// Textflix works without this script; it only smooths the switches.
(function () {
  "use strict";
  var KEY = "textflix-scroll";

  // Links styled as switches answer the space bar, as a switch does.
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.key === " " && target.matches && target.matches("a[role=switch]")) {
      event.preventDefault();
      target.click();
    }
  });

  // Flipping a switch reloads the same page in the new view: keep the reader's place.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[role=switch], .sortbar a, .filter a");
    if (link && link.pathname === window.location.pathname) {
      try {
        sessionStorage.setItem(KEY, JSON.stringify({ path: link.pathname, y: window.scrollY }));
      } catch (e) { /* storage may be off */ }
    }
  });

  try {
    var saved = JSON.parse(sessionStorage.getItem(KEY) || "null");
    sessionStorage.removeItem(KEY);
    if (saved && saved.path === window.location.pathname && !window.location.hash) {
      window.addEventListener("load", function () { window.scrollTo({ top: saved.y, behavior: "instant" }); });
    }
  } catch (e) { /* ignore */ }
})();
