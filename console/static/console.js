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
});
