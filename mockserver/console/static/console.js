// The mockserver console: a page over the server's journal. Hand-written, no build step, no
// dependency. Every value from the server is written as text (textContent, SVG text nodes):
// nothing it shows is ever parsed as HTML.
"use strict";

const BASE = "/__mockserver/console";
const token = new URLSearchParams(location.search).get("token") || "";
// generation: bumped by every new filter, so a page asked for under an older one is dropped.
const state = { filters: {}, newest: 0, older: null, selected: null, source: null, rows: new Map(), generation: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function query(extra) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries({ ...state.filters, ...(extra || {}) })) {
    if (value !== "" && value !== null && value !== undefined) params.set(key, value);
  }
  return params;
}

async function call(path, options) {
  const headers = token ? { "x-mockserver-admin-token": token } : {};
  const response = await fetch(path, { ...(options || {}), headers });
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).error.message; } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

const json = async (path, options) => (await call(path, options)).json();
const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
const clock = (epoch) => new Date(epoch * 1000).toISOString().slice(11, 23);

// ---- the list -------------------------------------------------------------------------------

function rowNode(row) {
  const status = row.status === null ? "none" : String(row.status);
  const request = el("td", { class: "request" }, el("span", { class: "path" }, row.method + " " + row.path + (row.stream ? " (stream)" : "")),
    row.preview ? el("span", { class: "preview" }, row.preview) : null);
  const tr = el("tr", { "data-id": row.id, onclick: () => open(row.id) },
    el("td", {}, row.id), el("td", {}, clock(row.time)), request, el("td", {}, row.session || ""),
    el("td", {}, row.model || ""), el("td", { class: "status-" + (status === "none" ? "none" : status[0]) }, status + (row.ended !== "done" ? " " + row.ended : "")),
    el("td", {}, row.source || ""), el("td", { class: "faults" }, row.faults.map((f) => el("span", { class: "chip fault" }, f))),
    el("td", {}, row.events || ""), el("td", {}, row.duration === null ? "" : (row.duration * 1000).toFixed(1)));
  if (state.selected === row.id) tr.classList.add("selected");
  return tr;
}

function show(row, fresh) {
  const body = document.querySelector("#rows tbody");
  const node = rowNode(row);
  const known = state.rows.get(row.id);
  if (known) { known.replaceWith(node); }
  else if (fresh) { node.classList.add("fresh"); body.prepend(node); trim(body); }
  else body.append(node);
  state.rows.set(row.id, node);
  if (row.session) addSession(row.session);
}

// The list holds at most MAX_ROWS rows: live rows push the oldest out, and "older" brings them back.
const MAX_ROWS = 500;
function trim(body) {
  while (state.rows.size > MAX_ROWS && body.lastElementChild) {
    const id = Number(body.lastElementChild.dataset.id);
    body.lastElementChild.remove();
    state.rows.delete(id);
    state.older = id + 1; // "older" asks for the rows below this one, itself included
    document.getElementById("older").hidden = false;
  }
}

function addSession(name) {
  const list = document.getElementById("sessions");
  if ([...list.options].some((o) => o.value === name)) return;
  list.append(el("option", { value: name }));
}

async function load(before) {
  const generation = state.generation;
  const page = await json(BASE + "/rows?" + query(before ? { before } : {}));
  if (generation !== state.generation) return false;
  if (!before) {
    document.querySelector("#rows tbody").replaceChildren();
    state.rows.clear();
    state.newest = page.newest;
  }
  page.rows.forEach((row) => show(row, false));
  state.older = page.next;
  document.getElementById("older").hidden = page.next === null;
  return true;
}

function listen() {
  if (state.source) state.source.close();
  const params = query({ after: state.newest });
  if (token) params.set("token", token);
  const source = new EventSource(BASE + "/feed?" + params);
  const live = document.getElementById("live");
  source.onopen = () => { live.textContent = "live"; live.classList.add("on"); };
  source.onerror = () => { live.textContent = "reconnecting…"; live.classList.remove("on"); };
  source.addEventListener("row", (event) => {
    const row = JSON.parse(event.data);
    state.newest = Math.max(state.newest, row.id);
    show(row, !state.rows.has(row.id));
    if (state.selected === row.id && row.ended !== "pending") open(row.id);
  });
  state.source = source;
}

// ---- one request opened ---------------------------------------------------------------------

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function section(title, ...children) { return [el("h3", {}, title), ...children]; }

function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

function answerParts(folded) {
  const parts = [];
  for (const t of folded.text) parts.push(...section(folded.text.length > 1 ? "text, choice " + t.index : "text", el("pre", { class: "answer-text" }, t.text)));
  for (const r of folded.reasoning) parts.push(...section("reasoning", el("pre", {}, r.text)));
  if (folded.tool_calls.length) {
    parts.push(...section("tool calls", ...folded.tool_calls.map((c) => el("div", { class: "tool-call" },
      el("strong", {}, c.name || "(unnamed)"), c.id ? el("span", { class: "hint" }, " " + c.id) : null,
      el("pre", {}, prettyJson(c.arguments))))));
  }
  if (folded.usage) parts.push(...section("usage", table(["field", "value"], Object.entries(folded.usage).map(([k, v]) => [k, pretty(v)]))));
  if (folded.logprobs.length) {
    parts.push(...section("logprobs", table(["token", "logprob", "top alternatives"], folded.logprobs.slice(0, 200).map((t) =>
      [JSON.stringify(t.token), t.logprob === null ? "" : Number(t.logprob).toFixed(4),
        t.top.map(([tok, lp]) => JSON.stringify(tok) + " " + Number(lp).toFixed(3)).join("  ")]))));
  }
  if (folded.error) parts.push(...section("error", el("pre", { class: "error" }, folded.error.message || pretty(folded.error))));
  return parts;
}

function prettyJson(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (_) { return text; }
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.append(document.createTextNode(String(text)));
  return node;
}

function timeline(line) {
  const width = 600, height = 86, left = 10, right = 590;
  const end = Math.max(line.duration || 0, ...line.events.map((e) => e.t), 1e-6);
  const x = (t) => left + (right - left) * (t / end);
  const root = svg("svg", { class: "timeline", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });
  root.append(svg("title", {}, `${line.events.length} events over ${(end * 1000).toFixed(1)} ms, ended ${line.ended}`));
  root.append(svg("line", { class: "axis", x1: left, y1: 56, x2: right, y2: 56 }));
  let previous = 0, widest = 0, at = 0;
  line.events.forEach((e, n) => {
    const mark = svg("line", { class: "mark", x1: x(e.t), y1: 20, x2: x(e.t), y2: 56, "data-t": e.t });
    mark.append(svg("title", {}, `#${n + 1} ${e.label} at ${(e.t * 1000).toFixed(2)} ms`));
    root.append(mark);
    if (n > 0 && e.t - previous > widest) { widest = e.t - previous; at = previous; }
    previous = e.t;
  });
  if (line.ended !== "done") root.append(svg("line", { class: "end", x1: x(end), y1: 12, x2: x(end), y2: 70 }));
  const first = line.events.length ? line.events[0].t : null;
  root.append(svg("text", { x: left, y: 84 }, "0"));
  root.append(svg("text", { x: right, y: 84, "text-anchor": "end" }, (end * 1000).toFixed(1) + " ms"));
  if (first !== null) {
    const late = x(first) > width / 2;
    root.append(svg("text", { x: late ? x(first) - 3 : x(first) + 3, y: 16, "text-anchor": late ? "end" : "start" },
      "first event " + (first * 1000).toFixed(1) + " ms"));
  }
  if (widest > 0) {
    const middle = (x(at) + x(at + widest)) / 2;
    root.append(svg("line", { class: "gap", x1: x(at), y1: 61, x2: x(at + widest), y2: 61 }));
    root.append(svg("text", { x: middle, y: 71, "text-anchor": middle > width - 60 ? "end" : middle < 60 ? "start" : "middle" },
      "widest gap " + (widest * 1000).toFixed(1) + " ms"));
  }
  const note = line.complete ? `${line.events.length} events; ended ${line.ended}` :
    `${line.events.length} of ${line.total} events kept; ended ${line.ended}`;
  return [root, el("p", { class: "hint timeline-note" }, note)];
}

async function open(id) {
  state.selected = id;
  for (const [key, node] of state.rows) node.classList.toggle("selected", key === id);
  const pane = document.getElementById("detail");
  let entry;
  try { entry = await json(BASE + "/entries/" + id); } catch (error) { pane.replaceChildren(el("p", { class: "error" }, error.message)); return; }
  const parts = [el("h2", {}, `#${entry.id} ${entry.method} ${entry.path}`),
    facts([["status", entry.status === null ? "none" : entry.status], ["ended", entry.ended], ["answered by", entry.source],
      ["answered from", entry.origin],
      ["session", entry.session], ["model", entry.model], ["seed", entry.seed], ["retry attempt", entry.retry_attempt || null],
      ["duration", entry.duration === null ? null : (entry.duration * 1000).toFixed(2) + " ms"], ["events", entry.events || null],
      ["bytes", entry.bytes], ["faults", entry.faults.length ? entry.faults.map((f) => el("span", { class: "chip fault" }, f)) : "none"]])];
  if (entry.timeline) parts.push(...section("stream timeline", ...timeline(entry.timeline)));
  parts.push(...answerParts(entry.folded));
  parts.push(...section("request body" + (entry.body_truncated ? " (summary: the body was too big to keep)" : ""), el("pre", { class: "request-body" }, pretty(entry.body))));
  parts.push(...section("response headers", table(["name", "value"], entry.answer_headers || [])));
  parts.push(el("details", {}, el("summary", {}, "answer as sent" + (entry.answer_truncated ? " (first 16 KiB)" : "")), el("pre", { class: "raw-answer" }, entry.answer)));
  pane.replaceChildren(...parts);
}

// ---- a session's trajectory ----------------------------------------------------------------

function said(item) {
  if (typeof item === "string") return [["user", item]];
  if (!item || typeof item !== "object") return [["", pretty(item)]];
  const role = item.role || item.type || "";
  let content = item.content ?? item.parts ?? item.output ?? item.arguments ?? item.text;
  if (Array.isArray(content)) content = content.map((p) => (p && typeof p === "object" ? (p.text ?? p.content ?? JSON.stringify(p)) : p)).join(" ");
  const lines = [[role, content === undefined || content === null ? "" : pretty(content)]];
  for (const call of item.tool_calls || []) lines.push([role + " → tool", (call.function || {}).name + " " + ((call.function || {}).arguments || "")]);
  return lines;
}

async function trajectory(after) {
  const pane = document.getElementById("trajectory");
  const session = state.filters.session;
  if (!session) { pane.replaceChildren(el("p", { class: "hint" }, "Filter by a session to follow its calls as one conversation.")); return; }
  const data = await json(BASE + "/trajectory?" + new URLSearchParams({ session, after: after || 0 }));
  const turns = data.turns.map((t) => el("div", { class: "turn", "data-id": t.id },
    el("div", { class: "hint" }, `#${t.id} ${t.path} → ${t.status}`),
    t.input.flatMap(said).map(([role, text]) => el("div", { class: "said" }, el("span", { class: "role" }, role), text)),
    t.folded.text.map((x) => el("div", { class: "said model" }, el("span", { class: "role" }, "model"), x.text)),
    t.folded.tool_calls.map((c) => el("div", { class: "said model" }, el("span", { class: "role" }, "model → tool"), c.name + " " + c.arguments)),
    t.folded.error ? el("div", { class: "said error" }, t.folded.error.message || pretty(t.folded.error)) : null,
    t.answer ? el("pre", {}, t.answer) : null));
  const later = data.next === null ? [] : [el("button", { type: "button", onclick: () => trajectory(data.next).catch(report) }, "later calls")];
  const earlier = after ? [el("button", { type: "button", onclick: () => trajectory(0).catch(report) }, "from the first call")] : [];
  pane.replaceChildren(el("h2", {}, "session " + session), ...earlier,
    ...(turns.length ? turns : [el("p", { class: "hint" }, "No calls yet.")]), ...later);
}

// ---- the server's state ---------------------------------------------------------------------

async function server() {
  const data = await json(BASE + "/state");
  const card = (title, body) => el("div", { class: "card" }, el("h3", {}, title), body);
  const sessions = table(["session", "requests", "rules", "faults"], data.sessions.map((s) => [s.session, s.requests, s.rules, s.faults]));
  const metrics = data.metrics ? el("pre", {}, pretty(data.metrics)) : el("p", { class: "hint" }, "no metrics");
  document.getElementById("server").replaceChildren(el("div", { class: "cards" },
    card("scripted rules", data.rules.length ? el("pre", {}, pretty(data.rules)) : el("p", { class: "hint" }, "none")),
    card("faults", el("pre", {}, pretty(data.faults))),
    card("sessions", sessions),
    card("cassettes", data.cassettes ? el("pre", {}, pretty(data.cassettes)) : el("p", { class: "hint" }, "no cassette directory")),
    card("journal", facts([["entries", data.journal.entries], ["kept at most", data.journal.size]])),
    card("metrics", metrics)));
}

// ---- wiring ---------------------------------------------------------------------------------

function tab(name) {
  for (const b of document.querySelectorAll("nav .tab")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".pane")) p.classList.toggle("active", p.id === name);
  if (name === "trajectory") trajectory().catch(report);
  if (name === "server") server().catch(report);
}

function report(error) { document.getElementById("live").textContent = error.message; }

async function applyFilters() {
  state.filters = Object.fromEntries([...new FormData(document.getElementById("filters"))].filter(([, v]) => v !== ""));
  document.getElementById("reset-session").disabled = !state.filters.session;
  state.generation += 1;
  if (state.source) { state.source.close(); state.source = null; }
  if (!(await load(null))) return;
  listen();
  const active = document.querySelector("nav .tab.active").dataset.tab;
  if (active !== "requests") tab(active);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("nav .tab")) b.addEventListener("click", () => tab(b.dataset.tab));
  document.getElementById("filters").addEventListener("submit", (event) => { event.preventDefault(); applyFilters().catch(report); });
  document.getElementById("older").addEventListener("click", () => load(state.older).catch(report));
  document.getElementById("reset-session").addEventListener("click", async () => {
    const session = state.filters.session;
    if (!session || !confirm(`Reset session ${session}: its rules, faults, journal and replay places?`)) return;
    await call("/__mockserver/reset?" + new URLSearchParams({ session }), { method: "POST" }).catch(report);
    await load(null).catch(report);
  });
  document.getElementById("download-journal").addEventListener("click", async () => {
    const session = state.filters.session;
    const response = await call("/__mockserver/journal" + (session ? "?" + new URLSearchParams({ session }) : "")).catch(report);
    if (!response) return;
    const link = el("a", { href: URL.createObjectURL(await response.blob()), download: `journal-${session || "all"}.json` });
    document.body.append(link); link.click(); link.remove();
  });
  applyFilters().catch(report);
});
