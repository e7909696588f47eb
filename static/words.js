// A review page's "Show BERT's words": the button asks the API to compute and store the review's word shares
// (POST /api/reviews/{id}/words, the token in the Authorization header where the server needs one), then fetches
// the page again and puts its BERT column, now with the words marked and their legend, in place of the old one,
// without a page load. A refusal (rate limit, token, busy) is said under the button and the page stays as it was.
// Without this script the form posts to the page's own route, which computes them and comes back.
(function () {
  "use strict";
  var form = document.querySelector("form.words-form");
  var note = document.querySelector(".words-note");
  if (!form || !note || !window.fetch || !window.DOMParser) return;

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var button = form.querySelector("button");
    var token = form.querySelector("input[name=token]");
    var headers = { "Content-Type": "application/json", Accept: "application/json" };
    if (token) headers.Authorization = "Bearer " + token.value;
    button.disabled = true;
    say("Computing BERT's words…", false);
    fetch("/api/reviews/" + form.getAttribute("data-review") + "/words", {
      method: "POST", body: "{}", headers: headers, credentials: "same-origin",
    })
      .then(function (response) {
        if (response.ok) return fetch(window.location.href, { headers: { Accept: "text/html" } }).then(filled);
        return response.json().then(function (answer) { refused(response, answer); }, function () { refused(response, null); });
      })
      .catch(function () { say("The server could not be reached. Press the button to try again.", true); })
      .then(function () { button.disabled = false; });
  });

  function filled(response) {
    return response.text().then(function (html) {
      var page = new DOMParser().parseFromString(html, "text/html");
      var fresh = page.querySelector("section.model-col[data-model=bert]");
      var old = form.closest("section.model-col");
      if (!response.ok || !fresh || !old) {
        say("The words are stored; reload the page to see them.", false);
        return;
      }
      old.replaceWith(document.importNode(fresh, true));
    });
  }

  function refused(response, answer) {
    var problems = answer && answer.detail && answer.detail.map ? answer.detail : [];
    var retry = response.headers.get("Retry-After");
    var said = problems.map(function (problem) { return problem.message; }).join(" ");
    say((said || "The server answered " + response.status + ".") + (retry ? " Retry in " + retry + " s." : ""), true);
  }

  function say(message, isError) {
    note.textContent = message;
    note.classList.toggle("error", isError);
  }
})();
