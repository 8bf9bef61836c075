// QMF queue dashboard: a table of queues fed by /api/objects/queue and the SSE stream
// /api/stream, with SVG sparklines per queue and canvas charts of the selected queue.
// No libraries: the charts are drawn here.
"use strict";

const HISTORY = 120;                // samples kept per queue (as the server)
const queues = new Map();           // object id -> queue state
let selected = null;                // object id of the queue shown in the big charts
let updates = 0;                    // queue events applied (exposed as data-updates)

const $ = (sel) => document.querySelector(sel);
const tbody = $("#queues tbody");

function fmt(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function svgEl(name, attrs = {}) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

// ---------------------------------------------------------------- table rows

function createRow(obj) {
  const oid = obj.object_id;
  const tr = document.createElement("tr");
  tr.dataset.oid = oid;
  const cell = (cls) => { const td = document.createElement("td"); if (cls) td.className = cls; tr.appendChild(td); return td; };
  const q = {
    oid, name: "", updated: -1, samples: [], row: tr,
    cells: { name: cell("name"), agent: cell("agent"), depth: cell("num depth"),
             enqueues: cell("num enqueues"), rate: cell("num rate") },
  };
  for (const kind of ["depth", "rate"]) {
    const svg = svgEl("svg", { class: `spark ${kind}`, width: 140, height: 28, "data-points": 0 });
    svg.appendChild(svgEl("polyline", { points: "" }));
    cell("chart").appendChild(svg);
    q[`${kind}Spark`] = svg;
  }
  const button = document.createElement("button");
  button.className = "purge";
  button.type = "button";
  button.textContent = "Purge";
  button.addEventListener("click", (ev) => { ev.stopPropagation(); purge(q, button); });
  cell("actions").appendChild(button);
  tr.addEventListener("click", () => select(oid));
  queues.set(oid, q);
  return q;
}

function placeRow(q) {
  // keep rows sorted by name
  const after = [...tbody.children].find((tr) => {
    const other = queues.get(tr.dataset.oid);
    return other && other !== q && other.name.localeCompare(q.name) > 0;
  });
  tbody.insertBefore(q.row, after || null);
  $("#empty").hidden = queues.size > 0;
}

function removeQueue(oid) {
  const q = queues.get(oid);
  if (!q) return;
  q.row.remove();
  queues.delete(oid);
  if (selected === oid) select(null);
  $("#empty").hidden = queues.size > 0;
}

// Apply an object (from the API or the stream); older snapshots than what the row
// shows are ignored, so a late update cannot undo a newer one.
function applyObject(obj) {
  if (obj.timestamps.deleted) { removeQueue(obj.object_id); return null; }
  let q = queues.get(obj.object_id);
  const isNew = !q;
  if (isNew) q = createRow(obj);
  if (obj.timestamps.updated < q.updated) return q;
  q.updated = obj.timestamps.updated;
  const props = obj.properties, stats = obj.statistics;
  q.name = props.name ?? obj.index ?? obj.object_id;
  q.row.dataset.queue = q.name;
  q.cells.name.textContent = q.name;
  q.cells.agent.textContent = obj.agent ?? "";
  if ("msgDepth" in stats) q.cells.depth.textContent = fmt(stats.msgDepth);
  if ("msgTotalEnqueues" in stats) q.cells.enqueues.textContent = fmt(stats.msgTotalEnqueues);
  if (isNew) {
    placeRow(q);
    if (selected === null) select(q.oid);
  }
  return q;
}

function addSample(q, s) {
  const samples = q.samples;
  const last = samples[samples.length - 1];
  if (last && s.t < last.t) return;
  if (last && s.t === last.t) samples.pop();        // same publication, completed
  samples.push({ t: s.t, depth: s.depth, rate: s.rate });
  if (samples.length > HISTORY) samples.splice(0, samples.length - HISTORY);
  q.cells.rate.textContent = fmt(s.rate, 1);
  redraw(q);
}

function redraw(q) {
  spark(q.depthSpark, q.samples.map((s) => s.depth));
  spark(q.rateSpark, q.samples.map((s) => s.rate));
  if (q.oid === selected) drawCharts();
}

// ---------------------------------------------------------------- charts

// A sparkline: one polyline scaled to the svg; null values are skipped.
function spark(svg, values) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  const known = values.filter((v) => v !== null && v !== undefined);
  const max = Math.max(1, ...known), n = values.length;
  const pts = [];
  values.forEach((v, i) => {
    if (v === null || v === undefined) return;
    const x = n > 1 ? (i * (w - 2)) / (n - 1) + 1 : w / 2;
    const y = h - 2 - (v / max) * (h - 4);
    pts.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  svg.firstChild.setAttribute("points", pts.join(" "));
  svg.setAttribute("data-points", known.length);
  svg.setAttribute("data-last", known.length ? known[known.length - 1] : "");
  svg.setAttribute("aria-label", `max ${fmt(max, 1)}`);
}

// A line chart on a canvas: y from 0 to a rounded maximum, x over the sample times.
function lineChart(canvas, points, color, unit) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 48, right = 8, top = 8, bottom = 20;
  ctx.clearRect(0, 0, w, h);
  ctx.font = "11px system-ui, sans-serif";
  const known = points.filter((p) => p.v !== null && p.v !== undefined);
  canvas.dataset.points = known.length;
  const { max, step } = scale(Math.max(0, ...known.map((p) => p.v)));
  const digits = Number.isInteger(step) ? 0 : 1;
  // grid and y labels
  ctx.strokeStyle = "#e3e5ea"; ctx.fillStyle = "#666"; ctx.lineWidth = 1;
  ctx.textAlign = "right"; ctx.textBaseline = "middle";
  for (let v = 0; v <= max + step / 2; v += step) {
    const y = Math.round(top + (1 - v / max) * (h - top - bottom)) + 0.5;
    ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(w - right, y); ctx.stroke();
    ctx.fillText(fmt(v, digits), left - 4, y);
  }
  if (known.length === 0) {
    ctx.textAlign = "center"; ctx.fillText("no samples yet", (left + w) / 2, h / 2);
    return;
  }
  const t0 = points[0].t, t1 = points[points.length - 1].t, span = Math.max(1, t1 - t0);
  ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
  ctx.fillText(`last ${fmt(span / 1e9, 0)} s (${unit})`, left, h - 4);
  ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.beginPath();
  let started = false;
  for (const p of points) {
    if (p.v === null || p.v === undefined) { started = false; continue; }
    const x = left + ((p.t - t0) / span) * (w - left - right);
    const y = top + (1 - p.v / max) * (h - top - bottom);
    if (started) ctx.lineTo(x, y); else { ctx.moveTo(x, y); started = true; }
  }
  ctx.stroke();
}

// An axis from 0 with 2 to 5 round steps (1, 2, 2.5 or 5 times a power of ten).
function scale(v) {
  if (!(v > 0)) return { max: 1, step: 0.25 };
  const raw = v / 4, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw);
  return { max: Math.max(1, Math.ceil(v / step)) * step, step };
}

function drawCharts() {
  const q = selected !== null ? queues.get(selected) : null;
  const samples = q ? q.samples : [];
  const css = getComputedStyle(document.documentElement);
  lineChart($("#depth-chart"), samples.map((s) => ({ t: s.t, v: s.depth })), css.getPropertyValue("--depth").trim(), "messages");
  lineChart($("#rate-chart"), samples.map((s) => ({ t: s.t, v: s.rate })), css.getPropertyValue("--rate").trim(), "msg/s");
}

function select(oid) {
  selected = oid;
  for (const q of queues.values()) q.row.classList.toggle("selected", q.oid === oid);
  const name = oid !== null && queues.get(oid) ? queues.get(oid).name : "–";
  $("#selected-name").textContent = name;
  $("#selected-name2").textContent = name;
  drawCharts();
}

// ---------------------------------------------------------------- connection state

function setState(state, text) {
  const conn = $("#conn"), banner = $("#banner");
  conn.dataset.state = state;
  conn.textContent = { connected: "broker connected", disconnected: "broker disconnected",
                       unreachable: "server unreachable", connecting: "connecting…" }[state];
  banner.dataset.state = state;
  banner.textContent = text || "";
  banner.hidden = state === "connected";
}

function onStatus(st) {
  if (st.connected) { setState("connected"); return; }
  const down = st.brokers.filter((b) => !b.connected)
    .map((b) => b.where + (b.error ? ` (${b.error})` : "")).join(", ");
  setState("disconnected", `Broker disconnected: ${down || "no broker"} — reconnecting…`);
}

// ---------------------------------------------------------------- actions

function message(text, isError = false) {
  const el = $("#message");
  el.textContent = text;
  el.classList.toggle("error", isError);
}

async function api(path, options) {
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { /* not JSON */ }
  if (!response.ok) {
    const err = new Error((body && body.error) || `${response.status} ${response.statusText}`);
    err.status = response.status;
    throw err;
  }
  return body;
}

async function purge(q, button) {
  button.disabled = true;
  try {
    const result = await api(`/api/object/${encodeURIComponent(q.oid)}/methods/purge`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ request: 0 }),
    });
    message(`Purged ${q.name}: ${result.text}`);
    applyObject(await api(`/api/object/${encodeURIComponent(q.oid)}`));
  } catch (err) {
    message(`Purge of ${q.name} failed: ${err.message}`, true);
  } finally {
    button.disabled = false;
  }
}

async function loadQueues() {
  try {
    for (const obj of await api("/api/objects/queue")) applyObject(obj);
  } catch (err) {
    // 503 while the broker is down: the stream's status says so, and updates follow
    if (err.status !== 503) message(`Cannot list queues: ${err.message}`, true);
  }
}

// ---------------------------------------------------------------- stream

function connectStream() {
  const es = new EventSource("/api/stream");
  es.addEventListener("status", (e) => onStatus(JSON.parse(e.data)));
  es.addEventListener("snapshot", (e) => {
    for (const entry of JSON.parse(e.data).queues) {
      const q = applyObject(entry.object);
      if (q && entry.history.length) {
        q.samples = entry.history.map(([t, depth, , rate]) => ({ t, depth, rate }));
        const last = q.samples[q.samples.length - 1];
        q.cells.rate.textContent = fmt(last.rate, 1);
        redraw(q);
      }
    }
  });
  es.addEventListener("agent_gone", (e) => {
    for (const oid of JSON.parse(e.data).objects) removeQueue(oid);
  });
  es.addEventListener("queue", (e) => {
    const { object, sample } = JSON.parse(e.data);
    const q = applyObject(object);
    if (q && sample) addSample(q, sample);
    updates += 1;
    $("#queues").dataset.updates = updates;
  });
  es.onerror = () => {
    if (es.readyState === EventSource.OPEN) return;
    setState("unreachable", "Dashboard server unreachable — retrying…");
    if (es.readyState === EventSource.CLOSED) {   // the browser gave up: start over
      es.close();
      setTimeout(connectStream, 2000);
    }
  };
}

setState("connecting", "Connecting…");
drawCharts();
loadQueues();
connectStream();
