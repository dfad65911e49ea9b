// Live progress for a running job: poll its JSON and update the page; the
// page works without this (it refreshes itself then).
(function () {
  var status = document.getElementById("status");
  if (!status || status.dataset.done === "true") return;
  var id = status.dataset.job;
  function poll() {
    fetch("/api/jobs/" + id, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (j) {
        if (j.done) { location.reload(); return; }
        var steps = document.getElementById("steps");
        steps.textContent = "";
        (j.steps || []).forEach(function (s) {
          var li = document.createElement("li");
          li.textContent = s;
          steps.appendChild(li);
        });
        document.getElementById("progress").value = (j.steps || []).length;
        status.textContent = "running: " + (j.steps || []).length + " of " + j.total;
        setTimeout(poll, 500);
      })
      .catch(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 300);
})();
