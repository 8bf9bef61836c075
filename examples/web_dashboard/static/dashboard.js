// QMF queue dashboard: a table of queues fed by /api/objects/queue and the SSE stream
// /api/stream, with a sparkline per queue and uPlot charts (vendored, static/vendor/)
// of the queue the user chose (kept in the page address as ?queue=NAME).
"use strict";

const HISTORY = 120;                // samples kept per queue (as the server)
const queues = new Map();           // object id -> queue state
let selected = null;                // object id of the queue shown in the big charts
let wanted = new URL(location.href).searchParams.get("queue");  // name from the address
let connected = false;              // broker connected (actions are off otherwise)
let listed = false;                 // the first listing is done (a default may be chosen)
let updates = 0;                    // queue events applied (exposed as data-updates)
const charts = {};                  // "depth" / "rate" -> uPlot

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

// ---------------------------------------------------------------- gaps

// The samples with a null point where the data stopped: the broker (or this page's
// server) was unreachable in between.  A long quiet time without an outage is no gap:
// agents publish a queue only when it changed, so its value held meanwhile.
function withGaps(samples) {
  const out = [];
  samples.forEach((s, i) => {
    const prev = samples[i - 1];
    if (prev && s.gapBefore) {
      out.push({ t: prev.t + (s.t - prev.t) / 2, depth: null, rate: null, gap: true });
    }
    out.push(s);
  });
  return out;
}

// ---------------------------------------------------------------- table rows

function createRow(obj) {
  const oid = obj.object_id;
  const tr = document.createElement("tr");
  tr.dataset.oid = oid;
  const cell = (cls) => { const td = document.createElement("td"); if (cls) td.className = cls; tr.appendChild(td); return td; };
  const q = {
    oid, name: "", updated: -1, samples: [], row: tr, gapPending: false,
    cells: { name: cell("name"), agent: cell("agent"), depth: cell("num depth"),
             enqueues: cell("num enqueues"), rate: cell("num rate") },
  };
  for (const kind of ["depth", "rate"]) {
    const svg = svgEl("svg", { class: `spark ${kind}`, width: 140, height: 28, "data-points": 0 });
    svg.appendChild(svgEl("path", { d: "" }));
    cell("chart").appendChild(svg);
    q[`${kind}Spark`] = svg;
  }
  const button = document.createElement("button");
  button.className = "purge";
  button.type = "button";
  button.textContent = "Purge";
  button.disabled = !connected;
  button.title = connected ? "" : "the broker is disconnected";
  button.addEventListener("click", (ev) => { ev.stopPropagation(); purge(q, button); });
  q.button = button;
  cell("actions").appendChild(button);
  tr.addEventListener("click", () => select(oid, true));
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
  refreshChooser();
}

function removeQueue(oid) {
  const q = queues.get(oid);
  if (!q) return;
  q.row.remove();
  queues.delete(oid);
  if (selected === oid) { wanted = q.name; select(null); }
  $("#empty").hidden = queues.size > 0;
  refreshChooser();
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
  const name = props.name ?? obj.index ?? obj.object_id;
  const renamed = name !== q.name;
  q.name = name;
  q.row.dataset.queue = q.name;
  q.cells.name.textContent = q.name;
  q.cells.name.title = q.name;                        // long names are cut with "…"
  q.cells.agent.textContent = obj.agent_label ?? obj.agent ?? "";
  q.cells.agent.title = obj.agent ? `agent ${obj.agent}` : "";
  if ("msgDepth" in stats) q.cells.depth.textContent = fmt(stats.msgDepth);
  if ("msgTotalEnqueues" in stats) q.cells.enqueues.textContent = fmt(stats.msgTotalEnqueues);
  if (isNew || renamed) placeRow(q);
  if (selected === null && wanted !== null && q.name === wanted) select(q.oid, false);
  return q;
}

function addSample(q, s) {
  const samples = q.samples;
  const last = samples[samples.length - 1];
  if (last && s.t < last.t) return;
  let gapBefore;
  if (last && s.t === last.t) {                       // same publication, completed
    samples.pop();
    gapBefore = last.gapBefore;
  } else {                                            // the first one after an outage?
    gapBefore = q.gapPending;
    q.gapPending = false;
  }
  samples.push({ t: s.t, depth: s.depth, rate: s.rate, gapBefore });
  if (samples.length > HISTORY) samples.splice(0, samples.length - HISTORY);
  q.cells.rate.textContent = fmt(s.rate, 1);
  redraw(q);
}

function redraw(q) {
  const points = withGaps(q.samples);
  spark(q.depthSpark, points.map((s) => s.depth));
  spark(q.rateSpark, points.map((s) => s.rate));
  if (q.oid === selected) drawCharts();
}

// ---------------------------------------------------------------- charts

// A sparkline: one path scaled to the svg; a null value breaks the line, and a lone
// point (one sample, or one between two gaps) is a short dash.
function spark(svg, values) {
  const w = +svg.getAttribute("width"), h = +svg.getAttribute("height");
  const known = values.filter((v) => v !== null && v !== undefined);
  const max = Math.max(1, ...known), n = values.length;
  const pieces = [[]];
  values.forEach((v, i) => {
    if (v === null || v === undefined) { pieces.push([]); return; }
    const x = n > 1 ? (i * (w - 2)) / (n - 1) + 1 : w / 2;
    pieces[pieces.length - 1].push([x, h - 2 - (v / max) * (h - 4)]);
  });
  let d = "";
  for (const piece of pieces) {
    if (piece.length === 1) {
      const [x, y] = piece[0];
      piece.splice(0, 1, [Math.max(1, x - 3), y], [Math.min(w - 1, x + 3), y]);
    }
    piece.forEach(([x, y], i) => { d += `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)} `; });
  }
  svg.firstChild.setAttribute("d", d.trim());
  svg.setAttribute("data-points", known.length);
  svg.setAttribute("data-last", known.length ? known[known.length - 1] : "");
  svg.setAttribute("aria-label", `max ${fmt(max, 1)}`);
}

const MIN_SPAN = 10;                // seconds: the narrowest time axis (one sample, or a few)

// HH:MM:SS in local time, with ``digits`` decimals of the second (ticks closer than 1 s)
function clock(seconds, digits = 0) {
  const scale = 10 ** digits;
  const units = Math.round(seconds * scale);        // whole tenths, hundredths ...
  const whole = Math.floor(units / scale);
  const text = new Date(whole * 1000).toLocaleTimeString("en-GB", { hour12: false });
  return digits ? `${text}.${String(units - whole * scale).padStart(digits, "0")}` : text;
}

// Labels of ``ticks`` by ``label(t, digits)`` with the fewest digits (from ``least``,
// at most ``least + 4``) that tell every tick from its neighbours.
function distinctLabels(ticks, least, label) {
  let labels = [];
  for (let d = least; d <= least + 4; d += 1) {
    labels = ticks.map((t) => label(t, d));
    if (new Set(labels).size === labels.length) break;
  }
  return labels;
}

// The time axis spans the samples, and at least MIN_SPAN seconds around them: one
// sample (an idle queue) sits in the middle of a readable axis, not on a zero range.
function timeRange(u, lo, hi) {
  if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) {
    const now = Date.now() / 1000;
    return [now - MIN_SPAN, now];
  }
  const pad = Math.max(0, (MIN_SPAN - (hi - lo)) / 2);
  return [lo - pad, hi + pad];
}

// Axis steps of 1, 2 and 5 times a power of ten: a label of the step's own decimals
// is exact (no 0.25 shown as 0.3); counts take the whole ones only
const STEPS = [];
for (let e = -3; e <= 12; e += 1) for (const m of [1, 2, 5]) STEPS.push(+(m * 10 ** e).toPrecision(1));
const COUNT_STEPS = STEPS.filter((v) => v >= 1);

// ``align``: 1 when a value holds until the next sample (a depth), -1 when it covers
// the time since the previous one (a rate over that step); ``digits``: 0 for counts
function makeChart(el, label, color, digits, align) {
  const opts = {
    width: Math.max(200, el.clientWidth), height: 180,
    // y from 0; a flat series at v gets the room above it (1 when v is 0)
    scales: { x: { time: true, range: timeRange },
              y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] } },
    axes: [{ stroke: "#555", grid: { stroke: "#eee" }, space: 80,  // a clock time is ~60 px
             // clock times of the samples (local time); the labels drawn are also
             // kept in data-ticks, for whoever reads the page without pixels
             values: (u, ticks) => {
               const step = ticks.length > 1 ? ticks[1] - ticks[0] : 1;
               const least = step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
               const labels = distinctLabels(ticks, least, clock);
               el.dataset.ticks = labels.join(" ");
               return labels;
             } },
           { stroke: "#555", grid: { stroke: "#eee" }, size: 56,
             incrs: digits === 0 ? COUNT_STEPS : STEPS,
             // kept in data-yticks, as the time axis' labels
             values: (u, ticks) => {
               const labels = distinctLabels(ticks, digits, (v, d) => fmt(v, d));
               el.dataset.yticks = labels.join(" ");
               return labels;
             } }],
    series: [{}, { label, stroke: color, width: 2, spanGaps: false,
                   // steps: agents publish a queue when it changed
                   paths: uPlot.paths.stepped({ align }),
                   points: { show: true, size: 4 },
                   value: (u, v) => fmt(v, digits) }],
    legend: { show: true },
    cursor: { drag: { x: false, y: false } },
  };
  return new uPlot(opts, [[], []], el);
}

function setupCharts() {
  const css = getComputedStyle(document.documentElement);
  charts.depth = makeChart($("#depth-chart"), "depth (messages)", css.getPropertyValue("--depth").trim(), 0, 1);
  charts.rate = makeChart($("#rate-chart"), "enqueue rate (msg/s)", css.getPropertyValue("--rate").trim(), 1, -1);
  const resize = () => {
    for (const [kind, chart] of Object.entries(charts)) {
      const el = $(`#${kind}-chart`);
      chart.setSize({ width: Math.max(200, el.clientWidth), height: 180 });
    }
  };
  new ResizeObserver(resize).observe($(".overview"));
}

function drawCharts() {
  const q = selected !== null ? queues.get(selected) : null;
  const points = q ? withGaps(q.samples) : [];
  const xs = points.map((p) => p.t / 1e9);
  // uPlot's own range for a single x is a thousand days wide (midnights as ticks):
  // the time axis is set here, at least MIN_SPAN seconds around the samples
  const [lo, hi] = timeRange(null, xs.length ? Math.min(...xs) : null,
                             xs.length ? Math.max(...xs) : null);
  for (const [kind, chart] of Object.entries(charts)) {
    const ys = points.map((p) => (p[kind] === undefined ? null : p[kind]));
    chart.setData([xs, ys]);
    chart.setScale("x", { min: lo, max: hi });
    const el = $(`#${kind}-chart`);
    el.dataset.points = ys.filter((v) => v !== null).length;
    el.dataset.gaps = points.filter((p) => p.gap).length;
  }
}

// ---------------------------------------------------------------- choosing the queue

function refreshChooser() {
  const chooser = $("#queue-select");
  const names = [...queues.values()].map((q) => [q.name, q.oid])
    .sort((a, b) => a[0].localeCompare(b[0]));
  chooser.replaceChildren(new Option("–", ""), ...names.map(([name, oid]) => new Option(name, oid)));
  chooser.value = selected ?? "";
}

// Show ``oid`` in the big charts; ``byUser`` records the choice in the address.
function select(oid, byUser) {
  selected = oid;
  const q = oid !== null ? queues.get(oid) : null;
  for (const other of queues.values()) other.row.classList.toggle("selected", other.oid === oid);
  const name = q ? q.name : "–";
  $("#selected-name").textContent = name;
  $("#selected-name2").textContent = name;
  const note = $("#message");
  if (q && note.dataset.waiting === q.name) {      // the queue waited for is here
    message("");
    delete note.dataset.waiting;
  }
  $("#queue-select").value = oid ?? "";
  if (byUser && q) {
    wanted = q.name;
    const url = new URL(location.href);
    url.searchParams.set("queue", q.name);
    history.replaceState(null, "", url);
  }
  drawCharts();
}

// After the first listing: the queue named in the address, else the first by name.
// ``complete``: the queues known are all there are (a listing answered); otherwise
// (the broker is down, only the stream's last state is known) nothing is said of a
// queue not seen.
function chooseDefault(complete = true) {
  listed = true;
  if (selected !== null) return;
  const byName = [...queues.values()].sort((a, b) => a.name.localeCompare(b.name));
  const hit = wanted !== null ? byName.find((q) => q.name === wanted) : byName[0];
  if (hit) select(hit.oid, false);
  else if (wanted !== null && complete) {
    message(`No queue named ${wanted} (yet): the charts wait for it.`);
    $("#message").dataset.waiting = wanted;
  }
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
  const wasConnected = connected;
  connected = state === "connected";
  if (wasConnected && !connected) for (const q of queues.values()) q.gapPending = true;
  for (const q of queues.values()) {
    q.button.disabled = !connected || q.busy === true;
    q.button.title = connected ? "" : "the broker is disconnected";
  }
}

function onStatus(st) {
  if (st.connected) { setState("connected"); return; }
  // the error names the address already when it says "cannot connect to ..."
  const down = st.brokers.filter((b) => !b.connected)
    .map((b) => (b.error && b.error.includes(b.where) ? b.error
                 : b.where + (b.error ? ` (${b.error})` : ""))).join(", ");
  setState("disconnected", `Broker disconnected: ${down || "no broker"} — reconnecting…`);
}

// ---------------------------------------------------------------- actions

function message(text, isError = false) {
  const el = $("#message");
  delete el.dataset.waiting;
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

// Ask before an action that loses messages; resolves true when the user confirms.
function confirmPurge(q) {
  const dialog = $("#confirm");
  const depth = q.cells.depth.textContent;
  $("#confirm-text").textContent =
    `Purge queue ${q.name}? Its messages (${depth} now) are deleted and cannot be recovered.`;
  dialog.dataset.queue = q.name;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "purge"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
    $("#confirm-cancel").focus();
  });
}

async function purge(q, button) {
  if (!connected) return;
  if (!(await confirmPurge(q))) { message(`Purge of ${q.name} cancelled.`); return; }
  q.busy = true;
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
    q.busy = false;
    button.disabled = !connected;
  }
}

async function loadQueues() {
  let complete = true;
  try {
    for (const obj of await api("/api/objects/queue")) applyObject(obj);
  } catch (err) {
    // 503 while the broker is down: the stream's status says so, and updates follow
    complete = false;
    if (err.status !== 503) message(`Cannot list queues: ${err.message}`, true);
  }
  chooseDefault(complete);
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
    if (!listed && queues.size) chooseDefault(false);
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

$("#queue-select").addEventListener("change", (e) => select(e.target.value || null, true));
setState("connecting", "Connecting…");
setupCharts();
drawCharts();
loadQueues();
connectStream();
