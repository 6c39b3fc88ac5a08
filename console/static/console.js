// searchd console: small conveniences. Every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Click an id to copy it.
  for (const el of document.querySelectorAll("[data-copy]")) {
    el.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(el.dataset.copy);
        el.classList.add("copied");
        setTimeout(() => el.classList.remove("copied"), 1200);
      } catch (_) { /* clipboard refused: nothing to do */ }
    });
  }
  // Narrow screens stack a list's rows (console.css): label each cell
  // with its column's heading.
  for (const table of document.querySelectorAll("table.list")) {
    const heads = Array.from(table.querySelectorAll(":scope > thead > tr > th"), (th) => th.textContent.trim());
    for (const row of table.querySelectorAll(":scope > tbody > tr")) {
      let col = 0;
      for (const cell of row.children) {
        if (cell.colSpan === 1 && heads[col] && !cell.hasAttribute("data-label")) cell.dataset.label = heads[col];
        col += cell.colSpan;
      }
    }
  }
  // Compare needs two different snapshots.
  const form = document.getElementById("compare-form");
  const button = document.getElementById("compare");
  if (form && button) {
    const check = () => {
      const a = form.querySelector("input[name=a]:checked");
      const b = form.querySelector("input[name=b]:checked");
      button.disabled = !a || !b || a.value === b.value;
    };
    form.addEventListener("change", check);
    check();
  }
  // Counts served while being counted: fetch them once the read lands
  // (the server waits for it) and put them in place.
  for (const el of document.querySelectorAll("[data-counting]")) {
    fetch(el.dataset.counting, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
      .then((html) => { el.outerHTML = html; })
      .catch(() => {
        const note = el.querySelector(".counting");
        if (note) note.textContent = "The counts could not be read just now. Reload the page to try again.";
        el.removeAttribute("aria-busy");
      });
  }
  // A force-release asks once more, naming the key.
  for (const f of document.querySelectorAll("form.release")) {
    f.addEventListener("submit", (ev) => {
      const row = f.closest("tr");
      const key = row ? row.querySelector("td:nth-child(3)").textContent : "this claim";
      if (!window.confirm("Force-release the claim of key " + key + "? The next attempt with the key runs afresh.")) {
        ev.preventDefault();
      }
    });
  }
  // A Run page follows its Run live (stream.go): each event sets the
  // status, the version and a line of the timeline. EventSource sends the
  // session's cookie, reconnects by itself with Last-Event-ID, and stops
  // when the server answers 204 (the Run finished and the page has its
  // last event). Without this script a reload shows the same.
  const head = document.querySelector("header[data-events]");
  if (head && window.EventSource) {
    const live = document.getElementById("run-live");
    const badge = document.getElementById("run-status");
    const version = document.getElementById("run-version");
    const updated = document.getElementById("run-updated");
    const timeline = document.getElementById("run-timeline");
    const say = (text) => { if (live) { live.hidden = false; live.textContent = text; } };
    const es = new EventSource(head.dataset.events + "?last_event_id=" + encodeURIComponent(head.dataset.version));
    const cell = (text, cls) => {
      const td = document.createElement("td");
      if (cls) td.className = cls;
      td.textContent = text;
      return td;
    };
    const onEvent = (msg) => {
      let ev;
      try { ev = JSON.parse(msg.data); } catch (_) { return; }
      const when = ev.occurred_at.replace("T", " ").replace(/(\.\d+)?Z$/, "");
      if (badge) { badge.textContent = ev.status; badge.className = "badge b-" + ev.status; }
      if (version) version.textContent = String(ev.seq);
      if (updated) updated.textContent = when;
      if (timeline) {
        const tr = document.createElement("tr");
        const badgeCell = document.createElement("td");
        const b = document.createElement("span");
        b.className = "badge b-" + ev.status;
        b.textContent = ev.status;
        badgeCell.appendChild(b);
        let detail = "version " + ev.seq;
        if (ev.result_ref) detail += "; result: " + ev.result_ref;
        if (ev.error) detail += "; error: " + ev.error.code + (ev.error.message ? ": " + ev.error.message : "");
        tr.append(cell(when, "mono"), cell("status"), badgeCell, cell("live", "muted"), cell(detail, "wrap"));
        timeline.appendChild(tr);
      }
      const terminal = ev.status === "succeeded" || ev.status === "failed" || ev.status === "cancelled";
      say(terminal ? "The Run finished; this page is up to date." : "Following this Run live.");
      if (terminal) es.close();
    };
    for (const type of ["run.admitted", "run.dispatched", "run.running", "run.succeeded", "run.failed", "run.cancelled"]) {
      es.addEventListener(type, onEvent);
    }
    es.addEventListener("open", () => say("Following this Run live."));
    es.addEventListener("error", () => {
      if (es.readyState === EventSource.CLOSED) say("Live updates stopped; reload the page to see the Run as it is now.");
    });
  }
});
