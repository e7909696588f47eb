// Textflix works without this script; it only smooths the switches and keeps a review being analysed.
(function () {
  "use strict";
  var KEY = "textflix-scroll";
  var TEXT_KEY = "textflix-analyze-text";
  var LIVE_MS = 15000;

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

  // The /analyze form: the review posted is kept in this tab until an analysis of it comes back,
  // so a refused post loses nothing (with a wrong token the server answers before it reads the text).
  var form = document.querySelector("form.analyze-form");
  var box = form && form.querySelector("textarea[name=text]");
  if (box) {
    try {
      if (document.querySelector(".result")) {
        sessionStorage.removeItem(TEXT_KEY); // analysed: the page holds the text
      } else if (!box.value) {
        box.value = sessionStorage.getItem(TEXT_KEY) || "";
      }
    } catch (e) { /* storage may be off */ }
    form.addEventListener("submit", function () {
      try {
        sessionStorage.setItem(TEXT_KEY, box.value);
      } catch (e) { /* storage may be off, or full */ }
    });
  }

  // While the build goes on, the parts of a page marked data-live (the pending line, /about's build steps)
  // are fetched anew every half minute; once one is gone from the page (every model is ready and explained), or
  // names other models ready (data-ready: one more shows its predictions), the page reloads. The highlights
  // coming in as the build explains the reviews show on the next page loaded.
  var live = document.querySelectorAll("[data-live][id]");
  if (live.length && window.fetch && window.DOMParser) {
    window.setInterval(function () {
      fetch(window.location.href, { headers: { Accept: "text/html" } }).then(function (answer) {
        return answer.ok ? answer.text() : null;
      }).then(function (html) {
        if (html === null) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        for (var i = 0; i < live.length; i++) {
          var now = fresh.getElementById(live[i].id);
          if (!now || now.getAttribute("data-ready") !== live[i].getAttribute("data-ready")) {
            window.location.reload();
            return;
          }
          live[i].innerHTML = now.innerHTML;
        }
      }).catch(function () { /* the next try may work */ });
    }, LIVE_MS);
  }

  try {
    var saved = JSON.parse(sessionStorage.getItem(KEY) || "null");
    sessionStorage.removeItem(KEY);
    if (saved && saved.path === window.location.pathname && !window.location.hash) {
      window.addEventListener("load", function () { window.scrollTo({ top: saved.y, behavior: "instant" }); });
    }
  } catch (e) { /* ignore */ }
})();
