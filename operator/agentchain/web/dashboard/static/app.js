// agentchain dashboard: one small script, no dependencies, no build step.
//
// Every value shown comes from JSON and is written with textContent, text nodes or
// attribute setters, never innerHTML: agent output is text, whatever it contains.
// The page's Content-Security-Policy enforces Trusted Types, so an accidental
// innerHTML with a string would throw instead of rendering markup.
"use strict";

const state = { csrf: null, streams: [], timers: [] };

// --- DOM helpers --------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function seg(value) {
  return encodeURIComponent(String(value));
}

function jobHref(ns, name) {
  return `/ui/jobs/${seg(ns)}/${seg(name)}`;
}

function chainHref(ns, id) {
  return `/ui/chains/${seg(ns)}/${seg(id)}`;
}

function link(href, text) {
  return el("a", { href }, text);
}

function phaseBadge(state) {
  const value = String(state || "pending").toLowerCase();
  return el("span", { class: `phase phase-${value.replace(/[^a-z]/g, "")}`, "data-phase": value }, value);
}

function seconds(value) {
  if (value === null || value === undefined) return "";
  if (value < 60) return `${value.toFixed(value < 10 ? 1 : 0)} s`;
  const m = Math.floor(value / 60);
  return `${m} min ${Math.round(value - 60 * m)} s`;
}

// One format for every time: the API mixes "Z" and "+00:00", and seconds are enough.
function when(value) {
  const at = Date.parse(value || "");
  return Number.isNaN(at) ? (value || "") : new Date(at).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function since(start, end) {
  const a = Date.parse(start || "");
  const b = end ? Date.parse(end) : Date.now();
  return Number.isNaN(a) || Number.isNaN(b) ? null : (b - a) / 1000;
}

// --- HTTP -----------------------------------------------------------------------------
class HttpError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.error)) || `HTTP ${status}`);
    this.status = status;
  }
}

async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => null);
  if (response.status === 401) showLogin();
  if (!response.ok) throw new HttpError(response.status, body);
  return body;
}

async function postJSON(url, data) {
  const headers = { "Content-Type": "application/json" };
  if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin", headers, body: JSON.stringify(data || {}),
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new HttpError(response.status, body);
  return body;
}

function stream(url, handlers) {
  const source = new EventSource(url, { withCredentials: true });
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
  }
  source.addEventListener("reload", () => { source.close(); route(); });
  source.addEventListener("open", () => { document.getElementById("live").hidden = false; });
  source.addEventListener("error", () => { document.getElementById("live").hidden = true; });
  state.streams.push(source);
  return source;
}

function closeStreams() {
  for (const source of state.streams) source.close();
  for (const timer of state.timers) clearInterval(timer);
  state.streams = [];
  state.timers = [];
  document.getElementById("live").hidden = true;
}

// --- login ----------------------------------------------------------------------------
function showLogin() {
  closeStreams();
  clear(document.getElementById("main"));
  document.getElementById("login").hidden = false;
  document.getElementById("logout").hidden = true;
  document.getElementById("token").focus();
}

async function login(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  const error = document.getElementById("login-error");
  error.textContent = "";
  try {
    const session = await postJSON("/ui/login", { token: input.value });
    input.value = "";
    state.csrf = session.csrf;
    document.getElementById("login").hidden = true;
    route();
  } catch (err) {
    error.textContent = err.message;
  }
}

async function logout() {
  try {
    await postJSON("/ui/api/logout", {});
  } finally {
    state.csrf = null;
    showLogin();
  }
}

// --- jobs list --------------------------------------------------------------------------
const FILTERS = ["namespace", "agent", "phase", "chain", "repository"];
const PHASES = ["", "Pending", "Queued", "AwaitingApproval", "Waiting", "Running", "Succeeded",
  "Failed", "Skipped", "Cancelled"];

function filterForm(params) {
  const form = el("form", { id: "filters", class: "filters" });
  for (const name of FILTERS) {
    const value = params.get(name) || "";
    const input = name === "phase"
      ? el("select", { name }, PHASES.map((p) => el("option", { value: p, selected: p === value }, p || "any phase")))
      : el("input", { name, value, placeholder: name, size: 14 });
    form.append(el("label", {}, input));
  }
  const sort = params.get("sort") || "created";
  const order = params.get("order") || "desc";
  form.append(
    el("select", { name: "sort", title: "sort by" },
      ["created", "agent", "phase", "name", "namespace"].map((s) => el("option", { value: s, selected: s === sort }, `sort: ${s}`))),
    el("select", { name: "order" },
      [["desc", "descending"], ["asc", "ascending"]].map(([v, t]) => el("option", { value: v, selected: v === order }, t))),
    el("button", { type: "submit" }, "Apply"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value) next.set(key, String(value));
    history.pushState(null, "", `/ui/?${next}`);
    route();
  });
  return form;
}

function jobRow(job) {
  return el("tr", { "data-job": `${job.namespace}/${job.id}` },
    el("td", {}, link(jobHref(job.namespace, job.id), job.id)),
    el("td", {}, job.namespace),
    el("td", {}, job.agentRole),
    el("td", { class: "state" }, phaseBadge(job.state || job.phase)),
    el("td", {}, job.chainId ? link(chainHref(job.namespace, job.chainId), job.chainId) : ""),
    el("td", {}, job.chainDepth ?? ""),
    el("td", {}, job.parentJobId ? link(jobHref(job.namespace, job.parentJobId), job.parentJobId) : ""),
    el("td", {}, job.exitCode ?? ""),
    el("td", { class: "nowrap" }, when(job.createdAt)),
  );
}

async function jobsPage(main, params) {
  const query = new URLSearchParams();
  for (const key of [...FILTERS, "sort", "order", "continue"]) if (params.get(key)) query.set(key, params.get(key));
  query.set("limit", "50");
  const page = await getJSON(`/ui/api/jobs?${query}`);
  const body = el("tbody", {}, page.items.map(jobRow));
  const table = el("table", { class: "jobs" },
    el("thead", {}, el("tr", {}, ["job", "namespace", "agent", "phase", "chain", "depth", "parent", "exit", "created"].map((h) => el("th", {}, h)))),
    body);
  const pager = el("p", { class: "pager" }, `${page.total} job(s) match. `);
  if (params.get("continue")) {
    const first = new URLSearchParams(params); first.delete("continue");
    pager.append(link(`/ui/?${first}`, "first page"), " ");
  }
  if (page.next) {
    const next = new URLSearchParams(params); next.set("continue", page.next);
    pager.append(link(`/ui/?${next}`, "next page →"));
  }
  main.append(el("h1", {}, "AgentJobs"), filterForm(params), table, pager);
  const live = new URLSearchParams();
  if (params.get("namespace")) live.set("namespace", params.get("namespace"));
  if (params.get("chain")) live.set("chain", params.get("chain"));
  // New jobs join the first page of the default order; others change in place.
  const newestFirst = !params.get("continue") && (params.get("sort") || "created") === "created"
    && (params.get("order") || "desc") === "desc" && !params.get("repository");
  const wanted = (job) => (!params.get("agent") || job.agentRole === params.get("agent"))
    && (!params.get("phase") || [job.phase, job.state, job.status].map((v) => String(v).toLowerCase())
      .includes(params.get("phase").toLowerCase()));
  stream(`/ui/api/events?${live}`, {
    job: (job) => {
      const key = `${job.namespace}/${job.id}`;
      const row = [...body.rows].find((r) => r.getAttribute("data-job") === key);
      if (row && job.deleted) row.classList.add("deleted");
      else if (row) row.replaceWith(jobRow(job));
      else if (!job.deleted && newestFirst && wanted(job)) {
        body.prepend(jobRow(job));
        if (body.rows.length > 50) body.lastElementChild.remove();
      }
    },
  });
}

// --- chain view -----------------------------------------------------------------------
function edgeLabel(edge) {
  if (!edge) return null;
  const parts = [edge.condition || (edge.action === "spawned" ? "condition met" : null), edge.action,
    edge.reason && edge.reason !== "ChildSpawned" ? edge.reason : null].filter(Boolean);
  return el("span", { class: `edge edge-${edge.action}`, title: edge.message || "" }, parts.join(" · "));
}

function nodeCard(node, namespace) {
  const name = node.deleted ? el("span", { class: "job-name" }, node.id) : link(jobHref(namespace, node.id), node.id);
  const facts = [
    node.depth !== null && node.depth !== undefined ? `depth ${node.depth}` : null,
    node.exitCode !== null && node.exitCode !== undefined ? `exit ${node.exitCode}` : null,
    node.durationSeconds !== null ? seconds(node.durationSeconds)
      : node.startedAt ? `${seconds(since(node.startedAt))} so far` : null,
    node.deleted ? "AgentJob deleted (from the chain's record)" : null,
  ].filter(Boolean);
  const card = el("div", { class: `node state-${node.state}`, "data-job": node.id, "data-state": node.state },
    el("div", { class: "node-head" }, el("strong", { class: "agent" }, node.agent || "?"), " ", phaseBadge(node.state)),
    el("div", { class: "node-name" }, name),
    el("div", { class: "facts" }, facts.join(" · ")),
    node.reason ? el("div", { class: "reason" }, node.reason, node.message ? `: ${node.message}` : "") : null,
  );
  for (const ending of node.endings || []) {
    card.append(el("div", { class: `ending ending-${ending.action}` },
      `next: ${ending.action}`, ending.reason ? ` (${ending.reason})` : "", ending.message ? ` — ${ending.message}` : ""));
  }
  return card;
}

function chainTree(layout) {
  const edges = new Map(layout.edges.map((e) => [e.to, e]));
  const items = new Map();
  const root = el("ul", { class: "tree" });
  for (const row of layout.rows) {
    const node = layout.nodes[row.id];
    const li = el("li", { "data-level": row.level }, edgeLabel(edges.get(row.id)), nodeCard(node, layout.namespace));
    items.set(row.id, li);
    const parent = node.parent && items.get(node.parent);
    if (parent && row.level > 0) {
      let list = parent.querySelector(":scope > ul");
      if (!list) { list = el("ul"); parent.append(list); }
      list.append(li);
    } else {
      root.append(li);
    }
  }
  return root;
}

function chainSummary(layout) {
  const t = layout.totals;
  const states = Object.entries(t.byState).map(([k, v]) => `${v} ${k}`).join(", ");
  const wall = since(t.startedAt, layout.complete ? t.endedAt : null);
  return el("p", { class: "summary", id: "chain-summary", "data-complete": String(layout.complete) },
    layout.complete ? el("strong", {}, `complete: ${layout.outcome || "?"}`) : el("strong", {}, "in progress"),
    ` · ${t.jobs} job(s): ${states}`,
    wall !== null ? ` · ${seconds(wall)} wall time` : "",
    ` · ${seconds(t.runSeconds)} run time`,
    t.usage ? ` · usage ${usageText(t.usage)} (${t.usage.reportedBy} job(s) reported)` : "",
    layout.lastJob ? ` · last job ${layout.lastJob}` : "");
}

// A follow-up round on a chain's pull request links to the chain it continues, and that
// chain to its rounds (ids are label values; every text goes in as text).
function chainLineage(namespace, layout) {
  const chainLink = (id) => link(`/ui/chains/${seg(namespace)}/${seg(id)}`, id);
  const parts = [];
  if (layout.continues) {
    parts.push(`Follow-up round ${layout.continues.round} of chain `, chainLink(layout.continues.chainId), ". ");
  }
  const rounds = layout.rounds || [];
  if (rounds.length) {
    parts.push("Follow-up rounds on its pull request: ");
    rounds.forEach((r, i) => {
      parts.push(i ? ", " : "", `round ${r.round} `, chainLink(r.chainId), ` (${r.state})`);
    });
  }
  return parts.length ? el("p", { id: "chain-lineage" }, ...parts) : null;
}

async function chainPage(main, namespace, chainId) {
  const layout = await getJSON(`/ui/api/chains/${seg(namespace)}/${seg(chainId)}`);
  const holder = el("div", { id: "chain" });
  const actions = chainActions(layout);
  let last = layout;
  const draw = (value) => {
    last = value;
    if (actions && value.complete) actions.hidden = true;
    clear(holder).append(chainSummary(value), chainTree(value));
  };
  draw(layout);
  // Running steps' "so far" and the wall time move on between events.
  state.timers.push(setInterval(() => { if (!last.complete) draw(last); }, 1000));
  main.append(el("h1", {}, "Chain ", el("code", {}, chainId)), el("p", {}, `namespace ${namespace}`));
  if (layout.traceUrl) main.append(el("p", {}, link(layout.traceUrl, "trace"), " of this chain"));
  const lineage = chainLineage(namespace, layout);
  if (lineage) main.append(lineage);
  if (actions) main.append(actions);
  main.append(holder);
  stream(`/ui/api/chains/${seg(namespace)}/${seg(chainId)}/events`, { chain: draw });
}

// --- actions (the job API's flow control, as this session) ------------------------------
const ENDED = new Set(["Succeeded", "Failed", "Cancelled", "Skipped"]);

function actionButton(label, url, id) {
  const button = el("button", { type: "button", class: `action action-${label.toLowerCase()}`, id });
  button.textContent = label;
  button.addEventListener("click", async () => {
    const note = document.getElementById("action-note");
    for (const b of document.querySelectorAll("button.action")) b.disabled = true;
    note.textContent = `${label}: asking…`;
    try {
      await postJSON(url, {});
      note.textContent = `${label}: asked; the page updates when the operator acts.`;
    } catch (err) {
      note.textContent = `${label} refused: ${err.message}`;
      for (const b of document.querySelectorAll("button.action")) b.disabled = false;
    }
  });
  return button;
}

function jobActions(j) {
  if (ENDED.has(j.phase)) return null;
  const base = `/ui/api/jobs/${seg(j.namespace)}/${seg(j.id)}`;
  const buttons = [];
  if (j.phase === "AwaitingApproval") {
    buttons.push(actionButton("Approve", `${base}/approve`, "approve"), actionButton("Reject", `${base}/reject`, "reject"));
  }
  buttons.push(actionButton("Stop", `${base}/stop`, "stop"));
  return el("div", { class: "actions" }, ...buttons, el("span", { id: "action-note", class: "note", role: "status" }));
}

function chainActions(layout) {
  if (layout.complete) return null;
  const url = `/ui/api/chains/${seg(layout.namespace)}/${seg(layout.chainId)}/stop`;
  return el("div", { class: "actions" }, actionButton("Stop", url, "stop-chain"),
    el("span", { id: "action-note", class: "note", role: "status" }));
}

function usageText(u) {
  if (!u) return "";
  // Only runtimes that split their tokens report input and output; a total may sum
  // jobs that did and jobs that did not (splitBy counts the former).
  const split = u.inputTokens !== undefined || u.outputTokens !== undefined
    ? ` (${u.inputTokens ?? 0} in / ${u.outputTokens ?? 0} out${u.splitBy !== undefined && u.splitBy !== u.reportedBy ? ` over ${u.splitBy} job(s)` : ""})`
    : "";
  return `${u.tokens} tokens${split} · ${u.cost} ${u.currency}`;
}

// --- job detail ---------------------------------------------------------------------------
function row(label, ...value) {
  return el("tr", {}, el("th", {}, label), el("td", {}, ...value));
}

function pre(text, attrs) {
  return el("pre", attrs || {}, text ?? "");
}

function promptBlock(prompt) {
  const box = el("div", { class: "prompt", id: "prompt" });
  if (prompt.chainContext) {
    box.append(el("div", { class: "chain-context-label" }, "<chain-context> — the previous agent's output, added by the operator"),
      pre(prompt.chainContext, { class: "chain-context", id: "chain-context" }));
  }
  box.append(el("div", { class: "prompt-label" }, "original prompt"),
    prompt.original ? pre(prompt.original, { id: "original-prompt" })
      : el("p", { class: "note", id: "original-prompt" }, "(none: the job carried no prompt of its own and its agent's template rendered nothing)"),
    el("p", { class: "note" }, prompt.note));
  return box;
}

function jsonBlock(value, empty) {
  return value ? pre(JSON.stringify(value, null, 2)) : el("p", { class: "note" }, empty);
}

function jobTable(d) {
  const j = d.job;
  return el("table", { class: "detail" },
    row("agent", j.agentRole || ""),
    row("phase", phaseBadge(j.phase), j.reason ? ` ${j.reason}` : "", j.message ? `: ${j.message}` : ""),
    row("chain id", j.chainId ? link(chainHref(j.namespace, j.chainId), j.chainId) : ""),
    row("chain path", (j.chainPath || []).join(" → ")),
    d.traceUrl ? row("trace", link(d.traceUrl, "the chain's trace")) : null,
    row("depth", j.chainDepth ?? ""),
    row("parent", j.parentJobId ? link(jobHref(j.namespace, j.parentJobId), j.parentJobId) : "(none: the chain starts here)"),
    row("exit code", j.exitCode ?? ""),
    row("created", when(j.createdAt)), row("started", when(j.startedAt)), row("completed", when(j.completedAt)),
    row("duration", seconds(since(j.startedAt, j.completedAt)) || ""),
    row("origin", j.origin || "", originDetail(d.event)),
    row("pod", d.podName || "", d.attempt ? ` (attempt ${d.attempt})` : ""),
    row("usage", d.usage ? usageText(d.usage) : "(none reported)"));
}

// Where the chain came from, beside its origin: the repository of a GitHub event, the
// schedule and tick of a scheduled run. Event text is data: it goes in as text only.
function originDetail(event) {
  if (!event) return "";
  if (event.repository) return ` · ${event.repository}`;
  if (event.schedule) return ` · ${event.schedule}${event.scheduledAt ? `, tick ${when(event.scheduledAt)}` : ""}`;
  return "";
}

function historyTable(rows) {
  return el("table", { class: "history" }, rows.map((r) =>
    el("tr", {}, el("td", { class: "nowrap" }, when(r.at)), el("td", {}, r.what), el("td", {}, r.reason || ""), el("td", {}, r.message || ""))));
}

function eventsTable(d) {
  if (d.eventsUnavailable) return el("p", { class: "note" }, d.eventsUnavailable);
  if (!d.events.length) return el("p", { class: "note" }, "No Events.");
  return el("table", { class: "events" }, d.events.map((e) =>
    el("tr", {}, el("td", { class: "nowrap" }, when(e.at)), el("td", {}, e.type || ""), el("td", {}, e.reason || ""), el("td", {}, e.message || ""), el("td", {}, e.count ?? ""))));
}

function outputSection(d) {
  const j = d.job;
  const section = el("section", { id: "result-section" }, el("h2", {}, "Result"));
  section.append(j.result !== null && j.result !== undefined
    ? pre(j.result, { id: "result", class: "output" }) : el("p", { class: "note" }, "No result yet."));
  if (j.resultTruncated) section.append(el("p", { class: "note" }, `Cut to its last part; the full output is ${j.resultSize} bytes.`));
  const href = `/ui/api/jobs/${seg(j.namespace)}/${seg(j.id)}/output`;
  section.append(d.output.available
    ? el("p", {}, link(href, "full output"), ` (${d.output.fullSize} bytes${d.output.truncated ? ", its last part kept" : ""})`)
    : el("p", { class: "note" }, d.output.reason));
  return section;
}

function liveLog(d) {
  const j = d.job;
  const box = pre("", { id: "log", class: "output log" });
  const section = el("section", {}, el("h2", {}, "Live log"), box);
  const source = stream(`/ui/api/jobs/${seg(j.namespace)}/${seg(j.id)}/log`, {
    reset: () => clear(box),
    log: (text) => box.append(document.createTextNode(text)),
    // The container ended: stop, or the EventSource would reconnect and replay the log.
    end: () => { box.classList.add("ended"); source.close(); },
  });
  return section;
}

async function jobPage(main, namespace, name) {
  const d = await getJSON(`/ui/api/jobs/${seg(namespace)}/${seg(name)}`);
  main.append(el("h1", {}, `${namespace}/${name}`));
  const actions = jobActions(d.job);
  if (actions) main.append(actions);
  main.append(jobTable(d),
    el("h2", {}, "Prompt"), promptBlock(d.prompt), outputSection(d));
  if (d.live) main.append(liveLog(d));
  main.append(el("h2", {}, "Phase history"), historyTable(d.history),
    el("h2", {}, "Anchor"), jsonBlock(d.anchor, "This job wrote no anchor."),
    el("h2", {}, "Team anchor"), jsonBlock(d.teamAnchor, "The chain has no team anchor."),
    el("h2", {}, "Events"), eventsTable(d));
  const seen = d.job.phase;
  stream(`/ui/api/events?namespace=${seg(namespace)}&job=${seg(name)}`, {
    job: (job) => { if (job.phase !== seen || job.deleted) route(); },
  });
}

// --- routing ----------------------------------------------------------------------------
async function route() {
  closeStreams();
  const main = clear(document.getElementById("main"));
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    const session = await getJSON("/ui/api/session");
    state.csrf = session.csrf;
    document.getElementById("login").hidden = true;
    document.getElementById("logout").hidden = false;
    if (parts[1] === "jobs" && parts.length === 4) await jobPage(main, parts[2], parts[3]);
    else if (parts[1] === "chains" && parts.length === 4) await chainPage(main, parts[2], parts[3]);
    else await jobsPage(main, new URLSearchParams(location.search));
  } catch (err) {
    if (err instanceof HttpError && err.status === 401) return;
    main.append(el("p", { class: "error", role: "alert" }, `Could not load this page: ${err.message}`));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", login);
  document.getElementById("logout").addEventListener("click", logout);
  window.addEventListener("popstate", route);
  route();
});
