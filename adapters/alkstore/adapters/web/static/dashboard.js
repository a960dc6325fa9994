// Refresh the pages' live fragments (every element with data-refresh) by short polling; without JavaScript
// the page reads as served.
"use strict";
(function () {
  function confirmations() {
    // A form with data-confirm asks first (without JavaScript it submits as it is).
    document.addEventListener("submit", function (event) {
      var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
      if (question && !window.confirm(question)) event.preventDefault();
    });
  }
  function poll(live) {
    // Refresh one element whose data-refresh names the fragment that replaces its content.
    var url = live.getAttribute("data-refresh");
    var seconds = parseFloat(live.getAttribute("data-seconds")) || 2;
    var busy = false;
    function refresh() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) throw new Error("refresh answered " + response.status);
          return response.text();
        })
        .then(function (html) {
          // The server rendered and escaped this fragment; it carries no scripts.
          live.innerHTML = html;
          live.removeAttribute("data-stale");
        })
        .catch(function () {
          live.setAttribute("data-stale", "true");
        })
        .finally(function () {
          busy = false;
        });
    }
    live.setAttribute("data-live", "polling");
    window.setInterval(refresh, seconds * 1000);
  }
  function goOn() {
    // A bulk action's progress page goes on with its next chunk by itself (without JavaScript: a button).
    var next = document.querySelector("form[data-continue]");
    if (next) window.setTimeout(function () { next.submit(); }, 300);
  }
  function start() {
    confirmations();
    goOn();
    var polled = document.querySelectorAll("[data-refresh]");
    for (var i = 0; i < polled.length; i++) poll(polled[i]);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
