/* trajlog viewer, part 3 of 4 (data.js, views.js, runs.js, shell.js: one shared
 * scope, see data.js): the Runs view -- a band per run envelope and a marker
 * per checkpoint, recovery attempt and fork on the log's seq axis, then the
 * run cards (model, state, integrity, cost on four surfaces), the
 * checkpoints (valid or invalidated and why) and the recovery attempts (each
 * check and its verdict, the outcome) -- and runStrip, the same bands and
 * markers drawn above the Trajectory view.  document.py's `runs` and `marks`
 * are the data (derived by trajlog, not read from one event). */
// ---- runs and checkpoints ---------------------------------------------------
const SURFACES = ["inference", "retrieval", "tools", "persistence"];
const USAGE_NAMES = { requests: "req", input_tokens: "in", output_tokens: "out", calls: "calls",
  events: "ev" };
const shortId = (v) => str(v).slice(0, 8);
const marksOf = (s) => isObj(s.marks) ? s.marks : { cp: [], rec: [], fork: [] };
const listOf = (v) => Array.isArray(v) ? v : [];
function costText(f) {          // one surface: amount, then its usage counters
  if (!isObj(f)) return "-";
  const parts = [];
  if (num(f.amount)) parts.push(String(+f.amount.toPrecision(6)));
  for (const k of Object.keys(f)) {
    if (k === "amount" || num(f[k]) === null) continue;
    parts.push(f[k].toLocaleString() + " " + (has(USAGE_NAMES, k) ? USAGE_NAMES[k] : k));
  }
  return parts.join(", ") || "-";
}
function markLabel(kind, m) {
  if (kind === "cp") return "checkpoint " + str(m.stage) + " \u00b7 seq " + m.seq +
    (m.valid ? "" : " \u00b7 invalidated: " + str(m.reason));
  if (kind === "rec") return str(m.action) + " from checkpoint " + str(m.checkpoint) +
    " \u2192 " + (str(m.outcome) || "no outcome") + " \u00b7 seq " + m.seq;
  return "fork (" + str(m.role) + ") from checkpoint " + str(m.checkpoint) + " \u00b7 seq " + m.seq;
}
function runStrip(si) {         // bands and markers on the seq axis of session si
  const s = S[si], n = Math.max(1, s.last + 1), mk = marksOf(s);
  const box = el("div", "timeline runs-timeline");
  const pct = (q) => (100 * Math.max(0, Math.min(q, n)) / n).toFixed(3) + "%";
  for (const r of listOf(s.runs)) {
    const row = box.appendChild(el("div", "tl-row run-row"));
    row.dataset.run = str(r[0]);
    row.appendChild(el("div", "tl-label", "run " + shortId(r[0]) + " " + str(r[1]))).title = str(r[0]);
    const bar = row.appendChild(el("div", "tl-track")).appendChild(
      el("div", "tl-bar run-bar state-" + str(r[2]) + " integrity-" + str(r[3])));
    const end = r[6] !== null ? r[6] : s.last;
    bar.style.left = pct(r[5]);
    bar.style.width = "calc(" + (100 * (end - r[5] + 1) / n).toFixed(3) + "% + 1px)";
    bar.title = str(r[2]) + ", integrity " + str(r[3]);
    row.appendChild(el("div", "tl-dur", str(r[3])));
  }
  const all = [...listOf(mk.cp).map((m) => ["cp", m]), ...listOf(mk.rec).map((m) => ["rec", m]),
    ...listOf(mk.fork).map((m) => ["fork", m])];
  if (all.length) {
    const row = box.appendChild(el("div", "tl-row mark-row"));
    row.appendChild(el("div", "tl-label", "checkpoints"));
    const track = row.appendChild(el("div", "tl-track"));
    for (const [kind, m] of all) {
      const state = kind === "cp" ? (m.valid ? "valid" : "invalidated") :
        kind === "rec" ? str(m.outcome) || "none" : "fork";
      const dot = track.appendChild(el("div", "tl-mark mark-" + kind + " mark-" + state));
      dot.dataset.seq = m.seq;
      dot.style.left = pct(m.seq);
      dot.title = markLabel(kind, m);
    }
    row.appendChild(el("div", "tl-dur", all.length + " mark(s)"));
  }
  const axis = box.appendChild(el("div", "tl-axis"));
  axis.appendChild(el("span", null, "seq 0"));
  axis.appendChild(el("span", null, "the log's seq axis"));
  axis.appendChild(el("span", null, "seq " + s.last));
  return box;
}
function runCard(r) {
  const [id, model, state, integrity, detail, a, b, parent, cost, t0, t1, error, sw] = r;
  const box = el("div", "run-card integrity-" + str(integrity));
  box.dataset.run = str(id);
  box.dataset.integrity = str(integrity);
  const h = box.appendChild(el("h3", null, "run " + str(id)));
  h.appendChild(el("span", "badge model", str(model) || "no model"));
  h.appendChild(el("span", "badge run-state state-" + str(state), str(state)));
  h.appendChild(el("span", "badge run-integrity integrity-" + str(integrity),
    "integrity " + str(integrity)));
  box.appendChild(el("div", "meta", ["seq " + a + ".." + (b === null ? "open" : b),
    when(t0) + (t1 !== null ? " \u2192 " + when(t1) + " (" + dur(t1 - t0) + ")" : ""),
    parent ? "parent run " + str(parent) : "root run"].join(" \u00b7 ")));
  if (detail) box.appendChild(el("div", "goal-skip-reason", str(detail)));
  if (error) box.appendChild(el("div", "goal-skip-reason", "error: " + str(error)));
  const table = box.appendChild(el("table", "run-cost"));
  for (const k of SURFACES) {
    const tr = table.appendChild(el("tr"));
    tr.dataset.surface = k;
    tr.appendChild(el("th", null, k));
    tr.appendChild(el("td", null, costText(isObj(cost) ? cost[k] : null)));
  }
  for (const x of listOf(sw)) {
    if (!isObj(x)) continue;
    box.appendChild(el("div", "meta", "model switch at seq " + str(x.seq) + ": " + str(x.old) +
      " \u2192 " + str(x.new) + (x.reason ? " (" + str(x.reason) + ")" : "")));
  }
  return box;
}
function cpItem(m) {
  const box = el("div", "cp-item" + (m.valid ? "" : " invalidated"));
  box.dataset.seq = m.seq;
  box.dataset.valid = m.valid ? "1" : "0";
  const h = box.appendChild(el("h3", null, str(m.stage) + " \u00b7 seq " + m.seq + " \u00b7 " +
    when(m.time)));
  h.appendChild(el("span", "badge cp-state", m.valid ? "valid" : "invalidated"));
  box.appendChild(el("div", "meta", ["workspace " + (str(m.workspace_revision) || "-"),
    m.policy_version ? "policy " + str(m.policy_version) : "",
    m.run_id ? "run " + str(m.run_id) : ""].filter(Boolean).join(" \u00b7 ")));
  if (!m.valid) box.appendChild(el("div", "goal-skip-reason", "invalidated at seq " +
    str(m.invalidated_by) + ": " + (str(m.reason) || "no reason") + (m.current_revision ?
      " (" + str(m.workspace_revision) + " \u2192 " + str(m.current_revision) + ")" : "")));
  return box;
}
function recItem(m) {
  const outcome = str(m.outcome) || "none";
  const box = el("div", "rec-item outcome-" + outcome);
  box.dataset.seq = m.seq;
  box.dataset.outcome = outcome;
  const h = box.appendChild(el("h3", null, str(m.action) + " \u00b7 seq " + m.seq + " \u00b7 from " +
    (m.checkpoint !== null ? "checkpoint " + str(m.checkpoint) + " (" + str(m.stage) + ")" :
      "no valid checkpoint")));
  h.appendChild(el("span", "badge rec-outcome", m.outcome ? outcome + " \u00b7 seq " +
    str(m.outcome_seq) : "no outcome recorded"));
  if (m.awaiting) h.appendChild(el("span", "badge", "awaiting " + str(m.awaiting)));
  if (listOf(m.invalidated).length) box.appendChild(el("div", "meta", "invalidated checkpoint(s) " +
    listOf(m.invalidated).join(", ") + " first"));
  const ul = box.appendChild(el("ul", "rec-checks"));
  for (const c of listOf(m.checks)) {
    const li = ul.appendChild(el("li", "rec-check " + (c.ok ? "ok" : "fail")));
    li.dataset.check = str(c.name);
    li.appendChild(el("span", "status " + (c.ok ? "status-done" : "status-error"), c.ok ? "ok" : "fail"));
    li.appendChild(el("b", null, " " + str(c.name) + " "));
    li.appendChild(el("span", null, str(c.detail)));
  }
  return box;
}
views.runs = function (host) {
  const s = S[cur], mk = marksOf(s);
  const keep = (items) => re ? items.filter((x) => matchesValue(x)) : items;
  const groups = [["Runs", keep(listOf(s.runs)), runCard],
    ["Checkpoints", keep(listOf(mk.cp)), cpItem],
    ["Recovery attempts", keep(listOf(mk.rec)), recItem],
    ["Forks from a checkpoint", keep(listOf(mk.fork)), (m) => el("div", "cp-item fork",
      markLabel("fork", m) + " \u00b7 " + str(m.other_session) + ": " + str(m.reason))]];
  const total = listOf(s.runs).length + listOf(mk.cp).length + listOf(mk.rec).length +
    listOf(mk.fork).length;
  count(groups.reduce((p, g) => p + g[1].length, 0), total);
  if (!total) { host.appendChild(el("div", "empty", "no runs and no checkpoints")); return; }
  host.appendChild(runStrip(cur));
  for (const [title, items, draw] of groups) {
    if (!items.length) continue;
    const sec = host.appendChild(el("div", "runs-group"));
    sec.appendChild(el("h4", null, title + " (" + items.length + ")"));
    for (const x of items) sec.appendChild(draw(x));
  }
};
