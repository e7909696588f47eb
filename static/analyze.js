// /analyze as you type: a pause of DEBOUNCE_MS after the last key posts the form as the button
// does (the same route, guard, rate limit and work limiter) and puts the analysis that comes back
// in place of the last one, without a page load. At most one request is in flight, and one starts
// MIN_GAP_MS after the last at the soonest (at most 40 a minute, under the default rate limit of 60):
// keys typed meanwhile wait, then the newest text goes. An answer for text that has since changed is
// dropped; a refusal (rate limit, size, busy) is said under the form and nothing typed is lost.
// "Show BERT's words" (a button of the form, in BERT's column) goes the same way with `words=true`, at once: the
// words cost about 1.5 s a sentence, so they are asked for, not drawn at every pause.
// Without this script the form posts and the page comes back whole, as before.
(function () {
  "use strict";
  var DEBOUNCE_MS = 400;
  var MIN_GAP_MS = 1500;
  var form = document.querySelector("form.analyze-form");
  var box = form && form.querySelector("textarea[name=text]");
  var note = document.querySelector(".live-note");
  if (!box || !note || !window.fetch || !window.DOMParser) return;

  var timer = null;
  var inFlight = false;
  var again = false; // the text changed while a request was in flight
  var lastSent = 0;
  var shown = document.querySelector(".result") ? box.value : null; // the text the page's analysis is of
  note.textContent = "The analysis updates as you type.";

  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(send, DEBOUNCE_MS);
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[name=words]");
    if (!button) return;
    event.preventDefault();
    if (inFlight) {
      say("An analysis is under way: press the button again once it is in.", false);
      return;
    }
    button.disabled = true;
    say("Computing BERT's words…", false);
    send(true);
  });

  function send(words) {
    if (inFlight) {
      again = true;
      return;
    }
    var wait = lastSent + MIN_GAP_MS - Date.now();
    if (wait > 0 && !words) {
      clearTimeout(timer);
      timer = setTimeout(send, wait);
      return;
    }
    var text = box.value;
    if (!text.trim() || (text === shown && !words)) return;
    var body = new URLSearchParams(new FormData(form)); // the token first, as the form sends it
    if (words) body.append("words", "true");
    inFlight = true;
    lastSent = Date.now();
    form.classList.add("is-busy");
    fetch(form.action, {
      method: "POST",
      body: body,
      headers: { Accept: "text/html" },
      credentials: "same-origin",
    })
      .then(function (response) {
        return response.text().then(function (html) { answered(response, html, text); });
      })
      .catch(function () { say("The server could not be reached; your text is kept. Press Analyze to try again.", true); })
      .then(function () {
        inFlight = false;
        form.classList.remove("is-busy");
        if (again) {
          again = false;
          send();
        }
      });
  }

  function answered(response, html, text) {
    if (box.value !== text) return; // stale: the newest text wins
    var page = new DOMParser().parseFromString(html, "text/html");
    var fresh = page.querySelector(".result");
    if (response.ok && fresh) {
      var old = document.querySelector(".result");
      if (old) {
        old.replaceWith(document.importNode(fresh, true));
      } else {
        note.after(document.importNode(fresh, true));
      }
      shown = text;
      var summary = fresh.querySelector(".result-summary");
      say("Updated." + (summary ? summary.textContent : ""), false);
      return;
    }
    var last = document.querySelector(".result");
    if (last) last.classList.add("is-stale"); // of an earlier text: shown faded until the next analysis
    var refusal = page.querySelector("p.error, .error-page p");
    var retry = response.headers.get("Retry-After");
    say((refusal ? refusal.textContent : "The server answered " + response.status + ".") +
        (retry ? " Retry in " + retry + " s." : "") + " Your text is kept.", true);
  }

  function say(message, isError) {
    note.textContent = message;
    note.classList.toggle("error", isError);
  }
})();
