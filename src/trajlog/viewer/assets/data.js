/* trajlog viewer, part 1 of 4: data.js, views.js, runs.js, shell.js.
 * Not standalone scripts: page.py joins the four, in that order, inside the
 * one strict-mode function viewer.html wraps around them, so they share its
 * names (views.js and shell.js use what is declared here; VList reads shell.js's
 * keepY and keepList, listView its listKey,
 * and a decoded block calls shell.js's refresh).
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
// an opened text past HUGE_CHARS is monospace and breaks anywhere (a long
// unbroken string laid out in a proportional font freezes the tab), and
// past SLICE_CHARS it is shown a slice at a time
const HUGE_CHARS = 10000, SLICE_CHARS = 50000;
const byId = new Map(S.map((s, i) => [s.id, i]));
let cur = 0, view = "chat", query = "", re = null, typeFilter = "";
const expanded = new Set();   // keys of opened long texts, raw ranges and event rows
const shownChars = new Map(); // key of an opened huge text -> how many chars are shown
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
// ---- untrusted data: every field is checked before it is used ----------------
const has = (o, k) => o !== null && typeof o === "object" && Object.hasOwn(o, k);
const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const num = (v) => (typeof v === "number" && isFinite(v)) ? v : null;
// an erased event's data holds {erased: {tombstone, ...}} (as trajlog.events reads it)
function erasedOf(e) {
  const d = e && e[4], t = isObj(d) ? d.erased : null;
  return isObj(t) && Object.hasOwn(t, "tombstone") ? t : null;
}
const str = (v) => (v === null || v === undefined) ? "" :
  (typeof v === "string" ? v : JSON.stringify(v, null, 1));
// Content as Claude and OpenAI send it: a list of blocks; the text blocks are
// joined, the others summarised ("[image]", "[tool_use name]").
function blocksText(v) {
  if (!Array.isArray(v) || !v.length ||
      !v.every((b) => typeof b === "string" || (isObj(b) && typeof b.type === "string")))
    return str(v);
  return v.map((b) => {
    if (typeof b === "string") return b;
    if (typeof b.text === "string" && (b.type === "text" || b.type === "output_text" ||
        b.type === "input_text")) return b.text;
    if (b.type === "tool_result" && b.content !== undefined) return blocksText(b.content);
    const name = typeof b.name === "string" && b.name ? " " + b.name : "";
    return "[" + b.type + name + "]";
  }).join("\n");
}
// text.slice(0, n) that never splits a surrogate pair
function cut(text, n) {
  if (text.length <= n) return text;
  const c = text.charCodeAt(n - 1);
  return text.slice(0, c >= 0xD800 && c <= 0xDBFF ? n - 1 : n);
}
function from(text, i) {         // text.slice(i), never starting inside a pair
  const c = text.charCodeAt(i);
  return text.slice(c >= 0xDC00 && c <= 0xDFFF ? i + 1 : i);
}
const ellipsis = (text, n) => text.length > n ? cut(text, n - 1) + "\u2026" : text;
// a session's header fields, as the header and the Sessions view show them
// (a subagent's task is read through its header's pointer when the page is made)
const titleOf = (s) => (isObj(s.meta) && typeof s.meta.title === "string" && s.meta.title) ||
  (typeof s.task === "string" && s.task) || "";
const kindOf = (s) => str(s.origin) || (s.parent ? "fork" : "session");
const countOf = (s) => num(s.last) !== null ? s.last + 1 : 0;
// Times are shown in UTC throughout (the header says so).
const pad = (n) => String(n).padStart(2, "0");
function validDate(ms) {
  const d = typeof ms === "number" ? new Date(ms) : null;
  return d && !isNaN(d.getTime()) ? d : null;
}
function clock(ms) {
  const d = validDate(ms);
  if (!d) return ms === null || ms === undefined ? "-" : String(ms);
  return pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) +
    "." + String(d.getUTCMilliseconds()).padStart(3, "0");
}
function when(ms) {
  const d = validDate(ms);
  if (!d) return ms === null || ms === undefined ? "?" : String(ms);
  return d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}
function dur(ms) {             // rounded first, then split: never "1 min 60 s"
  if (num(ms) === null) return "";
  if (ms < 0) return "-" + dur(-ms);
  if (Math.round(ms) < 1000) return Math.round(ms) + " ms";
  if (Math.round(ms / 10) < 1000) return (Math.round(ms / 10) / 100).toFixed(2) + " s";
  if (Math.round(ms / 100) < 600) return (Math.round(ms / 100) / 10).toFixed(1) + " s";
  const all = Math.round(ms / 1000), h = Math.floor(all / 3600);
  const m = Math.floor((all % 3600) / 60), sec = all % 60;
  if (h) return h + " h " + m + " min" + (sec ? " " + sec + " s" : "");
  return m + " min " + sec + " s";
}
function tombstone(t) {
  const who = str(t.actor) || "unknown actor", why = str(t.reason) || "no reason given";
  const at = typeof t.at === "number" ? t.at : t.time;
  const box = el("div", "tombstone", "erased by " + who + (typeof at === "number" ?
    " on " + when(at) : "") + ": " + why + " (tombstone " + str(t.tombstone ?? t.tid ?? "?") +
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
  let lines = 0, nl = -1;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) {
    if (++lines === PREVIEW_LINES) nl = i;
    if (lines > 100000) break;
  }
  const big = text.length > BIG_CHARS || lines >= BIG_LINES;
  const open = !big || expanded.has(key);
  const pre = el("pre", "text");
  box.appendChild(pre);
  if (open) {
    if (text.length > HUGE_CHARS) pre.classList.add("huge");
    const upto = Math.min(text.length, shownChars.get(key) || SLICE_CHARS);
    const part = cut(text, upto);
    put(pre, part);
    if (part.length < text.length) {
      const more = box.appendChild(el("button", "show-more", "show more (" +
        (text.length - part.length).toLocaleString() + " chars left)"));
      more.addEventListener("click", (e) => {
        e.stopPropagation();
        shownChars.set(key, part.length + SLICE_CHARS);
        relayout();
      });
    }
  } else {
    box.classList.add("collapsed");
    let end = Math.min(PREVIEW_CHARS, text.length);
    if (nl >= 0 && nl < end) end = nl;
    put(pre, cut(text, end) + "\n\u2026");
  }
  if (big) {
    const b = el("button", open ? "show-all collapse" : "show-all",
      open ? "collapse" : "show all (" + (lines + (text.endsWith("\n") ? 0 : 1)) + " lines, " +
        text.length.toLocaleString() +
        " chars)");
    b.addEventListener("click", (e) => {
      e.stopPropagation();
      if (open) { expanded.delete(key); shownChars.delete(key); } else expanded.add(key);
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
  if (e[5] && matchesValue(e[5])) return true;     // the envelope (workspace revision, ...)
  return matchesValue(data(e));
}

// ---- the virtual list: rows of measured heights, only those in view exist ----
// Scroll anchoring: whenever measured heights change, the first row in view
// stays where it was on screen (rows above it that grow or shrink move
// scrollTop, not the content).  A re-render of the same list (a gzipped block
// decoded: shell.js's refresh) finds keepList, the heights measured so far
// and that anchor, so the view does not jump.
function VList(host, count, render, estimate, key) {
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
  function anchor() {         // the first row in view, and the view's top relative to it
    const y = host.scrollTop - space.offsetTop;
    const i = Math.min(find(Math.max(0, y)), count - 1);
    return { i, off: y - top[i] };
  }
  function paint() {
    for (let pass = 0; pass < 4; pass++) {
      if (dirty) sums();
      const atEnd = host.scrollTop > 0 &&
        host.scrollTop + host.clientHeight >= host.scrollHeight - 2;
      const at = anchor();
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
      else host.scrollTop = space.offsetTop + top[at.i] + at.off;
    }
  }
  function redo(i) {
    const r = rows.get(i);
    if (r) { r.remove(); rows.delete(i); }
    paint();
  }
  const keep = () => ({ key, h: h.slice(), ...anchor() });
  host.onscroll = () => window.requestAnimationFrame(paint);
  if (keepList && keepList.key === key && keepList.h.length === count) {
    h.set(keepList.h);
    sums();
    host.scrollTop = space.offsetTop + top[keepList.i] + keepList.off;
  } else if (keepY >= 0) { sums(); host.scrollTop = keepY; }
  paint();
  return { paint, redo, rows, keep };
}
