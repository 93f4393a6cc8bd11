/* trajlog viewer, part 4 of 4 (data.js, views.js, runs.js, shell.js: one shared scope,
 * see data.js): the header, the tabs and the hash navigation
 * (#session=..&view=..), the search box and the type filter, rendering and
 * refreshing the current view, and the start -- the first render, then the
 * remaining gzipped blocks in the background. */
// ---- shell: header, tabs, search, routing -----------------------------------
function count(shown, total) {
  $("search-count").textContent = re || (view === "events" && typeFilter) ?
    shown.toLocaleString() + " of " + total.toLocaleString() : total.toLocaleString() + " items";
}
function header() {
  const s = S[cur];
  $("session-title").textContent = titleOf(s) || "session";
  $("session-id").textContent = str(s.id);
  const kind = kindOf(s);
  $("session-meta").textContent = (s.damage !== null && s.damage !== undefined ?
    "damaged header: " + str(s.damage) : kind + " \u00b7 " + countOf(s).toLocaleString() +
    " events") + (s.cwd ? " \u00b7 cwd " + str(s.cwd) : "") +
    (s.preset ? " \u00b7 " + str(s.preset) : "") +
    (S.length > 1 ? " \u00b7 " + S.length + " sessions in this file" : "") +
    " \u00b7 times in UTC";
  const p = $("session-parent");
  p.textContent = "";
  if (typeof s.parent === "string" && s.parent) {
    p.appendChild(document.createTextNode("parent "));
    if (byId.has(s.parent)) {
      const a = p.appendChild(el("a", "parent-link", s.parent.slice(0, 8)));
      a.href = "#session=" + encodeURIComponent(s.parent) + "&view=" + view;
    } else p.appendChild(el("code", null, s.parent));
  }
  const sel = $("type-filter");
  const seen = new Set();
  for (let q = 0; q <= s.last; q++) { const e = ev(cur, q); if (e) seen.add(e[1]); }
  while (sel.options.length > 1) sel.remove(1);
  for (const t of [...seen].map((i) => TYPES[i]).sort()) {
    const o = document.createElement("option");
    o.value = t; o.textContent = t;
    sel.appendChild(o);
  }
  sel.value = seen.has(TYPES.indexOf(typeFilter)) ? typeFilter : "";
  typeFilter = sel.value;
}
// What refresh keeps across a re-render: the scroll position, and of a
// virtual list its measured heights and first row in view (see VList).
let keepY = -1, keepList = null;
const listKey = () => view + "\u0000" + cur + "\u0000" + query + "\u0000" + typeFilter;
function refresh() {          // the current view again, at the same scroll position
  const host = $("view-" + view);
  keepY = host.scrollTop;
  keepList = list ? list.keep() : null;
  render();
  if (!list && keepY >= 0) host.scrollTop = keepY;
  keepY = -1;
  keepList = null;
}
function render() {
  for (const b of document.querySelectorAll("#tabs button"))
    b.classList.toggle("active", b.dataset.view === view);
  $("type-filter").classList.toggle("shown", view === "events");
  for (const v of document.querySelectorAll(".view")) {
    const on = v.id === "view-" + view;
    v.classList.toggle("active", on);
    if (!on && v.firstChild) { v.textContent = ""; v.onscroll = null; }
  }
  const host = $("view-" + view);
  host.textContent = "";
  host.onscroll = null;
  list = null;
  if (keepY < 0) host.scrollTop = 0;
  views[view](host);
}
function route() {
  const h = new URLSearchParams(location.hash.slice(1));
  const sid = h.get("session"), v = h.get("view");
  const before = cur;
  if (sid !== null && byId.has(sid)) cur = byId.get(sid);
  if (v && Object.hasOwn(views, v)) view = v;    // never "constructor", "__proto__", ...
  if (cur !== before || !$("session-id").textContent) header();
  render();
}
for (const b of document.querySelectorAll("#tabs button")) {
  b.addEventListener("click", () => {
    location.hash = "session=" + encodeURIComponent(S[cur].id) + "&view=" + b.dataset.view;
  });
}
let timer = 0;
$("search").addEventListener("input", (e) => {
  clearTimeout(timer);
  timer = setTimeout(() => {
    const q = e.target.value;
    $("search-count").textContent = "searching\u2026";
    loadAll().then(() => {
      if (q !== e.target.value) return;
      query = q;
      re = query ? new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gi") : null;
      render();
      document.body.dataset.searched = query;
    });
  }, 150);
});
$("type-filter").addEventListener("change", (e) => { typeFilter = e.target.value; render(); });
window.addEventListener("hashchange", route);
// for tests and the console: the document, and the current list's paint
window.trajlogViewer = { doc: D, render: render, paint: () => list && list.paint() };
route();
Promise.all(loading.filter((p) => p)).then(() => {
  if (redraw) { clearTimeout(redraw); redraw = 0; refresh(); }
  document.body.dataset.ready = "1";
  performance.mark("trajlog-ready");
  // the rest in the background, one chunk at a time, for search
  let c = 0;
  const next = () => { while (c < BLOB_NODES.length && loading[c]) c++;
    if (c < BLOB_NODES.length) need(c).then(() => setTimeout(next, 0)); };
  setTimeout(next, 0);
}, (err) => {
  document.body.dataset.ready = "error";
  $("view-" + view).appendChild(el("div", "empty", "cannot decode this page's data: " + err));
});
