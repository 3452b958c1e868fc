// ibgwd's status page: polls /status.json every POLL_MS and fills the tables; the packet
// and drop rates come from the difference of two polls' counters and are drawn on canvases
// (no library). Everything shown goes through textContent, never parsed as HTML: names and
// addresses come from the configuration and from the network, so they are text, not markup.
"use strict";

const POLL_MS = 2000;
const HISTORY = 150; // points per graph (5 minutes at 2 s)
const hist = { packets: [], drops: [] };
const linkPrev = new Map(); // name -> {t, rx, tx}
let prev = null; // {t, packets, drops} of the last poll

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fillTable(id, rows) {
  const body = document.getElementById(id).tBodies[0];
  const frag = document.createDocumentFragment();
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) {
      if (c instanceof Node) {
        const td = el("td");
        td.appendChild(c);
        tr.appendChild(td);
      } else if (typeof c === "number") {
        tr.appendChild(el("td", fmt(c), "num"));
      } else {
        tr.appendChild(el("td", c === undefined ? "" : c));
      }
    }
    frag.appendChild(tr);
  }
  body.replaceChildren(frag);
}

function fmt(n) {
  if (!Number.isFinite(n)) return "";
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(2) + " G";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(2) + " M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + " k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function sumDrops(stats) {
  let s = 0;
  if (stats && stats.drops && typeof stats.drops === "object")
    for (const v of Object.values(stats.drops)) if (typeof v === "number") s += v;
  return s;
}

// A record as "key=value key=value" (for tables whose records vary: paths, groups).
function kv(o, skip) {
  return Object.entries(o)
    .filter(([k]) => !(skip || []).includes(k))
    .map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : String(v)))
    .join(" ");
}

function countNote(id, s, key) {
  const n = (s[key] || []).length;
  document.getElementById(id).textContent =
    "(" + n + (s[key + "_truncated"] ? "+, the first " + n + " shown" : "") + ")";
}

function stateCell(state, reason) {
  const up = state === "up";
  return el("span", reason ? state + " (" + reason + ")" : state, up ? "state-up" : "state-down");
}

function render(s, t) {
  document.getElementById("gw-name").textContent = s.name || "";
  document.title = "ibgw " + (s.name || "") + " status";
  const links = s.links || [];
  const up = links.filter((l) => l.state === "up").length;
  document.getElementById("summary").textContent =
    "version " + s.version + ", up " + fmt(s.uptime_s) + " s, " + up + " of " + links.length +
    " links up, " + (s.routes || []).length + " routes, " + (s.neighbours || []).length +
    " neighbours";

  let packets = 0, drops = 0;
  const rows = [];
  for (const l of links) {
    const st = l.stats || {};
    const rx = st.rx_packets || 0, tx = st.tx_packets || 0, d = sumDrops(st);
    packets += rx + tx;
    drops += d;
    const p = linkPrev.get(l.name);
    let rxr = NaN, txr = NaN;
    if (p && t > p.t) {
      rxr = Math.max(0, (rx - p.rx) * 1000 / (t - p.t));
      txr = Math.max(0, (tx - p.tx) * 1000 / (t - p.t));
    }
    linkPrev.set(l.name, { t: t, rx: rx, tx: tx });
    rows.push([l.name, l.kind, l.device || "", stateCell(l.state, l.reason), l.mtu,
      (l.addresses || []).join(" "), rx, tx, rxr, txr, d]);
  }
  fillTable("links", rows);

  if (prev && t > prev.t) {
    push(hist.packets, Math.max(0, (packets - prev.packets) * 1000 / (t - prev.t)));
    push(hist.drops, Math.max(0, (drops - prev.drops) * 1000 / (t - prev.t)));
  }
  prev = { t: t, packets: packets, drops: drops };
  draw("graph-packets", hist.packets, "#0969da");
  draw("graph-drops", hist.drops, "#cf222e");
  caption("rate-packets", hist.packets);
  caption("rate-drops", hist.drops);

  fillTable("routes", (s.routes || []).map((r) => [
    r.dst, r.gateway || (r.nexthops || []).map((n) => n.gateway || n.dev).join(", "),
    r.dev || "", r.protocol || "", r.metric === undefined ? "" : r.metric,
    (r.flags || []).join(" ")]));
  countNote("routes-count", s, "routes");
  fillTable("neighbours", (s.neighbours || []).map((n) => [
    n.dst, n.dev || "", n.lladdr || "",
    Array.isArray(n.state) ? n.state.join(" ") : (n.state || "")]));
  countNote("neighbours-count", s, "neighbours");
  fillTable("paths", (s.paths || []).map((p) => [el("code", kv(p))]));
  countNote("paths-count", s, "paths");
  fillTable("mcast", (s.mcast || []).map((m) => [el("code", kv(m))]));
  countNote("mcast-count", s, "mcast");

  const fo = s.failover || [];
  const none = document.getElementById("failover-none");
  none.hidden = fo.length > 0;
  none.textContent = fo.length ? "" : "failover is not configured";
  fillTable("failover", fo.filter((r) => r.kind !== "transition").map((r) => [
    r.kind, r.group || r.name || r.path || "",
    r.state !== undefined ? r.state : (r.alive !== undefined ? (r.alive ? "alive" : "dead")
      : (r.peer_alive !== undefined ? (r.peer_alive ? "peer alive" : "peer dead") : "")),
    el("code", kv(r, ["kind", "group", "name", "path", "state"]))]));
  fillTable("transitions", fo.filter((r) => r.kind === "transition").map((r) => [
    fmt(r.ago_ms / 1000) + " s", r.group, r.from, r.to, r.reason]));
}

function caption(id, data) {
  if (data.length)
    document.getElementById(id).textContent =
      "now " + fmt(data[data.length - 1]) + "/s (" + data.length + " samples)";
}

function push(a, v) {
  a.push(v);
  if (a.length > HISTORY) a.shift();
}

function draw(id, data, color) {
  const c = document.getElementById(id), g = c.getContext("2d");
  const w = c.width, h = c.height, pad = 4, top = 16;
  g.clearRect(0, 0, w, h);
  const max = Math.max(1, ...data);
  g.strokeStyle = "#d0d7de";
  g.beginPath();
  g.moveTo(0, h - pad + 0.5);
  g.lineTo(w, h - pad + 0.5);
  g.stroke();
  g.fillStyle = "#57606a";
  g.font = "11px sans-serif";
  g.fillText("max " + fmt(max) + "/s, now " + fmt(data.length ? data[data.length - 1] : 0) + "/s",
    4, 12);
  if (data.length < 2) return;
  g.strokeStyle = color;
  g.lineWidth = 1.5;
  g.beginPath();
  data.forEach((v, i) => {
    const x = w - (data.length - 1 - i) * (w / (HISTORY - 1));
    const y = h - pad - (v / max) * (h - pad - top);
    if (i === 0) g.moveTo(x, y);
    else g.lineTo(x, y);
  });
  g.stroke();
}

async function poll() {
  const err = document.getElementById("error");
  try {
    const r = await fetch("/status.json", { cache: "no-store" });
    if (!r.ok) throw new Error("HTTP " + r.status);
    const s = await r.json();
    // Rates over the daemon's clock: the time between two of its answers, not between
    // two of ours (a tab in the background is throttled; headless runs in virtual time).
    render(s, typeof s.now_ms === "number" ? s.now_ms : Date.now());
    err.hidden = true;
  } catch (e) {
    err.textContent = "cannot read /status.json: " + e.message;
    err.hidden = false;
  }
  setTimeout(poll, POLL_MS);
}

poll();
