// What a reader of a console page would miss at a width: shared by the
// browser tests (console.test.mjs, sso.test.mjs).

// layoutProblems runs in the page: it returns what a reader at this width
// would miss. The page must not scroll sideways; no element may reach
// past the viewport's edges (a value pushed off the screen); and no
// element may hide part of its content sideways, clipped or behind a
// scroll bar of its own (a value cut short, or a table to scroll inside
// the page). Vertical scrolling is fine.
export function layoutProblems() {
  const out = [];
  const root = document.documentElement;
  const vw = root.clientWidth;
  if (root.scrollWidth > vw + 1) out.push(`the page scrolls sideways: ${root.scrollWidth}px wide in ${vw}px`);
  const name = (el) => {
    const cls = typeof el.className === "string" && el.className.trim() ? "." + el.className.trim().split(/\s+/).join(".") : "";
    return el.tagName.toLowerCase() + cls + ` "${(el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 50)}"`;
  };
  for (const el of document.body.querySelectorAll("*")) {
    const cs = getComputedStyle(el);
    if (cs.display === "none" || cs.visibility === "hidden") continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 1 || r.left < -1) {
      out.push(`reaches past the viewport (${Math.round(r.left)} to ${Math.round(r.right)} of ${vw}px): ${name(el)}`);
    }
    if (cs.overflowX !== "visible" && el.scrollWidth > el.clientWidth + 1) {
      out.push(`hides part of its content sideways (${el.scrollWidth}px in ${el.clientWidth}px, overflow-x ${cs.overflowX}): ${name(el)}`);
    }
  }
  // A chart's text past the chart's edge is cut off by it.
  for (const t of document.querySelectorAll("svg text")) {
    const box = t.closest("svg").getBoundingClientRect();
    const r = t.getBoundingClientRect();
    if (box.width > 0 && r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1)) {
      out.push(`cut off by its chart: text "${t.textContent}"`);
    }
  }
  return out.slice(0, 12);
}

// The widths every page is checked at: a phone, a small laptop, a desktop.
export const widths = [390, 1024, 1440];
