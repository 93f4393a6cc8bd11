/* trajlog viewer, part 2 of 4 (data.js, views.js, runs.js, shell.js: one shared scope,
 * see data.js): the renderers of each view -- chat, trajectory (with its
 * timeline), model history, context, goals, sessions, events -- one function
 * per view in `views`, each filtering by the search and drawing into its
 * <section>; rows of long views go through listView (a VList); count and
 * render are shell.js's. */
// ---- views ----------------------------------------------------------------
function messageText(e) {
  const d = data(e);
  return isObj(d) ? blocksText(d.content) : blocksText(d);
}
const outputText = (e) => { const d = data(e); return isObj(d) ? blocksText(d.output) : ""; };
function callArgs(s, seq, callId) {
  const e = ev(s, seq), d = e && data(e);
  if (!d || typeof d !== "object") return undefined;
  if (Array.isArray(d.tool_calls)) {
    for (const c of d.tool_calls) if (c && c.id === callId) return c.arguments;
  }
  return d.arguments;
}
function chatNode(s, n, relayout) {
  const box = el("div", "chat-item");
  const e = ev(s, n[1]);
  if (n[0] !== 1) {
    const b = box.appendChild(el("div", "bubble role-" + n[2]));
    b.dataset.seq = n[1];
    const m = b.appendChild(el("div", "meta"));
    m.appendChild(el("span", "role", n[2]));
    m.appendChild(document.createTextNode(" \u00b7 seq " + n[1] + " \u00b7 " + clock(e[2])));
    const t = erasedOf(e);
    if (t) { b.classList.add("erased"); b.appendChild(tombstone(t)); return box; }
    const d = data(e);
    if (isObj(d) && typeof d.reasoning === "string" && d.reasoning)
      b.appendChild(el("div", "reasoning", d.reasoning));
    b.appendChild(long(messageText(e), "c" + s + ":" + n[1], relayout));
    return box;
  }
  const [, seq, callId, name, status, rseq] = n;
  const c = box.appendChild(el("div", "tool-card card-" + status));
  c.dataset.status = status;
  c.dataset.seq = seq;
  const head = c.appendChild(el("div", "meta"));
  head.appendChild(el("span", "tool-name", name || "tool"));
  head.appendChild(document.createTextNode(" #" + callId + " \u00b7 seq " + seq +
    (rseq >= 0 ? "\u2192" + rseq : "")));
  head.appendChild(el("span", "status status-" + status, status));
  const args = callArgs(s, seq, callId);
  if (args !== undefined && args !== null && !(typeof args === "object" &&
      Object.keys(args).length === 0))
    c.appendChild(long(args, "a" + s + ":" + seq + ":" + callId, relayout));
  if (rseq >= 0) {
    const r = ev(s, rseq), t = erasedOf(r);
    if (t) c.appendChild(tombstone(t));
    else c.appendChild(long(outputText(r), "o" + s + ":" + rseq, relayout));
  }
  return c.parentNode;
}
function chatMatches(s, n) {
  if (n[0] !== 1) return evMatches(ev(s, n[1]));
  re.lastIndex = 0;
  if (re.test(String(n[3])) || re.test(String(n[2])) || re.test(String(n[4]))) return true;
  return matchesValue(callArgs(s, n[1], n[2])) || (n[5] >= 0 && evMatches(ev(s, n[5])));
}
let list = null;   // the current view's virtual list, if it has one
function listView(host, items, render, estimate, emptyText) {
  if (!items.length) { host.appendChild(el("div", "empty", emptyText)); return; }
  const at = items.identity ? (i) => i : (i) => items[i];
  list = VList(host, items.length, (i, relayout) => render(at(i), relayout), estimate, listKey());
}
const views = {};      // looked up with Object.hasOwn only (the hash names a view)
views.chat = function (host) {
  const s = S[cur];
  const items = re ? s.chat.filter((n) => chatMatches(cur, n)) : s.chat;
  count(items.length, s.chat.length);
  listView(host, items, (n, r) => chatNode(cur, n, r), 70, "no messages");
};

function spanTimes(s, x, turnEnd) {
  const t0 = ev(s, x[3] !== null ? x[3] : x[2])[2];
  const t1 = x[4] !== null ? ev(s, x[4])[2] : turnEnd;
  return [t0, Math.max(t0, t1)];
}
// A turn shows its first STEPS_PAGE steps (tree and timeline), and more on demand.
const STEPS_PAGE = 100;
const stepsShown = new Map();   // turn key -> how many of its steps are drawn
function timeline(s, turn, t0, t1, shown) {
  const box = el("div", "timeline");
  const span = Math.max(1, t1 - t0);
  const pct = (t) => (100 * (t - t0) / span).toFixed(3) + "%";
  function row(cls, label, a, b, shown) {
    const r = box.appendChild(el("div", "tl-row " + cls));
    r.appendChild(el("div", "tl-label", label)).title = label;
    const tr = r.appendChild(el("div", "tl-track"));
    const bar = tr.appendChild(el("div", "tl-bar"));
    bar.style.left = pct(a);
    bar.style.width = "calc(" + (100 * (b - a) / span).toFixed(3) + "% + 1px)";
    r.appendChild(el("div", "tl-dur", dur(shown)));
    return r;
  }
  turn[3].slice(0, shown).forEach((st, k) => {
    const first = st[0] !== null ? st[0] : (st[2][0] ? st[2][0][0] : null);
    if (first === null) return;
    let last = st[1];
    if (last === null) {
      last = first;
      for (const x of st[3]) if (x[4] !== null) last = Math.max(last, x[4]);
    }
    const a = ev(s, first)[2], b = ev(s, last)[2];
    row("tl-step", "step " + (k + 1), a, b, b - a);
    for (const x of st[3]) {
      const [ta, tb] = spanTimes(s, x, t1);
      const r = row("tl-tool" + (x[6] || x[7] === "error" ? " error" : "") +
        (x[4] === null ? " open" : ""), "  " + (x[1] || "tool") + " #" + x[0], ta, tb,
        x[5] !== null ? x[5] : tb - ta);
      r.dataset.status = x[7];
    }
  });
  if (turn[3].length > shown) box.appendChild(el("div", "tl-more meta", "\u2026 " +
    (turn[3].length - shown).toLocaleString() + " more step(s) not drawn"));
  const axis = el("div", "tl-axis");
  axis.appendChild(el("span", null, clock(t0)));
  axis.appendChild(el("span", null, dur(t1 - t0)));
  axis.appendChild(el("span", null, clock(t1)));
  box.appendChild(axis);
  return box;
}
function turnBody(s, turn, t0, t1, key) {
  const body = el("div", "turn-body");
  const total = turn[3].length, shown = Math.min(total, stepsShown.get(key) || STEPS_PAGE);
  body.appendChild(timeline(s, turn, t0, t1, shown));
  const ul = body.appendChild(el("ul", "tree"));
  turn[3].slice(0, shown).forEach((st, k) => {
    const li = ul.appendChild(el("li", "step-node"));
    li.appendChild(el("span", "label", "step " + (k + 1)));
    li.appendChild(el("span", "dur", "seq " + st[0] + ".." + st[1]));
    const sub = li.appendChild(el("ul", "tree"));
    for (const r of st[2]) {
      const n = sub.appendChild(el("li", "req-node"));
      n.appendChild(el("span", "label", (str(r[1]) || "request") + " \u00b7 seq " + r[0]));
      const bits = [];
      if (r[2] !== null) bits.push("latency " + dur(r[2]));
      if (r[3] !== null) bits.push("ttft " + dur(r[3]));
      if (r[4] !== null) bits.push(str(r[4]) + " tokens in");
      if (r[5] !== null) bits.push(str(r[5]) + " out");
      bits.push(str(r[6]) + " tool call(s)");
      n.appendChild(el("span", "dur", bits.join(", ")));
    }
    for (const x of st[3]) {
      const bad = x[6] || x[7] === "error";
      const n = sub.appendChild(el("li", "tool-node" + (bad ? " error" : "")));
      n.dataset.status = x[7];
      n.appendChild(el("span", "label", (x[1] || "tool") + " #" + x[0]));
      n.appendChild(el("span", "status status-" + x[7], x[7]));
      const [ta, tb] = spanTimes(s, x, t1);
      n.appendChild(el("span", "dur", dur(x[5] !== null ? x[5] : tb - ta) + " \u00b7 seq " +
        x[2] + (x[4] !== null ? "\u2192" + x[4] : "")));
      if (x[4] !== null) {
        const r = ev(s, x[4]), t = erasedOf(r);
        if (t) n.appendChild(tombstone(t));
        else {
          n.appendChild(el("div", "dur mono", ellipsis(outputText(r), 160)));
        }
      }
    }
  });
  if (shown < total) {
    const more = body.appendChild(el("div", "steps-more"));
    more.appendChild(el("span", "meta", "showing " + shown.toLocaleString() + " of " +
      total.toLocaleString() + " steps "));
    const page = (n) => () => { stepsShown.set(key, n); refresh(); };
    more.appendChild(el("button", "link next-steps", "show next " +
      Math.min(STEPS_PAGE, total - shown))).addEventListener("click", page(shown + STEPS_PAGE));
    more.appendChild(el("button", "link all-steps", "show all " + total.toLocaleString()))
      .addEventListener("click", page(total));
  }
  return body;
}
// the text the trajectory shows of a turn: labels, models, tools, results
function turnMatches(turn, i) {
  const hit = (v) => { re.lastIndex = 0; return re.test(str(v)); };
  if (hit("Turn " + (i + 1)) || (turn[2] && hit("interrupted"))) return true;
  for (let k = 0; k < turn[3].length; k++) {
    const st = turn[3][k];
    if (hit("step " + (k + 1))) return true;
    for (const r of st[2]) if (hit(r[1])) return true;
    for (const x of st[3]) {
      if (hit(x[1]) || hit(x[0]) || hit(x[7]) ||
          (x[4] !== null && evMatches(ev(cur, x[4])))) return true;
    }
  }
  return false;
}
views.trajectory = function (host) {
  const s = S[cur], turns = s.traj;
  const last = s.last >= 0 ? ev(cur, s.last)[2] : 0;
  const shown = [];
  turns.forEach((turn, i) => { if (!re || turnMatches(turn, i)) shown.push(i); });
  count(shown.length, turns.length);
  // the runs and checkpoint markers of the session, above its turns (runs.js)
  if (!re && (listOf(s.runs).length || listOf(marksOf(s).cp).length ||
      listOf(marksOf(s).rec).length))
    host.appendChild(runStrip(cur));
  if (!shown.length) { host.appendChild(el("div", "empty", "no turns")); return; }
  const few = turns.length <= 20;
  for (const i of shown) {
    const turn = turns[i];
    const first = turn[0] !== null ? turn[0] : firstSeq(turn);
    const t0 = first !== null ? ev(cur, first)[2] : last;
    const t1 = turn[1] !== null ? ev(cur, turn[1])[2] : last;
    let tools = 0, errors = 0;
    for (const st of turn[3]) for (const x of st[3]) { tools++; if (x[6] || x[7] === "error") errors++; }
    const box = host.appendChild(el("div", "turn" + (errors ? " has-error" : "")));
    box.dataset.turn = i;
    const head = box.appendChild(el("div", "turn-head"));
    head.appendChild(el("span", "t-title", "Turn " + (i + 1)));
    head.appendChild(el("span", "dur", "seq " + turn[0] + ".." + (turn[1] === null ? "open" : turn[1]) +
      " \u00b7 " + dur(t1 - t0) + " \u00b7 " + turn[3].length + " step(s) \u00b7 " + tools +
      " tool call(s)" + (turn[2] ? " \u00b7 interrupted" : "")));
    if (errors) head.appendChild(el("span", "status status-error", errors + " error(s)"));
    const key = "turn" + cur + ":" + i;
    let open = few || expanded.has(key) || (i === shown[shown.length - 1] && !re);
    if (re && shown.length <= 20) open = true;
    const toggle = () => {
      if (box.lastChild.classList.contains("turn-body")) { box.lastChild.remove(); expanded.delete(key); }
      else { box.appendChild(turnBody(cur, turn, t0, t1, key)); expanded.add(key); }
    };
    head.addEventListener("click", toggle);
    if (open) box.appendChild(turnBody(cur, turn, t0, t1, key));
  }
};
function firstSeq(turn) {
  for (const st of turn[3]) {
    if (st[0] !== null) return st[0];
    if (st[2].length) return st[2][0][0];
  }
  return null;
}

const ROLE = { u: "user", a: "assistant", t: "tool" };
function histNode(s, m, relayout) {
  const box = el("div", "hist-item");
  if (m[0] === "s") {
    const [, lo, hi, summary] = m;
    const key = "range" + s + ":" + lo;
    const open = expanded.has(key);
    const c = box.appendChild(el("div", "hist-summary " + (open ? "expanded" : "folded")));
    c.dataset.from = lo;
    c.dataset.to = hi;
    c.appendChild(el("div", "meta", "compacted: seq " + lo + "\u2013" + hi + " (" +
      (hi - lo + 1) + " events hidden from the model)"));
    c.appendChild(el("div", "text", str(summary)));
    const b = c.appendChild(el("button", "expand", open ? "fold" : "show the " +
      (hi - lo + 1) + " raw events"));
    b.addEventListener("click", () => {
      if (open) expanded.delete(key); else expanded.add(key);
      relayout();
    });
    if (open) {
      const list = c.appendChild(el("div", "hist-raw-list"));
      const end = Math.min(hi, lo + 199);
      for (let q = lo; q <= end; q++) {
        const e = ev(s, q);
        if (!e) continue;
        const row = list.appendChild(el("div", "hist-raw"));
        row.dataset.seq = q;
        row.appendChild(el("span", "seq", q));
        row.appendChild(el("b", null, tname(e) + " "));
        const t = erasedOf(e);
        if (t) row.appendChild(tombstone(t));
        else {
          const d = data(e), text = blocksText(isObj(d) && (has(d, "content") || has(d, "output")) ?
            (d.content !== undefined ? d.content : d.output) : d);
          row.appendChild(el("span", null, ellipsis(text, 300)));
        }
      }
      if (hi > end) list.appendChild(el("div", "meta", "\u2026 and " + (hi - end) +
        " more (Events view)"));
    }
    return box;
  }
  const e = ev(s, m[1]);
  const c = box.appendChild(el("div", "hist-msg role-" + m[0]));
  c.dataset.seq = m[1];
  const meta = c.appendChild(el("div", "meta"));
  meta.appendChild(el("span", "role", has(ROLE, m[0]) ? ROLE[m[0]] : str(m[0])));
  const raw = data(e), d = isObj(raw) ? raw : {};
  meta.appendChild(document.createTextNode(" \u00b7 seq " + m[1] +
    (d.call_id ? " \u00b7 #" + str(d.call_id) : "") + (d.is_error ? " \u00b7 error" : "")));
  const t = erasedOf(e);
  if (t) { c.appendChild(tombstone(t)); return box; }
  if (typeof d.reasoning === "string" && d.reasoning) c.appendChild(el("div", "reasoning", d.reasoning));
  const text = m[0] === "t" ? blocksText(d.output) : blocksText(d.content);
  if (text) c.appendChild(long(text, "h" + s + ":" + m[1], relayout));
  if (Array.isArray(d.tool_calls) && d.tool_calls.length)
    c.appendChild(el("div", "meta mono", "tool calls: " +
      d.tool_calls.map((x) => isObj(x) ? str(x.name) + "#" + str(x.id) : str(x)).join(", ")));
  return box;
}
views.history = function (host) {
  const s = S[cur];
  const items = re ? s.hist.filter((m) => m[0] === "s" ? matchesValue(m[3]) :
    evMatches(ev(cur, m[1]))) : s.hist;
  count(items.length, s.hist.length);
  listView(host, items, (m, r) => histNode(cur, m, r), 60, "no model history");
};

function firstMatch(v) {      // the first string in a JSON value that matches the search
  if (typeof v === "string") { re.lastIndex = 0; return re.test(v) ? v : null; }
  if (v === null || typeof v !== "object") return null;
  for (const k in v) { const m = firstMatch(v[k]); if (m !== null) return m; }
  return null;
}
function preview(e) {
  const t = erasedOf(e);
  if (t) return "[erased: " + str(t.reason) + "]";
  const hit = re ? firstMatch(data(e)) : null;
  if (hit !== null) {            // the match in its context, rather than the start
    re.lastIndex = 0;
    const at = hit.search(re), start = Math.max(0, at - 40);
    return (start ? "\u2026" : "") + cut(from(hit, start), at + 80 - start).replace(/\s+/g, " ") +
      (at + 80 < hit.length ? "\u2026" : "");
  }
  const d = data(e);
  const v = isObj(d) ? (d.content !== undefined ? d.content :
    d.output !== undefined ? d.output : d.text !== undefined ? d.text : d) : d;
  return ellipsis(blocksText(v).replace(/\s+/g, " "), 90);
}
views.context = function (host) {
  const s = S[cur];
  const items = re ? s.ctx.filter((q) => evMatches(ev(cur, q))) : s.ctx;
  count(items.length, s.ctx.length);
  if (!items.length) { host.appendChild(el("div", "empty", "no context/injection events")); return; }
  for (const q of items) {
    const e = ev(cur, q);
    const box = host.appendChild(el("div", "ctx-injection"));
    box.dataset.seq = q;
    box.appendChild(el("h3", null, "context/injection \u00b7 seq " + q + " \u00b7 " +
      when(e && e[2])));
    const t = erasedOf(e);
    if (t) { box.appendChild(tombstone(t)); continue; }   // the tombstone only
    const raw = e && data(e), d = isObj(raw) ? raw : {};
    const chars = num(d.chars), sha = typeof d.summary_sha256 === "string" ? d.summary_sha256 : "";
    box.appendChild(el("div", "meta", [
      "policy " + (str(d.policy) || "-") + (d.policy_version !== undefined ?
        " v" + str(d.policy_version) : ""),
      "target model " + (str(d.target_model) || "-"),
      chars !== null ? chars.toLocaleString() + " characters used" : "",
      sha ? "summary sha256 " + sha.slice(0, 16) : ""].filter(Boolean).join(" \u00b7 ")));
    const cols = box.appendChild(el("div", "ctx-cols"));
    const sel = Array.isArray(d.selected) ? d.selected : [];
    const a = cols.appendChild(el("div"));
    a.appendChild(el("h4", null, "selected (" + sel.length + ")"));
    const ul = a.appendChild(el("ul", "ctx-selected"));
    for (const x of sel) {
      const li = ul.appendChild(el("li", "ctx-item"));
      const se = Number.isInteger(x) && x >= 0 && x <= S[cur].last ? ev(cur, x) : null;
      li.dataset.seq = str(x);
      li.appendChild(el("b", null, "seq " + str(x) + " "));
      if (se) li.appendChild(el("span", null, tname(se) + ": " + preview(se)));
    }
    const b = cols.appendChild(el("div"));
    const ex = isObj(d.excluded) ? d.excluded : {};
    const total = Object.values(ex).reduce((p, n) => p + (num(n) || 0), 0);
    b.appendChild(el("h4", null, "excluded (" + total + ")"));
    const ul2 = b.appendChild(el("ul", "ctx-excluded"));
    const runs = isObj(d.excluded_seqs) ? d.excluded_seqs : {};
    for (const k of Object.keys(ex)) {
      const li = ul2.appendChild(el("li", "ctx-excl"));
      li.dataset.reason = k;
      li.appendChild(el("span", "reason", k));
      li.appendChild(el("span", null, " \u00d7 " + str(ex[k])));
      // which events this reason kept out (recorded as runs [first, last])
      const seqs = [];
      for (const r of has(runs, k) && Array.isArray(runs[k]) ? runs[k] : []) {
        if (!Array.isArray(r) || !Number.isInteger(r[0]) || !Number.isInteger(r[1])) continue;
        for (let q = Math.max(0, r[0]); q <= r[1] && seqs.length <= 50; q++) seqs.push(q);
      }
      if (!seqs.length) continue;
      const sub = li.appendChild(el("ul", "ctx-excluded-events"));
      for (const q of seqs.slice(0, 50)) {
        const xe = ev(cur, q);
        const item = sub.appendChild(el("li", "ctx-item"));
        item.dataset.seq = q;
        item.appendChild(el("b", null, "seq " + q + " "));
        if (xe) item.appendChild(el("span", null, tname(xe) + ": " + preview(xe)));
      }
      if (num(ex[k]) > 50) sub.appendChild(el("li", "meta", "\u2026 " + (ex[k] - 50) + " more"));
    }
    if (!total) ul2.appendChild(el("li", "meta", "nothing excluded"));
  }
};

views.goals = function (host) {
  const s = S[cur];
  const items = re ? s.goals.filter((q) => evMatches(ev(cur, q))) : s.goals;
  count(items.length, s.goals.length);
  const skips = isObj(s.skipped) ? s.skipped : {};
  const skipped = Object.keys(skips).length;
  host.appendChild(el("div", "meta", s.goals.length + " goal change(s), " + skipped +
    " malformed and skipped; current revision " + (s.goal_rev === null ? "none" : s.goal_rev)));
  if (!items.length) { host.appendChild(el("div", "empty", "no goal/change events")); return; }
  let applied = null;
  for (const q of s.goals) if (!has(skips, String(q))) applied = q;
  for (const q of items) {
    const e = ev(cur, q), d = data(e);
    const t = erasedOf(e);     // an erased change shows its tombstone, not why it was skipped
    const why = has(skips, String(q)) ? skips[String(q)] : undefined;
    const box = host.appendChild(el("div", "goal-rev" + (why !== undefined ? " skipped" : "") +
      (q === applied ? " current" : "")));
    box.dataset.seq = q;
    const rev = !t && isObj(d) && d.revision !== undefined ? d.revision : "?";
    const h = box.appendChild(el("h3", null, "revision " + str(rev) + " \u00b7 seq " + q +
      " \u00b7 " + when(e[2])));
    if (q === applied) h.appendChild(el("span", "badge", "current"));
    if (isObj(d) && d.cleared === true) h.appendChild(el("span", "badge", "cleared"));
    if (t) { box.appendChild(tombstone(t)); continue; }
    if (why !== undefined) box.appendChild(el("div", "goal-skip-reason", "skipped: " + str(why)));
    box.appendChild(long(str(isObj(d) && d.goal !== undefined ? d.goal : d),
      "g" + cur + ":" + q, refresh));
  }
};

// The tree of sessions; a search keeps the sessions whose id, title, preset,
// cwd or kind match, and their ancestors (dimmed) to show where they are.
function sessionMatches(s) {
  for (const v of [s.id, titleOf(s), s.preset, s.cwd, kindOf(s), s.damage]) {
    re.lastIndex = 0;
    if (typeof v === "string" && re.test(v)) return true;
  }
  return false;
}
views.sessions = function (host) {
  const hit = S.map((s) => !re || sessionMatches(s));
  const keep = S.map(() => false);
  const visit = (i, depth) => {     // whether i or a descendant matches
    let any = hit[i];
    if (depth < 1000) for (const k of S[i].kids) if (visit(k, depth + 1)) any = true;
    return (keep[i] = any);
  };
  visit(0, 0);
  const matched = hit.filter(Boolean).length;
  count(matched, S.length);
  if (!matched) { host.appendChild(el("div", "empty", "no sessions")); return; }
  if (D.root_parent) {
    host.appendChild(el("div", "meta", "the root session was made from " + D.root_parent +
      ", which is not in this file"));
  }
  function node(i) {
    const s = S[i];
    const li = el("li");
    const box = li.appendChild(el("div", "tree-node" + (i === cur ? " current" : "") +
      (re ? (hit[i] ? " match" : " dim") : "")));
    box.dataset.session = s.id;
    const a = box.appendChild(el("a", "tree-link", s.id));
    a.href = "#session=" + encodeURIComponent(s.id) + "&view=sessions";
    const bits = [kindOf(s)];
    if (s.preset) bits.push("preset " + str(s.preset));
    if (s.seed) bits.push("seed " + str(s.seed));
    bits.push("depth " + str(s.depth), countOf(s) + " events", when(s.created));
    box.appendChild(el("span", "dur", bits.join(" \u00b7 ")));
    const title = titleOf(s);      // a non-string title is ignored, as in the header
    if (title) box.appendChild(el("div", "text", title));
    if (s.damage !== null && s.damage !== undefined)
      box.appendChild(el("div", "goal-skip-reason", "damaged header: " + str(s.damage)));
    const kids = S[i].kids.filter((k) => keep[k]);
    if (kids.length) {
      const ul = li.appendChild(el("ul", "session-tree"));
      for (const k of kids) ul.appendChild(node(k));
    }
    return li;
  }
  const ul = host.appendChild(el("ul", "session-tree"));
  ul.appendChild(node(0));
};

function evRow(s, seq, relayout) {
  const e = ev(s, seq);
  const row = el("div", "ev-row");
  row.dataset.seq = seq;
  if (seq < S[s].base || (S[s].inh < 0 && seq < S[s].seed)) row.classList.add("inherited");
  const t = erasedOf(e);
  if (t) row.classList.add("erased");
  const line = row.appendChild(el("div", "ev-line"));
  line.appendChild(el("span", "seq", seq));
  line.appendChild(el("span", "type", tname(e)));
  line.appendChild(el("span", "time", clock(e[2])));
  line.appendChild(el("span", "src", e[3] >= 0 ? SOURCES[e[3]] : ""));
  line.appendChild(el("span", "data", preview(e)));
  const key = "e" + s + ":" + seq;
  if (expanded.has(key)) {
    row.classList.add("expanded");
    const det = row.appendChild(el("div", "ev-detail"));
    det.addEventListener("click", (x) => x.stopPropagation());
    if (e[5]) det.appendChild(el("div", "meta mono", "envelope " + JSON.stringify(e[5])));
    if (t) det.appendChild(tombstone(t));
    det.appendChild(long(JSON.stringify(data(e), null, 1) || "null", "d" + s + ":" + seq, relayout));
  }
  row.addEventListener("click", () => {
    if (expanded.has(key)) expanded.delete(key); else expanded.add(key);
    relayout();
  });
  return row;
}
views.events = function (host) {
  const s = S[cur], n = s.last + 1;
  let items;
  if (!re && !typeFilter) {
    items = { length: n, identity: true };   // every seq: no array of 100k built
  } else {
    const tf = typeFilter ? TYPES.indexOf(typeFilter) : -1;
    const out = [];
    for (let q = 0; q < n; q++) {
      const e = ev(cur, q);
      if (!e || (tf >= 0 && e[1] !== tf)) continue;
      if (re && !evMatches(e)) continue;
      out.push(q);
    }
    items = out;
  }
  count(items.length, n);
  listView(host, items, (q, r) => evRow(cur, q, r), 24, "no events");
};
