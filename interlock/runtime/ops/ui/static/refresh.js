// Progressive enhancement for the interlock status page: every few seconds, fetch each section's
// fragment (/ui/<section>) and swap it in. Without JavaScript the page is complete as served.
(function () {
  "use strict";
  var period = 5000;
  function refresh() {
    document.querySelectorAll("section[data-fragment]").forEach(function (section) {
      fetch(section.getAttribute("data-fragment"), { headers: { Accept: "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) { section.innerHTML = html; } })
        .catch(function () { /* the gateway is away: keep what is shown */ });
    });
    var stamp = document.getElementById("refreshed");
    if (stamp) { stamp.textContent = new Date().toISOString().replace(/\.\d+Z$/, "Z"); }
  }
  var toggle = document.getElementById("autorefresh");
  var timer = null;
  function arm() {
    if (timer) { clearInterval(timer); timer = null; }
    if (!toggle || toggle.checked) { timer = setInterval(refresh, period); }
  }
  if (toggle) {
    toggle.hidden = false;
    toggle.parentElement.hidden = false;
    toggle.addEventListener("change", function () { if (toggle.checked) { refresh(); } arm(); });
  }
  arm();
})();
