// Small progressive enhancements; every page works without them.
(function () {
  "use strict";
  var token = function () {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  };
  // HTMX sends the CSRF token on every request as a header.
  document.addEventListener("htmx:configRequest", function (evt) {
    evt.detail.headers["X-CSRF-Token"] = token();
    // Forms marked data-changed-only (the what-if page: five fields per team) send only
    // the fields that differ from today's value (data-today, else what the page was
    // rendered with); the server reads a missing field as unchanged. A keystroke then
    // carries the changed teams' fields, not every team's.
    var form = evt.detail.elt && evt.detail.elt.closest && evt.detail.elt.closest("form[data-changed-only]");
    var params = evt.detail.parameters;
    if (form && params && typeof params.delete === "function") {
      form.querySelectorAll("input[name]").forEach(function (input) {
        var today = input.hasAttribute("data-today") ? input.getAttribute("data-today") : input.defaultValue;
        if (input.type !== "hidden" && input.value === today) { params.delete(input.name); }
      });
    }
  });
  // The navigation's groups: one open at a time, closed by a click elsewhere or Escape.
  var groups = function () { return document.querySelectorAll("details.nav-group[open]"); };
  document.addEventListener("click", function (evt) {
    groups().forEach(function (group) {
      if (!group.contains(evt.target)) { group.removeAttribute("open"); }
    });
  });
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape") { return; }
    groups().forEach(function (group) {
      group.removeAttribute("open");
      group.querySelector("summary").focus();
    });
  });
  // Polling pauses while the tab is hidden (no eval needed, CSP stays strict).
  document.addEventListener("htmx:confirm", function (evt) {
    var el = evt.target;
    if (el && el.hasAttribute && el.hasAttribute("data-poll") && document.visibilityState !== "visible") {
      evt.preventDefault();
    }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (el) { window.htmx.trigger(el, "every"); });
    }
  });
  // The request form: choosing a cluster template fills in the quota it suggests, in
  // the fields the person has not typed in yet.
  document.addEventListener("input", function (evt) {
    if (evt.isTrusted && evt.target && evt.target.id && evt.target.closest && evt.target.closest("#request-form")) {
      evt.target.setAttribute("data-typed", "");
    }
  });
  document.addEventListener("change", function (evt) {
    var radio = evt.target;
    if (!radio || radio.name !== "template" || !radio.hasAttribute("data-default-quota")) { return; }
    var suggested = JSON.parse(radio.getAttribute("data-default-quota"));
    var kept = [];
    Object.keys(suggested).forEach(function (key) {
      var field = document.getElementById("f-" + key);
      if (!field) { return; }
      if (field.hasAttribute("data-typed")) {
        if (field.value !== suggested[key]) {
          var label = document.querySelector('label[for="f-' + key + '"]');
          kept.push((label ? label.textContent.trim() : key) + " " + field.value + " (it suggests " + suggested[key] + ")");
        }
        return;
      }
      field.value = suggested[key];
      // Another node pool's fields sit folded away: shown once filled in.
      var folded = field.closest("details");
      if (folded) { folded.open = true; }
    });
    // Never silently: what was typed and kept is said under the choice.
    var note = document.getElementById("template-suggests");
    if (note) {
      note.textContent = kept.length ? "Kept what you typed: " + kept.join("; ") + "." : "";
    }
  });
  // Confirm destructive forms.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { evt.preventDefault(); }
  }, true);
  // Copy buttons: shown only where they work (with script and a clipboard); without
  // them a click on the text selects all of it (CSS), ready to copy.
  var showCopy = function () {
    if (!navigator.clipboard) { return; }
    document.querySelectorAll("button[data-copy][hidden]").forEach(function (btn) {
      btn.hidden = false;
    });
  };
  document.addEventListener("DOMContentLoaded", showCopy);
  document.addEventListener("htmx:afterSettle", showCopy);
  // Copy buttons.
  document.addEventListener("click", function (evt) {
    var btn = evt.target.closest && evt.target.closest("[data-copy]");
    if (!btn) { return; }
    var src = document.querySelector(btn.getAttribute("data-copy"));
    if (src && navigator.clipboard) {
      navigator.clipboard.writeText(src.textContent).then(function () {
        btn.textContent = "Copied";
        setTimeout(function () { btn.textContent = "Copy"; }, 1500);
      });
    }
  });
  // Times: the server writes UTC; show them in the viewer's time zone, UTC on hover.
  var pad = function (n) { return (n < 10 ? "0" : "") + n; };
  var zone = (function () {
    try {
      var part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
        .formatToParts(new Date()).filter(function (p) { return p.type === "timeZoneName"; })[0];
      return part ? part.value : "";
    } catch (e) { return ""; }
  })();
  var localise = function (root) {
    if (!root || !root.querySelectorAll) { return; }
    root.querySelectorAll("time[data-when]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime()) || el.hasAttribute("data-localised")) { return; }
      var utc = el.getAttribute("title") || "";
      var local = at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " " +
        pad(at.getHours()) + ":" + pad(at.getMinutes()) + ":" + pad(at.getSeconds()) + (zone ? " " + zone : "");
      if (el.getAttribute("data-when") === "at") {
        el.textContent = local;
        el.setAttribute("title", utc);
      } else {
        el.setAttribute("title", local + " (" + utc + ")");
      }
      el.setAttribute("data-localised", "");
    });
  };
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:load", function (evt) { localise(evt.target); });
  // Toasts fade after a while.
  window.setTimeout(function () {
    document.querySelectorAll(".toast").forEach(function (t) { t.classList.add("toast-hide"); });
  }, 6000);
})();
