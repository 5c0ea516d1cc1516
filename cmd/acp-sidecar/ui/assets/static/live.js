// acp-sidecar ui: the only script. The pages are rendered on the server;
// this follows the page's event stream (Server-Sent Events) and puts the
// content the server rendered again in place, keeping open <details> open.
(function () {
  "use strict";
  var main = document.getElementById("content");
  var badge = document.getElementById("live-state");
  if (!main || !main.dataset.events || !window.EventSource) {
    return;
  }
  var es = new EventSource(main.dataset.events);
  function state(on) {
    if (badge) {
      badge.className = "live-state " + (on ? "on" : "off");
    }
  }
  function openKeys() {
    var keys = [];
    main.querySelectorAll("details[open]").forEach(function (d) {
      var li = d.closest("[id]");
      keys.push((li ? li.id : "") + "|" + d.className);
    });
    return keys;
  }
  es.addEventListener("open", function () { state(true); });
  es.addEventListener("error", function () { state(false); });
  es.addEventListener("refresh", function (e) {
    var keep = openKeys();
    main.innerHTML = e.data;
    main.querySelectorAll("details").forEach(function (d) {
      var li = d.closest("[id]");
      if (keep.indexOf((li ? li.id : "") + "|" + d.className) >= 0) {
        d.open = true;
      }
    });
    main.dispatchEvent(new CustomEvent("acp-sidecar:refreshed"));
    state(true);
  });
  es.addEventListener("gone", function (e) {
    es.close();
    state(false);
    var p = document.createElement("p");
    p.className = "trouble";
    p.id = "gone";
    p.textContent = "This session is no longer in the record (deleted). ";
    var a = document.createElement("a");
    a.href = "/";
    a.textContent = "All sessions";
    p.appendChild(a);
    main.replaceChildren(p);
  });
})();
