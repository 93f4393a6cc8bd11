/* trajlog viewer, part 1 of 3: data.js, views.js, shell.js.
 * Not standalone scripts: page.py joins the three, in that order, inside the
 * one strict-mode function viewer.html wraps around them, so they share its
 * names (views.js and shell.js use what is declared here; VList reads shell.js's
 * keepY, and a decoded block calls shell.js's refresh).
 *
 * This part: the embedded document and the shared state; the long strings of
 * event data, decoded from the gzipped blocks on demand; text helpers
 * (formatting, tombstones, collapsible long texts); search matching and
 * highlighting; the virtual list. */
performance.mark("trajlog-start");
const D = JSON.parse(document.getElementById("trajlog-data").textContent);
performance.mark("trajlog-parsed");
const S = D.sessions, TYPES = D.types, SOURCES = D.sources;
const BIG_CHARS = 2000, BIG_LINES = 30, PREVIEW_LINES = 12, PREVIEW_CHARS = 1200;
const byId = new Map(S.map((s, i) => [s.id, i]));
let cur = 0, view = "chat", query = "", re = null, typeFilter = "";
const expanded = new Set();   // keys of opened long texts, raw ranges and event rows
const $ = (id) => document.getElementById(id);

// ---- helpers ------------------------------------------------------------
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) put(e, String(text));
  return e;
}
// Text into an element, with the search matches marked (text nodes only).
function put(e, text) {
  if (!re || !text) { e.textContent = text; return; }
  re.lastIndex = 0;
  let last = 0, m, n = 0;
  while ((m = re.exec(text)) && n++ < 200) {
    if (m.index > last) e.appendChild(document.createTextNode(text.slice(last, m.index)));
    e.appendChild(el("mark", "hl")).textContent = m[0];
    last = m.index + m[0].length;
    if (!m[0].length) re.lastIndex++;
  }
  if (last < text.length) e.appendChild(document.createTextNode(text.slice(last)));
}
function ev(s, seq) {          // the event row at seq, inherited prefixes included
  let x = S[s];
  while (seq < x.base && x.inh >= 0) x = S[x.inh];
  return x.ev[seq - x.base];
}
const tname = (e) => TYPES[e[1]];
// Long strings of event data live in gzipped blobs (BLOBS: one Uint8Array
// per chunk); a row's refs [path, chunk, offset, length] say where, and
// the strings are decoded the first time the row's data is read.
// A chunk is inflated when a row first needs it (and all of them in the
// background after the first render), so opening the page never waits for
// the whole log's text.
const BLOB_NODES = [...document.querySelectorAll("script.trajlog-blob")];
const BLOBS = BLOB_NODES.map(() => null), loading = BLOB_NODES.map(() => null);
const utf8 = new TextDecoder();
let redraw = 0;
function need(c) {
  if (!loading[c]) {
    loading[c] = inflate(BLOB_NODES[c]).then((b) => {
      BLOBS[c] = b;
      BLOB_NODES[c].textContent = "";   // the base64 text is no longer needed
      if (!redraw) redraw = setTimeout(() => { redraw = 0; refresh(); }, 0);
    });
  }
  return loading[c];
}
const loadAll = () => Promise.all(BLOB_NODES.map((_, c) => need(c)));
function data(e) {
  const refs = e[6];
  if (refs) {
    let missing = false;
    for (const r of refs) if (!BLOBS[r[1]]) { missing = true; need(r[1]); }
    if (missing) return e[4];   // shown without its long strings until the chunk is in
    e[6] = 0;
    for (const [path, chunk, at, size] of refs) {
      const text = utf8.decode(BLOBS[chunk].subarray(at, at + size));
      if (!path.length) { e[4] = text; continue; }
      let node = e[4];
      for (let i = 0; i < path.length - 1; i++) node = node[path[i]];
      node[path[path.length - 1]] = text;
    }
  }
  return e[4];
}
async function inflate(node) {
  const text = node.textContent;
  let bytes;
  if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(text);
  else {
    const bin = atob(text);
    bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  }
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
const erasedOf = (e) => (e && e[4] && typeof e[4] === "object" && e[4].erased) || null;
const str = (v) => (v === null || v === undefined) ? "" :
  (typeof v === "string" ? v : JSON.stringify(v, null, 1));
const pad = (n) => String(n).padStart(2, "0");
function clock(ms) {
  const d = new Date(ms);
  return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." +
    String(d.getMilliseconds()).padStart(3, "0");
}
function when(ms) {
  const d = new Date(ms);
  return isNaN(d.getTime()) ? "?" : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
function dur(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
  return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
}
function tombstone(t) {
  const who = t.actor || "unknown actor", why = t.reason || "no reason given";
  const at = typeof t.at === "number" ? t.at : t.time;
  const box = el("div", "tombstone", "erased by " + who + (typeof at === "number" ?
    " on " + when(at) : "") + ": " + why + " (tombstone " + (t.tombstone ?? t.tid ?? "?") +
    "; the payload is gone)");
  return box;
}
// A text that may be large: a preview and "show all" past 2,000 chars or 30 lines.
function long(value, key, relayout) {
  let text = value;
  if (typeof value !== "string") {
    text = JSON.stringify(value);
    if (text === undefined) text = String(value);
    else if (text.length > 100) text = JSON.stringify(value, null, 1);
  }
  const box = el("div", "long");
  let lines = 0, cut = -1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) {
    if (++lines === PREVIEW_LINES) cut = i;
    if (lines > 100000) break;
  }
  const big = text.length > BIG_CHARS || lines >= BIG_LINES;
  const open = !big || expanded.has(key);
  const pre = el("pre", "text");
  box.appendChild(pre);
  if (open) put(pre, text);
  else {
    box.classList.add("collapsed");
    let end = Math.min(PREVIEW_CHARS, text.length);
    if (cut >= 0 && cut < end) end = cut;
    put(pre, text.slice(0, end) + "\n\u2026");
  }
  if (big) {
    const b = el("button", open ? "show-all collapse" : "show-all",
      open ? "collapse" : "show all (" + (lines + (text.endsWith("\n") ? 0 : 1)) + " lines, " +
        text.length.toLocaleString() +
        " chars)");
    b.addEventListener("click", (e) => {
      e.stopPropagation();
      if (open) expanded.delete(key); else expanded.add(key);
      relayout();
    });
    box.appendChild(b);
  }
  return box;
}
function matchesValue(v) {    // search in a JSON value without stringifying it
  if (typeof v === "string") { re.lastIndex = 0; return re.test(v); }
  if (v === null || typeof v !== "object") {
    re.lastIndex = 0; return v !== undefined && re.test(String(v));
  }
  if (Array.isArray(v)) { for (const x of v) if (matchesValue(x)) return true; return false; }
  for (const k in v) if (matchesValue(v[k])) return true;
  return false;
}
function evMatches(e) {
  if (!e) return false;
  re.lastIndex = 0;
  if (re.test(TYPES[e[1]])) return true;
  re.lastIndex = 0;
  if (e[3] >= 0 && re.test(SOURCES[e[3]])) return true;
  return matchesValue(data(e));
}

// ---- the virtual list: rows of measured heights, only those in view exist ----
function VList(host, count, render, estimate) {
  const space = el("div", "vspace");
  host.appendChild(space);
  const h = new Float64Array(count).fill(estimate), top = new Float64Array(count + 1);
  const rows = new Map();
  let dirty = true;
  function sums() {
    for (let i = 0; i < count; i++) top[i + 1] = top[i] + h[i];
    space.style.height = top[count] + "px";
    dirty = false;
  }
  function find(y) {          // first row whose bottom is below y
    let lo = 0, hi = count;
    while (lo < hi) { const m = (lo + hi) >> 1; if (top[m + 1] <= y) lo = m + 1; else hi = m; }
    return lo;
  }
  function paint() {
    for (let pass = 0; pass < 4; pass++) {
      if (dirty) sums();
      const atEnd = host.scrollTop > 0 &&
        host.scrollTop + host.clientHeight >= host.scrollHeight - 2;
      const y0 = Math.max(0, host.scrollTop - space.offsetTop - 400);
      const y1 = host.scrollTop - space.offsetTop + host.clientHeight + 400;
      const a = find(y0);
      let b = a;
      while (b < count && top[b] < y1) b++;
      for (const [i, r] of rows) if (i < a || i >= b) { r.remove(); rows.delete(i); }
      for (let i = a; i < b; i++) {
        let r = rows.get(i);
        if (!r) {
          r = el("div", "vrow");
          r.dataset.i = i;
          r.appendChild(render(i, () => redo(i)));
          space.appendChild(r);
          rows.set(i, r);
        }
        r.style.top = top[i] + "px";
      }
      let changed = false;
      for (const [i, r] of rows) {
        const got = r.offsetHeight;
        if (got && Math.abs(got - h[i]) > 0.5) { h[i] = got; changed = true; }
      }
      if (!changed) return;
      dirty = true;
      sums();
      for (const [i, r] of rows) r.style.top = top[i] + "px";
      if (atEnd) host.scrollTop = host.scrollHeight;
    }
  }
  function redo(i) {
    const r = rows.get(i);
    if (r) { r.remove(); rows.delete(i); }
    paint();
  }
  host.onscroll = () => window.requestAnimationFrame(paint);
  if (keepY >= 0) { sums(); host.scrollTop = keepY; }
  paint();
  return { paint, redo, rows };
}
