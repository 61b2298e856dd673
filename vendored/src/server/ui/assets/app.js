// The approvals inbox's script: small, no framework, no build step.
// Everything works without it (plain forms and links); it adds the raw
// JSON toggle, checks an edited payload before it is sent, and keeps the
// inbox and timelines live over Server-Sent Events.
// It never inserts text as HTML: only the inbox rows the server renders
// (escaped) are swapped in as markup.
(function () {
  "use strict";

  function rawToggle() {
    var button = document.getElementById("toggle-raw");
    var raw = document.getElementById("payload-raw");
    if (!button || !raw) return;
    button.addEventListener("click", function () {
      var show = raw.hidden;
      raw.hidden = !show;
      button.setAttribute("aria-expanded", show ? "true" : "false");
      button.textContent = show ? "Hide raw JSON" : "Show raw JSON";
    });
  }

  function payloadCheck() {
    var form = document.getElementById("modify");
    var box = document.getElementById("payload-edit");
    var error = document.getElementById("payload-error");
    if (!form || !box || !error) return;
    function check() {
      try {
        var value = JSON.parse(box.value);
        if (value === null) throw new Error("the payload is null: approve instead to keep it as it is");
        error.hidden = true;
        error.textContent = "";
        box.removeAttribute("aria-invalid");
        return true;
      } catch (e) {
        error.hidden = false;
        error.textContent = "This is not valid JSON: " + e.message;
        box.setAttribute("aria-invalid", "true");
        return false;
      }
    }
    form.addEventListener("submit", function (event) {
      if (!check()) {
        event.preventDefault();
        box.focus();
      }
    });
    box.addEventListener("input", function () {
      if (!error.hidden) check();
    });
  }

  function liveInbox(main) {
    var region = document.getElementById("inbox-region");
    if (!region || !window.EventSource) return;
    var source = new EventSource(main.getAttribute("data-stream"));
    var busy = false;
    var again = false;
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(region.getAttribute("data-fragment"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) region.innerHTML = html; })
        .catch(function () {})
        .then(function () {
          busy = false;
          if (again) { again = false; refresh(); }
        });
    }
    source.addEventListener("inbox", refresh);
  }

  var FINAL = ["run_completed", "run_rejected", "run_expired", "run_skipped", "run_failed", "run_cancelled"];
  var KINDS = ["run_started", "step_started", "step_completed", "awaiting_approval",
    "approval_vote", "approval_reminded", "approval_escalated", "gate_skipped", "approval_resolved", "approval_migrated", "run_recovered", "run_stuck"].concat(FINAL);

  function summary(e) {
    switch (e.type) {
      case "run_started": return "run started";
      case "step_started": return "step " + e.step + " started";
      case "step_completed": return "step " + e.step + " completed" + (e.replayed ? " (replayed)" : "");
      case "awaiting_approval": return "waiting for approval at " + e.step;
      case "approval_resolved": return e.decision + " by " + e.decided_by + (e.reason ? ": " + e.reason : "");
      case "approval_vote": return e.voter + " voted " + e.decision + ": " + e.progress;
      case "approval_reminded": return "reminder at " + e.step + ": " + e.percent + "% of its time has passed";
      case "approval_escalated": return "escalated to " + e.groups.join(", ") + ": " + (e.added.length ? e.added.join(", ") : "nobody more") + " may decide now";
      case "gate_skipped": return "no approval at " + e.step + ": " + e.when + " is false for this call";
      case "approval_migrated": return "moved from spec " + e.from.slice(0, 12) + " to " + e.to.slice(0, 12) + " by " + e.by;
      case "run_completed": return "run completed";
      case "run_rejected": return "run rejected";
      case "run_expired": return "run expired";
      case "run_skipped": return "run skipped at " + e.step + " (dedupe)";
      case "run_failed": return "run failed: " + e.error;
      case "run_cancelled": return "run cancelled by " + e.by + (e.reason ? ": " + e.reason : "");
      case "run_recovered": return "run recovered by " + e.by;
      case "run_stuck": return "run stuck at " + e.step + ": " + e.reason;
      default: return e.type;
    }
  }

  function liveTimeline(main) {
    var list = document.getElementById("timeline");
    if (!list || !window.EventSource) return;
    var source = new EventSource(main.getAttribute("data-stream"));
    function add(message) {
      var event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (list.querySelector('li[data-seq="' + Number(event.seq) + '"]')) return;
      var li = document.createElement("li");
      li.className = "event";
      li.setAttribute("data-kind", event.type);
      li.setAttribute("data-seq", String(Number(event.seq)));
      var time = document.createElement("time");
      time.setAttribute("datetime", event.at);
      time.textContent = String(event.at).replace("T", " ").slice(0, 16) + " UTC";
      var text = document.createElement("span");
      text.className = "summary";
      text.textContent = summary(event);
      li.appendChild(time);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(text);
      list.appendChild(li);
      var status = document.getElementById("run-status");
      if (status && FINAL.indexOf(event.type) >= 0) status.textContent = event.type.replace("run_", "");
      // The stream ends with the run; without this the browser would
      // reconnect and replay it every few seconds.
      if (FINAL.indexOf(event.type) >= 0) source.close();
    }
    KINDS.forEach(function (kind) { source.addEventListener(kind, add); });
  }

  function start() {
    rawToggle();
    payloadCheck();
    var main = document.querySelector("main[data-live]");
    if (!main) return;
    var live = main.getAttribute("data-live");
    if (live === "inbox") liveInbox(main);
    if (live === "timeline") liveTimeline(main);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
