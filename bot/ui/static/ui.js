// Follows a run in progress: asks for its live part once a second and swaps it in.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box || box.getAttribute("data-finished") === "1") { return; }
  var url = box.getAttribute("data-src");
  var shown = "";
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
      .then(function (data) {
        if (data.html !== shown) { shown = data.html; box.innerHTML = data.html; }
        if (data.finished) {
          box.setAttribute("data-finished", "1");
          var stop = document.querySelector("form.stop");
          if (stop) { stop.remove(); }
        } else { setTimeout(tick, 1000); }
      })
      .catch(function () { setTimeout(tick, 3000); });
  }
  setTimeout(tick, 1000);
})();

// Keeps a list's first page current: asks for its rows once a second and swaps them in.
(function () {
  "use strict";
  var boxes = document.querySelectorAll("[data-refresh]");
  Array.prototype.forEach.call(boxes, function (box) {
    var url = box.getAttribute("data-refresh");
    var shown = null;
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
        .then(function (data) {
          if (data.html !== shown) { shown = data.html; box.innerHTML = data.html; }
          setTimeout(tick, 1000);
        })
        .catch(function () { setTimeout(tick, 3000); });
    }
    setTimeout(tick, 1000);
  });
})();
