// The tensorviz diagram canvas (anywidget front-end). Python's Diagram arrives as binary columns;
// this file only draws it and handles hover, click, drag-zoom and scrolling in the browser.
// Pure helpers live in geometry.js (prepended to this file by the Python side).
import { MARKS, PAST_END, storageTooltip, storageLabel, column, lines, varints, geomLines, frontDecode, ownLanes, blockOfLanes, fitText, formatBytes, ticks, scale, laneWindow, laneIndex, laneRange, hitBar, dragWindow, barRect, tooltip, barViews, SHARES_BYTES } from "./geometry.js";

import { mountOverview, OVERVIEW_CSS } from "./overview.js";

const LANE_H = 20, AXIS_H = 22, MAX_LANES_SHOWN = 28;
const KIND = { storage: 0, view: 1, simple: 2, more: 3, moreStorages: 4, summary: 5 };
const MARK_FILL = ["rgba(128,128,128,0.55)", "rgba(214,39,40,0.85)", "rgba(60,60,60,0.8)", "#f4f4f4"];
// The PNG's "past-end" layer: light grey, a purple "++" grid hatch, a dashed purple edge.
const PAST_END_EDGE = "#7a0177";
const PAST_END_KEY = `#f4f4f4;background-image:linear-gradient(${PAST_END_EDGE} 1px,transparent 1px),` +
  `linear-gradient(90deg,${PAST_END_EDGE} 1px,transparent 1px);background-size:4px 4px;border:1px dashed ${PAST_END_EDGE}`;
const CSS = `
.tvz-cv { font: 12px var(--jp-ui-font-family, sans-serif); color: var(--jp-ui-font-color1, #222); position: relative; min-width: 0; }
.tvz-cv-head { display: flex; flex-wrap: wrap; gap: 2px 12px; align-items: center; margin: 2px 0 4px; }
.tvz-cv-legend { display: flex; flex-wrap: wrap; gap: 2px 10px; }
.tvz-cv-key { display: inline-flex; align-items: center; gap: 4px; opacity: 0.85; }
.tvz-cv-key i { display: inline-block; width: 14px; height: 10px; border: 1px solid #555; }
.tvz-cv-scroll { overflow-y: auto; overflow-x: hidden; position: relative; border: 1px solid var(--jp-border-color2, #ddd); }
.tvz-cv-scroll canvas { position: sticky; top: 0; display: block; cursor: crosshair; }
.tvz-cv-foot { opacity: 0.75; margin-top: 2px; min-height: 16px; }
.tvz-tip { position: absolute; z-index: 10; display: none; pointer-events: none; max-width: 460px;
  background: var(--jp-layout-color0, #fff); color: var(--jp-ui-font-color0, #111); border: 1px solid #888;
  box-shadow: 0 2px 6px rgba(0,0,0,0.25); padding: 4px 7px; font: 12px var(--jp-code-font-family, monospace); white-space: pre-wrap;
  overflow-wrap: anywhere; }
.tvz-tip b { font-family: var(--jp-ui-font-family, sans-serif); }
${OVERVIEW_CSS}`;

export function decodeAll(model) {
  const g = (k) => model.get(k);
  const d = {
    start: column(g("bar_start"), Float64Array), stop: column(g("bar_stop"), Float64Array),
    lane: column(g("bar_lane"), Uint32Array), color: column(g("bar_color"), Uint8Array),
    flags: column(g("bar_flags"), Uint8Array),
    barView: column(g("bar_view"), Uint32Array), tieFirst: column(g("tie_first"), Uint32Array),
    ties: column(g("ties"), Uint32Array),
    runBar: column(g("run_bar"), Uint32Array), runs: column(g("runs"), Float64Array),
    laneKind: column(g("lane_kind"), Uint8Array),
    blockStorage: column(g("block_storage"), Int32Array), blockNbytes: column(g("block_nbytes"), Float64Array),
    markKind: column(g("mark_kind"), Uint8Array), markLane: column(g("mark_lane"), Uint32Array),
    markStart: column(g("mark_start"), Float64Array), markStop: column(g("mark_stop"), Float64Array),
    dtype: column(g("dtype"), Uint8Array), dtypes: g("dtypes"), colors: g("colors"),
    xRange: g("x_range"), caption: g("caption"),
  };
  const nLanes = d.laneKind.length, nViews = d.dtype.length, n = d.start.length;
  d.laneLabels = lines(g("lane_labels"), nLanes);
  d.names = frontDecode(lines(g("names"), nViews), column(g("name_prefix"), Uint8Array), column(g("name_suffix"), Uint8Array));
  d.fpct = new Float32Array(n).fill(1);
  const pctBar = column(g("pct_bar"), Uint32Array), pct = column(g("pct"), Float32Array);
  pctBar.forEach((i, k) => { d.fpct[i] = pct[k]; });
  if (!d.lane.length && n) d.lane = ownLanes(d.laneKind, n);
  d.index = laneIndex(d.lane, d.start, d.stop, nLanes);
  d.markIndex = laneIndex(d.markLane, d.markStart, d.markStop, nLanes);
  blockLanes(d);
  const tags = lines(g("block_tag"), d.blockStorage.length);
  for (let l = 0, k = 0; l < nLanes; l++) {
    const b = d.laneBlock[l];
    if (d.laneKind[l] === KIND.storage) d.laneLabels[l] = storageLabel(d.blockStorage[b], tags[k++], d.blockNbytes[b]);
  }
  d.markKind.forEach((kind, m) => {  // as the PNG's row label: a storage of 0 bytes read past its end was freed
    const l = d.markLane[m];
    if (kind === PAST_END && !d.blockNbytes[d.laneBlock[l]] && !d.laneLabels[l].endsWith(" · freed")) d.laneLabels[l] += " · freed";
  });
  d.laneSize = new Float64Array(nLanes);
  const special = column(g("special_lane"), Uint32Array), size = column(g("special_size"), Float64Array);
  special.forEach((l, k) => { d.laneSize[l] = size[k]; });
  const pairs = varints(g("geom"));
  d.geom = geomLines(lines(g("geom_heads"), 0), pairs);

  d.runFirst = new Uint32Array(n + 1);
  for (let r = 0; r < d.runBar.length; r++) d.runFirst[d.runBar[r] + 1]++;
  for (let i = 0; i < n; i++) d.runFirst[i + 1] += d.runFirst[i];
  d.blockBars = new Uint32Array(d.blockStorage.length); d.blockHidden = new Uint32Array(d.blockStorage.length);
  for (let i = 0; i < n; i++) {
    const b = d.laneBlock[d.lane[i]];
    if (b >= 0) { d.blockBars[b]++; if (d.flags[i] & 64) d.blockHidden[b]++; }
  }
  d.storageOf = new Int32Array(n);
  for (let i = 0; i < n; i++) d.storageOf[i] = d.blockStorage[d.laneBlock[d.lane[i]]] ?? -1;
  d.viewOf = new Map();
  d.names.forEach((name, k) => d.viewOf.set(name, k));
  return d;
}

// Each lane's block, and each block's storage size (simple blocks: their one bar's stop).
function blockLanes(d) {
  d.laneBlock = blockOfLanes(d.laneKind);
  const sent = d.blockNbytes, sizes = new Float64Array(d.blockStorage.length);
  let k = 0;
  for (let l = 0; l < d.laneKind.length; l++) {
    const b = d.laneBlock[l];
    if (d.laneKind[l] === KIND.storage) sizes[b] = sent[k++];
    else if (d.laneKind[l] === KIND.simple) { const j = d.index.first[l]; sizes[b] = d.stop[d.index.order[j]]; }
  }
  d.blockNbytes = sizes;
}

function laneLabel(d, l) {
  if (d.laneLabels[l]) return d.laneLabels[l];
  const [a, b] = [d.index.first[l], d.index.first[l + 1]];
  const names = [];
  for (let j = a; j < b && names.length < 4; j++) for (const v of barViews(d, d.index.order[j])) names.push(d.names[v]);
  if (b - a === 1) return barViews(d, d.index.order[a]).map((v) => d.names[v]).join(" ≡ ");
  return names.length <= 3 ? names.join(", ") : `${names[0]}, … (${(b - a).toLocaleString()} bars)`;
}

function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "tvz-cv";
  root.innerHTML = `<style>${CSS}</style><div class="tvz-cv-head"><span class="tvz-cv-caption"></span><span class="tvz-cv-legend"></span></div>
    <div class="tvz-cv-scroll"><canvas></canvas><div class="tvz-cv-spacer"></div></div><div class="tvz-cv-foot"></div><div class="tvz-ov" hidden></div><div class="tvz-tip"></div>`;
  el.append(root);
  const $ = (s) => root.querySelector(s);
  const scroller = $(".tvz-cv-scroll"), canvas = $("canvas"), spacer = $(".tvz-cv-spacer"), tip = $(".tvz-tip");
  const g = canvas.getContext("2d");
  let d = decodeAll(model), view = null, width = 600, height = 200, sc = null, hover = -1, drag = null, frame = 0, hatch = null;
  let selected = new Set(model.get("selected")), rel = null, relTo = null, focus = -1;
  const get = (k) => model.get(k);
  const overview = mountOverview($(".tvz-ov"), (e, text) => placeTip(e, text), pick);

  function readSelection() {
    selected = new Set(model.get("selected"));
    rel = column(model.get("rel"), Uint8Array); relTo = column(model.get("rel_to"), Uint32Array);
    d.rel = rel; d.relTo = relTo;
  }
  readSelection();

  function sizes() {
    width = Math.max(240, Math.floor(root.clientWidth || el.clientWidth || 600) - 2);
    const shown = Math.min(d.laneKind.length, MAX_LANES_SHOWN);
    height = AXIS_H + Math.max(1, shown) * LANE_H + 4;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
    canvas.style.width = width + "px"; canvas.style.height = height + "px";
    scroller.style.height = height + "px";
    spacer.style.height = Math.max(0, AXIS_H + d.laneKind.length * LANE_H + 4 - height) + "px";
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  function labelWidth() { return Math.round(Math.min(260, Math.max(110, width * 0.3))); }

  function draw() {
    frame = 0;
    const t0 = performance.now();
    const [lo, hi] = view || d.xRange, lw = labelWidth();
    sc = scale(lo, hi, lw + 6, width - lw - 14);
    g.clearRect(0, 0, width, height);
    const [first, last] = laneWindow(scroller.scrollTop, height - AXIS_H, LANE_H, d.laneKind.length);
    const any = selected.size > 0;
    for (let l = first; l < last; l++) drawLane(l, AXIS_H + (l - first) * LANE_H - (scroller.scrollTop % LANE_H), lw, any);
    drawAxis(lw);
    if (drag && drag.x1 !== undefined) {
      g.fillStyle = "rgba(30,110,200,0.18)";
      g.fillRect(Math.min(drag.x0, drag.x1), AXIS_H, Math.abs(drag.x1 - drag.x0), height - AXIS_H);
    }
    const nL = d.laneKind.length;
    $(".tvz-cv-foot").textContent = `lanes ${(nL ? first + 1 : 0).toLocaleString()}–${last.toLocaleString()} of ${nL.toLocaleString()}${last - first < nL ? " (scroll for more)" : ""} · ` +
      `bytes [${formatBytes(lo)}, ${formatBytes(hi)})${view ? " zoomed: double-click to reset" : " · drag across the bars to zoom"}`;
    root.dataset.firstLane = first; root.dataset.lastLane = last;
    root.dataset.drawMs = (performance.now() - t0).toFixed(2);
  }

  function drawAxis(lw) {
    g.fillStyle = getComputedStyle(root).getPropertyValue("--jp-layout-color0") || "#fff";
    g.fillRect(0, 0, width, AXIS_H);
    g.strokeStyle = "#999"; g.fillStyle = "#444"; g.font = "11px sans-serif"; g.textBaseline = "middle";
    const t = ticks(sc.lo, sc.hi, Math.max(2, Math.floor(sc.width / 80)));
    g.beginPath();
    let free = lw + 6;  // labels never overlap: one that would is left out (its tick stays)
    t.values.forEach((v, k) => {
      const x = Math.round(sc.px(v)) + 0.5, w = g.measureText(t.labels[k]).width;
      g.moveTo(x, AXIS_H - 5); g.lineTo(x, AXIS_H);
      const at = Math.min(x + 2, width - 4 - w);
      if (at >= free) { g.fillText(t.labels[k], at, AXIS_H / 2 - 1); free = at + w + 8; }
    });
    g.moveTo(lw + 6, AXIS_H - 0.5); g.lineTo(width - 8, AXIS_H - 0.5);
    g.stroke();
    g.fillText(t.offset ? `bytes, ${formatBytes(t.offset)} +` : "bytes", 4, AXIS_H / 2 - 1);
  }

  function drawLane(l, y, lw, any) {
    const kind = d.laneKind[l];
    if (l === focus) { g.fillStyle = "rgba(31,95,191,0.12)"; g.fillRect(0, y, width, LANE_H); g.fillStyle = "#1f5fbf"; g.fillRect(0, y + 1, 3, LANE_H - 2); }
    g.fillStyle = kind === KIND.storage ? "#222" : "#444";
    g.font = (kind === KIND.storage ? "bold " : "") + "11px sans-serif";
    g.textBaseline = "middle";
    g.save(); g.beginPath(); g.rect(0, y, lw, LANE_H); g.clip();
    g.fillText(fitText(laneLabel(d, l), lw - 8, (t) => g.measureText(t).width), 4, y + LANE_H / 2);
    g.restore();
    g.save(); g.beginPath(); g.rect(sc.x0 - 1, y, sc.width + 2, LANE_H); g.clip();
    if (kind === KIND.storage || kind === KIND.summary) {
      const b = d.laneBlock[l], size = kind === KIND.storage ? d.blockNbytes[b] : d.laneSize[l];
      const r = barRect(sc, 0, size);
      if (r) { g.fillStyle = "rgba(150,150,150,0.25)"; g.fillRect(r[0], y + 4, r[1], LANE_H - 8); g.strokeStyle = "#888"; g.strokeRect(r[0] + 0.5, y + 4.5, r[1] - 1, LANE_H - 9); }
    }
    drawMarks(l, y);
    const [a, b] = laneRange(d.index, d.start, l, sc.lo, sc.hi);
    let covered = -Infinity;  // thin bars under pixels already drawn add nothing: skip them
    for (let j = a; j < b; j++) {
      const i = d.index.order[j], x1 = sc.px(d.stop[i]);
      if (x1 - sc.px(d.start[i]) < 1 && x1 <= covered && i !== hover && !isMarked(i)) continue;
      drawBar(i, y, any);
      covered = Math.max(covered, Math.max(x1, sc.px(d.start[i]) + 1.5));
    }
    g.restore();
  }

  function drawMarks(l, y) {
    const [a, b] = laneRange(d.markIndex, d.markStart, l, sc.lo, sc.hi);
    for (const past of [true, false]) {  // past-end under the other marks, as in the PNG
      for (let j = a; j < b; j++) {
        const m = d.markIndex.order[j], kind = d.markKind[m], r = barRect(sc, d.markStart[m], d.markStop[m]);
        if (!r || (kind === PAST_END) !== past) continue;
        if (past) { drawPastEnd(r, y); continue; }
        g.fillStyle = MARK_FILL[kind] || "#000";
        if (kind === 1) g.fillRect(r[0], y + LANE_H - 6, r[1], 4);
        else g.fillRect(r[0], y + 5, r[1], LANE_H - 10);
      }
    }
  }

  function drawPastEnd(r, y) {
    g.fillStyle = MARK_FILL[PAST_END]; g.fillRect(r[0], y + 4, r[1], LANE_H - 8);
    g.fillStyle = hatch || (hatch = plusHatch()); g.fillRect(r[0], y + 4, r[1], LANE_H - 8);
    g.setLineDash([4, 2]); g.strokeStyle = PAST_END_EDGE; g.lineWidth = 1;
    g.strokeRect(r[0] + 0.5, y + 4.5, Math.max(r[1] - 1, 1), LANE_H - 9); g.setLineDash([]);
  }

  function plusHatch() {  // a 5 px grid of purple lines: the PNG's "++" hatch
    const tile = document.createElement("canvas");
    tile.width = tile.height = 5;
    const t = tile.getContext("2d");
    t.fillStyle = PAST_END_EDGE; t.fillRect(2, 0, 1, 5); t.fillRect(0, 2, 5, 1);
    return g.createPattern(tile, "repeat");
  }

  function isMarked(i) {
    return rel && rel.length > 0 && rel[d.barView.length ? d.barView[i] : i] > 0;
  }

  function drawBar(i, y, any) {
    const r = barRect(sc, d.start[i], d.stop[i], 1.5);
    if (!r) return;
    const v = d.barView.length ? d.barView[i] : i, code = rel && rel.length ? rel[v] : 0;
    const flags = d.flags[i], fill = d.colors[d.color[i]] || "#4477aa";
    g.globalAlpha = any && !SHARES_BYTES(code) ? 0.3 : 1;
    if (flags & 1) {  // sparse: a light span, the footprint runs solid
      g.fillStyle = fill; g.globalAlpha *= 0.3; g.fillRect(r[0], y + 3, r[1], LANE_H - 6); g.globalAlpha /= 0.3;
      for (let k = d.runFirst[i]; k < d.runFirst[i + 1]; k++) {
        const q = barRect(sc, d.runs[2 * k], d.runs[2 * k + 1], 1);
        if (q) g.fillRect(q[0], y + 3, q[1], LANE_H - 6);
      }
    } else {
      g.fillStyle = fill; g.fillRect(r[0], y + 3, r[1], LANE_H - 6);
    }
    g.globalAlpha = 1;
    if ((flags & 2) && r[1] > 6) { g.setLineDash([3, 2]); g.strokeStyle = "#d62728"; g.lineWidth = 1; g.strokeRect(r[0] + 0.5, y + 3.5, r[1] - 1, LANE_H - 7); g.setLineDash([]); }
    if (code === 1 || (code > 1 && SHARES_BYTES(code)) || i === hover) {
      g.lineWidth = 2; g.strokeStyle = code === 1 ? "#000" : i === hover ? "#1f5fbf" : "#e07000";
      g.strokeRect(r[0] + 1, y + 2, Math.max(r[1] - 2, 1), LANE_H - 4); g.lineWidth = 1;
    }
  }

  function legend() {
    const keys = [];
    const kinds = new Set(d.markKind);
    kinds.forEach((k) => keys.push([k === PAST_END ? PAST_END_KEY : MARK_FILL[k], MARKS[k]]));
    if (d.flags.some((f) => f & 1)) keys.push(["rgba(68,119,170,0.3)", "span with gaps (solid: bytes read)"]);
    if (d.flags.some((f) => f & 2)) keys.push(["#fff;border:1px dashed #d62728", "shares bytes with another view"]);
    if (selected.size) keys.push(["#fff;border:2px solid #000", "selected"], ["#fff;border:2px solid #e07000", "shares bytes with the selection"]);
    $(".tvz-cv-legend").innerHTML = "";
    for (const [css, text] of keys) {
      const s = document.createElement("span");
      s.className = "tvz-cv-key";
      s.innerHTML = `<i style="background:${css}"></i>`;
      s.append(text);
      $(".tvz-cv-legend").append(s);
    }
    $(".tvz-cv-caption").textContent = d.caption;
  }

  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  const point = (e) => { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  function barAt(x, y) {
    if (!sc || y < AXIS_H || x < sc.x0 - 2) return -1;
    const l = Math.floor((y - AXIS_H + scroller.scrollTop) / LANE_H);
    return hitBar(d.index, d.start, d.stop, l, sc.byte(x), 2 / sc.k);
  }
  function laneAt(y) { return Math.floor((y - AXIS_H + scroller.scrollTop) / LANE_H); }
  function showTip(e, i) {
    const [px, py] = point(e), l = laneAt(py);
    const onStorage = i < 0 && sc && py >= AXIS_H && px >= sc.x0 - 2 && d.laneKind[l] === KIND.storage;
    if (i < 0 && !onStorage) { placeTip(e, null); return; }
    placeTip(e, i >= 0 ? tooltip(d, i) : storageTooltip(d, l, sc.byte(px), 2 / sc.k));
  }
  // The tooltip's lines (the first in bold) beside the mouse, inside the widget; null hides it.
  function placeTip(e, text) {
    if (!text) { tip.style.display = "none"; return; }
    tip.innerHTML = "";
    const b = document.createElement("b"); b.textContent = text[0]; tip.append(b, "\n" + text.slice(1).join("\n"));
    const box = root.getBoundingClientRect();
    tip.style.display = "block";
    const left = Math.min(e.clientX - box.left + 14, Math.max(0, box.width - tip.offsetWidth - 4));
    tip.style.left = left + "px"; tip.style.top = e.clientY - box.top + 16 + "px";
  }
  // Scroll the lanes to lane l (an overview click) and mark it until the next one.
  function pick(l) {
    focus = l;
    scroller.scrollTop = Math.max(0, (l - 1) * LANE_H);
    scroller.scrollIntoView({ block: "nearest" });
    root.dataset.focusLane = l;
    schedule();
  }
  function onMove(e) {
    const [x, y] = point(e);
    if (drag) { drag.x1 = x; schedule(); return; }
    const i = barAt(x, y);
    if (i !== hover) { hover = i; schedule(); }
    showTip(e, i);
  }
  function onDown(e) { const [x] = point(e); if (e.button === 0 && sc && x >= sc.x0) drag = { x0: x }; }
  function onUp(e) {
    const [x, y] = point(e), from = drag; drag = null;
    if (!from) return;
    const w = from && from.x1 !== undefined ? dragWindow(sc, from.x0, x) : null;
    if (w) { view = w; model.set("zoom", w); model.save_changes(); schedule(); return; }
    const i = barAt(x, y), many = e.shiftKey || e.ctrlKey || e.metaKey;
    const names = i < 0 ? [] : barViews(d, i).map((v) => d.names[v]);
    let next;
    if (many) {
      next = new Set(selected);
      const on = names.every((n) => next.has(n));
      names.forEach((n) => (on ? next.delete(n) : next.add(n)));
    } else next = new Set(names);
    model.set("selected", [...next]); model.save_changes();
    schedule();
  }
  function onDbl() { view = null; model.set("zoom", []); model.save_changes(); schedule(); }
  function onData() {
    d = decodeAll(model); readSelection(); focus = -1;
    const z = model.get("zoom"); view = z && z.length === 2 ? z : null;
    sizes(); legend(); draw();
    overview.update(get, d); overview.draw(width);
    root.dataset.revision = model.get("revision");
  }
  function onSel() { readSelection(); legend(); schedule(); }

  // For tests and benchmarks (Playwright): where a name is drawn, a canvas pixel, the plot box.
  root.tvz = {
    locate(name) {
      const k = d.viewOf.get(name);
      let i = -1;
      for (let b = 0; b < d.start.length && i < 0; b++) if (barViews(d, b).includes(k)) i = b;
      if (i < 0) return null;
      const l = d.lane[i], [first, last] = laneWindow(scroller.scrollTop, height - AXIS_H, LANE_H, d.laneKind.length);
      if (l < first || l >= last - 1) { scroller.scrollTop = Math.max(0, (l - 2) * LANE_H); }
      draw();
      const a = Math.max(d.start[i], sc.lo), b = Math.min(d.stop[i], sc.hi), c = canvas.getBoundingClientRect();
      const y = AXIS_H + l * LANE_H - scroller.scrollTop + LANE_H / 2;
      return { x: c.left + (sc.px(a) + sc.px(b)) / 2, y: c.top + y, x0: c.left + sc.px(a), x1: c.left + sc.px(b), color: d.colors[d.color[i]] };
    },
    pixel(x, y) {
      const c = canvas.getBoundingClientRect(), dpr = canvas.width / c.width;
      return Array.from(g.getImageData(Math.round((x - c.left) * dpr), Math.round((y - c.top) * dpr), 1, 1).data);
    },
    plot() { const c = canvas.getBoundingClientRect(); return { left: c.left + sc.x0, width: sc.width, lo: sc.lo, hi: sc.hi, top: c.top + AXIS_H }; },
    lanes: () => d.laneKind.length,
  };
  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; if (hover >= 0) { hover = -1; schedule(); } });
  canvas.addEventListener("mousedown", onDown);
  window.addEventListener("mouseup", onUp);
  canvas.addEventListener("dblclick", onDbl);
  scroller.addEventListener("scroll", () => { tip.style.display = "none"; schedule(); });
  model.on("change:revision", onData);
  model.on("change:rel", onSel);
  model.on("change:selected", onSel);
  const onZoom = () => { const z = model.get("zoom"); view = z && z.length === 2 ? z : null; schedule(); };
  model.on("change:zoom", onZoom);
  const ro = new ResizeObserver(() => { const w = Math.floor(root.clientWidth) - 2; if (w !== width) { sizes(); draw(); overview.draw(width); } });
  ro.observe(root);
  sizes(); legend(); draw();
  overview.update(get, d); overview.draw(width);
  root.dataset.revision = model.get("revision");
  return () => { ro.disconnect(); window.removeEventListener("mouseup", onUp); model.off("change:revision", onData); model.off("change:rel", onSel); model.off("change:selected", onSel); model.off("change:zoom", onZoom); };
}

export default { render };
