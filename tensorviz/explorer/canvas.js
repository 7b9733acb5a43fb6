// The tensorviz diagram canvas (anywidget front-end). Python's Diagram arrives as one payload of
// binary columns; this module draws it and handles hover, click, drag-zoom and scrolling in the
// browser. Pure helpers live in geometry.js, the overview's DOM in overview.js, styles in
// explorer.css (the widget's _css); the codes' names come from Python (the `vocab` trait).
import {
  storageTooltip, storageLabel, column, lines, varints, geomLines, frontDecode, ownLanes, blockOfLanes,
  formatBytes, ticks, scale, laneWindow, laneIndex, laneRange, hitBar, dragWindow, barRect, tooltip, barViews,
  sharesBytes, vocabCodes, markWords, unframe, fitName, spanLabel, outlineColors, clipName, gapsKey,
} from "./geometry.js";
import { OverviewView } from "./overview.js";
import { themeColors, resolveColor } from "./theme.js";
import { decodeMarks, markOf, badgeRect, drawBadge, markKeys, markLine } from "./loadmarks.js";
import { CompareView } from "./compare.js";

const LANE_H = 20, AXIS_H = 22, MAX_LANES_SHOWN = 28;
const MARK_FILL = {
  unreferenced: "rgba(128,128,128,0.55)", "read-twice": "rgba(214,39,40,0.85)", header: "rgba(60,60,60,0.8)",
  "past-end": "#f4f4f4",
};
// The PNG's "past-end" layer: light grey, a purple "++" grid hatch, a dashed purple edge.
const PAST_END_EDGE = "#7a0177";
const PAST_END_KEY = `#f4f4f4;background-image:linear-gradient(${PAST_END_EDGE} 1px,transparent 1px),` +
  `linear-gradient(90deg,${PAST_END_EDGE} 1px,transparent 1px);background-size:4px 4px;border:1px dashed ${PAST_END_EDGE}`;
const HTML = `<div class="tvz-cmp" hidden></div><div class="tvz-cv-head"><span class="tvz-cv-caption"></span><span class="tvz-cv-legend"></span></div>
  <div class="tvz-cv-scroll"><canvas></canvas><div class="tvz-cv-spacer"></div></div><div class="tvz-cv-foot"></div>
  <div class="tvz-ov" hidden></div><div class="tvz-tip"></div>`;

// The payload `p` (its columns unframed: explorer/payload.py) decoded for drawing; `C`: vocabCodes.
export function decodeAll(p, C) {
  const d = {
    C, start: column(p.bar_start, Float64Array), stop: column(p.bar_stop, Float64Array),
    lane: column(p.bar_lane, Uint32Array), color: column(p.bar_color, Uint8Array), flags: column(p.bar_flags, Uint8Array),
    barView: column(p.bar_view, Uint32Array), tieFirst: column(p.tie_first, Uint32Array), ties: column(p.ties, Uint32Array),
    runBar: column(p.run_bar, Uint32Array), runs: column(p.runs, Float64Array), laneKind: column(p.lane_kind, Uint8Array),
    blockStorage: column(p.block_storage, Int32Array), blockNbytes: column(p.block_nbytes, Float64Array),
    markKind: column(p.mark_kind, Uint8Array), markLane: column(p.mark_lane, Uint32Array),
    markStart: column(p.mark_start, Float64Array), markStop: column(p.mark_stop, Float64Array),
    dtype: column(p.dtype, Uint8Array), dtypes: p.dtypes || [], colors: p.colors || [],
    xRange: p.x_range || [0, 1], caption: p.caption || "",
  };
  const nLanes = d.laneKind.length, n = d.start.length;
  d.laneLabels = lines(p.lane_labels, nLanes);
  d.names = frontDecode(lines(p.names, d.dtype.length), column(p.name_prefix, Uint8Array), column(p.name_suffix, Uint8Array));
  d.fpct = new Float32Array(n).fill(1);
  const pct = column(p.pct, Float32Array);
  column(p.pct_bar, Uint32Array).forEach((i, k) => { d.fpct[i] = pct[k]; });
  d.cell = new Float64Array(n);
  const cell = column(p.cell, Float64Array);
  column(p.cell_bar, Uint32Array).forEach((i, k) => { d.cell[i] = cell[k]; });
  if (!d.lane.length && n) d.lane = ownLanes(d.laneKind, n, C);
  d.index = laneIndex(d.lane, d.start, d.stop, nLanes);
  d.markIndex = laneIndex(d.markLane, d.markStart, d.markStop, nLanes);
  blockLanes(d);
  storageLabels(d, lines(p.block_tag, d.blockStorage.length));
  d.laneSize = new Float64Array(nLanes);
  const size = column(p.special_size, Float64Array);
  column(p.special_lane, Uint32Array).forEach((l, k) => { d.laneSize[l] = size[k]; });
  d.geom = geomLines(lines(p.geom_heads, 0), varints(p.geom));
  barFacts(d);
  return d;
}

// Each lane's block, and each block's storage size (simple blocks: their one bar's stop).
function blockLanes(d) {
  const { storage, simple } = d.C.lane;
  d.laneBlock = blockOfLanes(d.laneKind, d.C);
  const sent = d.blockNbytes, sizes = new Float64Array(d.blockStorage.length);
  let k = 0;
  for (let l = 0; l < d.laneKind.length; l++) {
    const b = d.laneBlock[l];
    if (d.laneKind[l] === storage) sizes[b] = sent[k++];
    else if (d.laneKind[l] === simple) { const j = d.index.first[l]; sizes[b] = d.stop[d.index.order[j]]; }
  }
  d.blockNbytes = sizes;
}

// Storage rows' labels (number, tag, size); " · freed" where views read past a 0-byte storage (as
// the PNG's row label).
function storageLabels(d, tags) {
  d.laneShort = new Array(d.laneKind.length).fill("");
  for (let l = 0, k = 0; l < d.laneKind.length; l++) {
    const b = d.laneBlock[l];
    if (d.laneKind[l] === d.C.lane.storage) {
      d.laneLabels[l] = storageLabel(d.blockStorage[b], tags[k++], d.blockNbytes[b]);
      d.laneShort[l] = storageLabel(d.blockStorage[b], "", d.blockNbytes[b]);
    }
  }
  d.markKind.forEach((kind, m) => {
    const l = d.markLane[m];
    if (kind === d.C.mark["past-end"] && !d.blockNbytes[d.laneBlock[l]] && !d.laneLabels[l].endsWith(" · freed")) d.laneLabels[l] += " · freed";
  });
}

// Per bar: its runs (CSR), its storage; per block: bars drawn and those sharing bytes with hidden views.
function barFacts(d) {
  const n = d.start.length, nb = d.blockStorage.length;
  d.runFirst = new Uint32Array(n + 1);
  for (let r = 0; r < d.runBar.length; r++) d.runFirst[d.runBar[r] + 1]++;
  for (let i = 0; i < n; i++) d.runFirst[i + 1] += d.runFirst[i];
  d.blockBars = new Uint32Array(nb); d.blockHidden = new Uint32Array(nb);
  d.storageOf = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const b = d.laneBlock[d.lane[i]];
    if (b >= 0) { d.blockBars[b]++; if (d.flags[i] & d.C.flag.partner_hidden) d.blockHidden[b]++; }
    d.storageOf[i] = d.blockStorage[b] ?? -1;
  }
  d.viewOf = new Map();
  d.names.forEach((name, k) => d.viewOf.set(name, k));
}

// The names a lane's label lists when it draws one bar (several for tied views), else null.
function laneNames(d, l) {
  if (d.laneLabels[l] || d.index.first[l + 1] - d.index.first[l] !== 1) return null;
  return barViews(d, d.index.order[d.index.first[l]]).map((v) => d.names[v]);
}

// A lane's label in `maxW` pixels, cut at a name boundary (fitName), tied names counted
// (spanLabel), a storage row's file tag dropped before its number and size.
export function fittedLabel(d, l, maxW, measure) {
  const names = laneNames(d, l);
  if (names) return spanLabel(names, maxW, measure);
  const full = laneLabel(d, l);
  if (measure(full) <= maxW || !d.laneShort || !d.laneShort[l]) return fitName(full, maxW, measure);
  return fitName(d.laneShort[l], maxW, measure);
}

function laneLabel(d, l) {
  if (d.laneLabels[l]) return d.laneLabels[l];
  const [a, b] = [d.index.first[l], d.index.first[l + 1]];
  const names = [];
  for (let j = a; j < b && names.length < 4; j++) for (const v of barViews(d, d.index.order[j])) names.push(d.names[v]);
  if (b - a === 1) return barViews(d, d.index.order[a]).map((v) => d.names[v]).join(" ≡ ");
  return names.length <= 3 ? names.join(", ") : `${names[0]}, … (${(b - a).toLocaleString()} bars)`;
}

// One view of the canvas: its DOM, what it shows (the decoded payload, the selection, the byte
// window, the hovered bar, the lane the overview picked) and its event handlers.
class CanvasView {
  constructor(model, el) {
    this.model = model;
    this.root = document.createElement("div");
    this.root.className = "tvz-cv";
    this.root.innerHTML = HTML;
    el.append(this.root);
    const $ = (s) => this.root.querySelector(s);
    this.scroller = $(".tvz-cv-scroll"); this.canvas = $("canvas"); this.spacer = $(".tvz-cv-spacer");
    this.tip = $(".tvz-tip"); this.foot = $(".tvz-cv-foot"); this.legendBox = $(".tvz-cv-legend"); this.captionBox = $(".tvz-cv-caption");
    this.g = this.canvas.getContext("2d");
    this.C = vocabCodes(model.get("vocab"));
    this.theme = themeColors(() => null);
    this.width = 600; this.height = 200; this.sc = null; this.hover = -1; this.drag = null; this.frame = 0; this.hatch = null;
    this.overview = new OverviewView($(".tvz-ov"), (e, text) => this.placeTip(e, text), (l) => this.pick(l));
    // compare mode (tv.explore(a, compare=b)): the payload's "compare" section, drawn above the lanes
    this.compare = new CompareView($(".tvz-cmp"), {
      select: (keys) => this.select(keys), tip: (e, text) => this.placeTip(e, text),
      ask: (names) => this.model.send({ kind: "compare_rows", names }),  // rows not sent, for the hover of a's views
      wait: (ms) => setTimeout(() => this.retip(), ms + 20),  // no answer by then: the hover says so
    });
    this.root.tvz = this.hooks();
    this.load();
  }

  // -- what is shown -------------------------------------------------------------------------
  load() {
    const sent = this.model.get("payload") || {}, p = { ...sent, ...unframe(sent.frame, this.C.names.columns) };
    this.d = decodeAll(p, this.C);
    this.readSelection(); this.readMarks();
    this.focus = -1;
    this.readZoom();
    this.readTheme(); this.resize(); this.legend(); this.draw();
    this.compare.update(sent.compare, this.theme, this.selected, p.revision ?? 0); this.compare.resize(this.width);
    this.overview.update((k) => p[k], this.d); this.overview.draw(this.width);
    this.root.dataset.revision = p.revision ?? 0;
  }

  readSelection() {
    const r = this.model.get("relations") || {};
    this.selected = new Set(this.model.get("selected"));
    this.rel = this.d.rel = column(r.code, Uint8Array);
    this.d.relTo = column(r.to, Uint32Array);
  }

  // JupyterLab's theme colours (light, dark, high contrast), read again on each payload and
  // when the page's theme changes (the body's data-jp-theme-name).
  readTheme() {
    this.themed = this.root.isConnected;  // before the view is on the page nothing resolves: read again then
    this.theme = themeColors((name) => resolveColor(this.root, name));
    this.root.dataset.theme = JSON.stringify(this.theme);
    this.overview.theme = this.theme;
    this.compare.setTheme(this.theme);
  }

  readMarks() { this.marks = decodeMarks(this.model.get("load_marks")); }  // the load check's (loadmarks.js)

  readZoom() { const z = this.model.get("zoom"); this.view = z && z.length === 2 ? z : null; }

  setZoom(w) { this.view = w; this.model.set("zoom", w || []); this.model.save_changes(); this.schedule(); }

  // -- drawing -------------------------------------------------------------------------------
  resize() {
    const d = this.d, dpr = window.devicePixelRatio || 1;
    this.width = Math.max(240, Math.floor(this.root.clientWidth || this.root.parentElement.clientWidth || 600) - 2);
    this.height = AXIS_H + Math.max(1, Math.min(d.laneKind.length, MAX_LANES_SHOWN)) * LANE_H + 4;
    const { canvas, width, height } = this;
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(height * dpr);
    canvas.style.width = width + "px"; canvas.style.height = height + "px";
    this.scroller.style.height = height + "px";
    this.spacer.style.height = Math.max(0, AXIS_H + d.laneKind.length * LANE_H + 4 - height) + "px";
    this.g.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  labelWidth() { return Math.round(Math.min(260, Math.max(110, this.width * 0.3))); }

  lanesInView() { return laneWindow(this.scroller.scrollTop, this.height - AXIS_H, LANE_H, this.d.laneKind.length); }

  schedule() { if (!this.frame) this.frame = requestAnimationFrame(() => this.draw()); }

  draw() {
    this.frame = 0;
    if (!this.themed) { this.readTheme(); if (this.themed) { this.overview.drawnWidth = -1; this.overview.draw(this.width); } }
    const t0 = performance.now(), { d, g, width, height, drag, view } = this;
    const [lo, hi] = view || d.xRange, lw = this.labelWidth();
    this.sc = scale(lo, hi, lw + 6, width - lw - 14);
    g.fillStyle = this.theme.background; g.fillRect(0, 0, width, height);
    const [first, last] = this.lanesInView(), top = this.scroller.scrollTop;
    for (let l = first; l < last; l++) this.drawLane(l, AXIS_H + (l - first) * LANE_H - (top % LANE_H), lw);
    this.drawAxis(lw);
    if (drag && drag.x1 !== undefined) {
      g.fillStyle = "rgba(30,110,200,0.18)";
      g.fillRect(Math.min(drag.x0, drag.x1), AXIS_H, Math.abs(drag.x1 - drag.x0), height - AXIS_H);
    }
    const nL = d.laneKind.length;
    this.foot.textContent = `lanes ${(nL ? first + 1 : 0).toLocaleString()}–${last.toLocaleString()} of ${nL.toLocaleString()}${last - first < nL ? " (scroll for more)" : ""} · ` +
      `bytes [${formatBytes(lo)}, ${formatBytes(hi)})${view ? " zoomed: double-click to reset" : " · drag across the bars to zoom"}`;
    Object.assign(this.root.dataset, { firstLane: first, lastLane: last, drawMs: (performance.now() - t0).toFixed(2) });
  }

  drawAxis(lw) {
    const { g, sc, width } = this;
    const th = this.theme;
    g.fillStyle = th.background; g.fillRect(0, 0, width, AXIS_H);
    g.strokeStyle = th.border; g.fillStyle = th.text; g.font = "11px sans-serif"; g.textBaseline = "middle";
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

  drawLane(l, y, lw) {
    const { d, g, sc } = this, kind = d.laneKind[l], { storage, summary } = this.C.lane;
    const th = this.theme;
    if (l === this.focus) { g.fillStyle = th.panel; g.fillRect(0, y, this.width, LANE_H); g.fillStyle = th.accent; g.fillRect(0, y + 1, 3, LANE_H - 2); }
    g.fillStyle = th.text;
    g.font = (kind === storage ? "bold " : "") + "11px sans-serif";
    g.textBaseline = "middle";
    g.save(); g.beginPath(); g.rect(0, y, lw, LANE_H); g.clip();
    g.fillText(fittedLabel(d, l, lw - 8, (t) => g.measureText(t).width), 4, y + LANE_H / 2);
    g.restore();
    g.save(); g.beginPath(); g.rect(sc.x0 - 1, y, sc.width + 2, LANE_H); g.clip();
    if (kind === storage || kind === summary) {
      const r = barRect(sc, 0, kind === storage ? d.blockNbytes[d.laneBlock[l]] : d.laneSize[l]);
      if (r) { g.fillStyle = "rgba(150,150,150,0.25)"; g.fillRect(r[0], y + 4, r[1], LANE_H - 8); g.strokeStyle = th.border; g.strokeRect(r[0] + 0.5, y + 4.5, r[1] - 1, LANE_H - 9); }
    }
    this.drawMarks(l, y);
    const [a, b] = laneRange(d.index, d.start, l, sc.lo, sc.hi), any = this.selected.size > 0;
    let covered = -Infinity;  // thin bars under pixels already drawn add nothing: skip them
    for (let j = a; j < b; j++) {
      const i = d.index.order[j], x1 = sc.px(d.stop[i]);
      if (x1 - sc.px(d.start[i]) < 1 && x1 <= covered && i !== this.hover && !this.isMarked(i)) continue;
      this.drawBar(i, y, any);
      covered = Math.max(covered, Math.max(x1, sc.px(d.start[i]) + 1.5));
    }
    g.restore();
  }

  drawMarks(l, y) {
    const { d, g, sc } = this, pastEnd = this.C.mark["past-end"], twice = this.C.mark["read-twice"];
    const [a, b] = laneRange(d.markIndex, d.markStart, l, sc.lo, sc.hi);
    for (const past of [true, false]) {  // past-end under the other marks, as in the PNG
      for (let j = a; j < b; j++) {
        const m = d.markIndex.order[j], kind = d.markKind[m], r = barRect(sc, d.markStart[m], d.markStop[m]);
        if (!r || (kind === pastEnd) !== past) continue;
        if (past) { this.drawPastEnd(r, y); continue; }
        g.fillStyle = MARK_FILL[this.C.names.mark_kinds[kind]] || "#000";
        if (kind === twice) g.fillRect(r[0], y + LANE_H - 6, r[1], 4);
        else g.fillRect(r[0], y + 5, r[1], LANE_H - 10);
      }
    }
  }

  drawPastEnd(r, y) {
    const g = this.g;
    g.fillStyle = MARK_FILL["past-end"]; g.fillRect(r[0], y + 4, r[1], LANE_H - 8);
    g.fillStyle = this.hatch || (this.hatch = this.plusHatch()); g.fillRect(r[0], y + 4, r[1], LANE_H - 8);
    g.setLineDash([4, 2]); g.strokeStyle = PAST_END_EDGE; g.lineWidth = 1;
    g.strokeRect(r[0] + 0.5, y + 4.5, Math.max(r[1] - 1, 1), LANE_H - 9); g.setLineDash([]);
  }

  plusHatch() {  // a 5 px grid of purple lines: the PNG's "++" hatch
    const tile = document.createElement("canvas");
    tile.width = tile.height = 5;
    const t = tile.getContext("2d");
    t.fillStyle = PAST_END_EDGE; t.fillRect(2, 0, 1, 5); t.fillRect(0, 2, 5, 1);
    return this.g.createPattern(tile, "repeat");
  }

  relation(i) { const d = this.d; return this.rel.length ? this.rel[d.barView.length ? d.barView[i] : i] : 0; }

  isMarked(i) { return this.relation(i) > 0; }

  drawBar(i, y, any) {
    const { d, g, sc, C } = this, r = barRect(sc, d.start[i], d.stop[i], 1.5);
    if (!r) return;
    const code = this.relation(i), shares = sharesBytes(C, code), selected = code === C.rel.selected;
    const flags = d.flags[i], fill = d.colors[d.color[i]] || "#4477aa";
    g.globalAlpha = any && !shares ? 0.3 : 1;
    g.fillStyle = fill;
    if (flags & C.flag.sparse) {  // sparse: a light span, the footprint runs solid
      g.globalAlpha *= 0.3; g.fillRect(r[0], y + 3, r[1], LANE_H - 6); g.globalAlpha /= 0.3;
      for (let k = d.runFirst[i]; k < d.runFirst[i + 1]; k++) {
        const q = barRect(sc, d.runs[2 * k], d.runs[2 * k + 1], 1);
        if (q) g.fillRect(q[0], y + 3, q[1], LANE_H - 6);
      }
    } else g.fillRect(r[0], y + 3, r[1], LANE_H - 6);
    g.globalAlpha = 1;
    if ((flags & C.flag.overlaps_other) && r[1] > 6) { g.setLineDash([3, 2]); g.strokeStyle = C.names.shares_outline; g.lineWidth = 1; g.strokeRect(r[0] + 0.5, y + 3.5, r[1] - 1, LANE_H - 7); g.setLineDash([]); }
    if (shares || i === this.hover) {  // two strokes: the meaning's colour, and inside it ink that reads on the fill
      const [outer, inner] = outlineColors(fill, selected ? "selected" : i === this.hover ? "hover" : "shares");
      g.lineWidth = 2; g.strokeStyle = outer;
      g.strokeRect(r[0] + 1, y + 2, Math.max(r[1] - 2, 1), LANE_H - 4);
      if (r[1] > 6) { g.lineWidth = 1; g.strokeStyle = inner; g.strokeRect(r[0] + 2.5, y + 3.5, r[1] - 5, LANE_H - 7); }
      g.lineWidth = 1;
    }
    const mark = markOf(this.marks, barViews(d, i));
    if (mark) drawBadge(g, mark, badgeRect(r[0], r[1], y, LANE_H), this.theme.background);
  }

  legend() {
    const { d, C } = this, keys = [];
    new Set(d.markKind).forEach((k) => keys.push([k === C.mark["past-end"] ? PAST_END_KEY : MARK_FILL[C.names.mark_kinds[k]], markWords(C, k)]));
    if (d.flags.some((f) => f & C.flag.sparse)) keys.push(["rgba(68,119,170,0.3)", gapsKey(d)]);
    if (d.flags.some((f) => f & C.flag.overlaps_other)) keys.push([`#fff;border:1px dashed ${C.names.shares_outline}`, "shares bytes with another view"]);
    if (this.selected.size) keys.push(["#fff;border:2px solid #000", "selected"], ["#fff;border:2px solid #e07000", "shares bytes with the selection"]);
    keys.push(...markKeys(this.marks));
    this.legendBox.innerHTML = "";
    for (const [css, text, glyph] of keys) {
      const s = document.createElement("span");
      s.className = "tvz-cv-key";
      s.innerHTML = `<i style="background:${css}"></i>`;
      if (glyph) { s.firstChild.textContent = glyph; s.firstChild.className = "tvz-cv-glyph"; }
      s.append(text);
      this.legendBox.append(s);
    }
    this.captionBox.textContent = d.caption;
  }

  // -- the mouse -----------------------------------------------------------------------------
  point(e) { const r = this.canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }

  laneAt(y) { return Math.floor((y - AXIS_H + this.scroller.scrollTop) / LANE_H); }

  barAt(x, y) {
    const { sc, d } = this;
    if (!sc || y < AXIS_H || x < sc.x0 - 2) return -1;
    return hitBar(d.index, d.start, d.stop, this.laneAt(y), sc.byte(x), 2 / sc.k);
  }

  showTip(e, i) {
    const [px, py] = this.point(e), l = this.laneAt(py), { sc, d } = this;
    if (i < 0 && sc && py >= AXIS_H && px < sc.x0 - 2 && l >= 0 && l < d.laneKind.length) {  // a label: its full text
      const names = laneNames(d, l);
      this.placeTip(e, names ? [...tooltip(d, d.index.order[d.index.first[l]]), ...this.compare.matchLines(names)] : [clipName(laneLabel(d, l))]);
      return;
    }
    const onStorage = i < 0 && sc && py >= AXIS_H && px >= sc.x0 - 2 && d.laneKind[l] === this.C.lane.storage;
    if (i < 0 && !onStorage) { this.placeTip(e, null); return; }
    const mark = i >= 0 ? markLine(markOf(this.marks, barViews(d, i))) : "";
    const b = i >= 0 ? this.compare.matchLines(barViews(d, i).map((v) => d.names[v])) : [];  // compare mode: b's side
    this.placeTip(e, i >= 0 ? [...tooltip(d, i), ...(mark ? [mark] : []), ...b] : storageTooltip(d, l, sc.byte(px), 2 / sc.k));
  }

  // The tooltip's lines (the first in bold) beside the mouse, inside the widget; null hides it.
  placeTip(e, text) {
    const tip = this.tip;
    if (!text) { tip.style.display = "none"; return; }
    tip.innerHTML = "";
    const b = document.createElement("b"); b.textContent = text[0]; tip.append(b, "\n" + text.slice(1).join("\n"));
    const box = this.root.getBoundingClientRect();
    tip.style.display = "block";
    const left = Math.min(e.clientX - box.left + 14, Math.max(0, box.width - tip.offsetWidth - 4));
    // below the pointer; above it when it would run past the widget's bottom (a long compare-mode hover)
    const below = e.clientY - box.top + 16, above = e.clientY - box.top - 8 - tip.offsetHeight;
    tip.style.left = left + "px"; tip.style.top = (below + tip.offsetHeight <= box.height ? below : Math.max(0, above)) + "px";
  }

  // Scroll the lanes to lane l (an overview click) and mark it until the next one.
  pick(l) {
    this.focus = l;
    this.scroller.scrollTop = Math.max(0, (l - 1) * LANE_H);
    this.scroller.scrollIntoView({ block: "nearest" });
    this.root.dataset.focusLane = l;
    this.schedule();
  }

  onMove(e) {
    const [x, y] = this.point(e);
    if (this.drag) { this.drag.x1 = x; this.schedule(); return; }
    const i = this.barAt(x, y);
    if (i !== this.hover) { this.hover = i; this.schedule(); }
    this.showTip(e, i);
    this.tipAt = [{ clientX: e.clientX, clientY: e.clientY }, i];  // shown again when the kernel answers
  }

  // The kernel's answer to a compare-mode hover (CompareView.receive): the hover shown again.
  onMessage(msg, buffers) {
    if (msg.kind === "compare_rows" && this.compare.receive(msg, buffers)) this.retip();
  }

  // The hover shown again where it is (it may have news from the kernel, or of its silence).
  retip() { if (this.tipAt && this.tip.style.display !== "none") this.showTip(...this.tipAt); }

  onLeave() { this.tip.style.display = "none"; if (this.hover >= 0) { this.hover = -1; this.schedule(); } }

  onDown(e) { const [x] = this.point(e); if (e.button === 0 && this.sc && x >= this.sc.x0) this.drag = { x0: x }; }

  onUp(e) {
    const [x, y] = this.point(e), from = this.drag;
    this.drag = null;
    if (!from) return;
    const w = from.x1 !== undefined ? dragWindow(this.sc, from.x0, x) : null;
    if (w) { this.setZoom(w); return; }
    const i = this.barAt(x, y), names = i < 0 ? [] : barViews(this.d, i).map((v) => this.d.names[v]);
    let next = new Set(names);
    if (e.shiftKey || e.ctrlKey || e.metaKey) {
      next = new Set(this.selected);
      const on = names.every((n) => next.has(n));
      names.forEach((n) => (on ? next.delete(n) : next.add(n)));
    }
    this.select([...next]);
  }

  select(names) { this.model.set("selected", names); this.model.save_changes(); this.schedule(); }

  onResize() {
    if (!this.themed) this.schedule();
    if (Math.floor(this.root.clientWidth) - 2 === this.width) return;
    this.resize(); this.draw(); this.overview.draw(this.width); this.compare.resize(this.width);
  }

  // -- wiring ----------------------------------------------------------------------------------
  // Listen to the model, the mouse and the size; returns the cleanup anywidget calls.
  listen() {
    const on = (target, type, f) => { target.addEventListener(type, f); return () => target.removeEventListener(type, f); };
    const watch = (name, f) => { this.model.on(`change:${name}`, f); return () => this.model.off(`change:${name}`, f); };
    const selection = () => { this.readSelection(); this.legend(); this.schedule(); this.compare.setSelection(this.selected); };
    const ro = new ResizeObserver(() => this.onResize());
    ro.observe(this.root);
    const themed = new MutationObserver(() => { this.readTheme(); this.draw(); this.overview.drawnWidth = -1; this.overview.draw(this.width); });
    themed.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
    const undo = [
      on(this.canvas, "mousemove", (e) => this.onMove(e)), on(this.canvas, "mouseleave", () => this.onLeave()),
      on(this.canvas, "mousedown", (e) => this.onDown(e)), on(window, "mouseup", (e) => this.onUp(e)),
      on(this.canvas, "dblclick", () => this.setZoom(null)),
      on(this.scroller, "scroll", () => { this.tip.style.display = "none"; this.schedule(); }),
      watch("payload", () => this.load()), watch("relations", selection), watch("selected", selection),
      (() => { const f = (msg, buffers) => this.onMessage(msg, buffers); this.model.on("msg:custom", f); return () => this.model.off("msg:custom", f); })(),
      watch("zoom", () => { this.readZoom(); this.schedule(); }),
      watch("load_marks", () => { this.readMarks(); this.legend(); this.schedule(); }), () => ro.disconnect(), () => themed.disconnect(),
    ];
    return () => undo.forEach((f) => f());
  }

  // For tests and benchmarks (Playwright): where a name is drawn, a canvas pixel, the plot box.
  hooks() {
    return {
      locate: (name) => this.locate(name),
      pixel: (x, y) => {
        const c = this.canvas.getBoundingClientRect(), dpr = this.canvas.width / c.width;
        return Array.from(this.g.getImageData(Math.round((x - c.left) * dpr), Math.round((y - c.top) * dpr), 1, 1).data);
      },
      plot: () => { const c = this.canvas.getBoundingClientRect(), sc = this.sc; return { left: c.left + sc.x0, width: sc.width, lo: sc.lo, hi: sc.hi, top: c.top + AXIS_H }; },
      lanes: () => this.d.laneKind.length,
      compare: (key) => this.compare.locate(key),
      theme: () => this.theme,
      label: (l) => fittedLabel(this.d, l, this.labelWidth() - 8, (t) => { this.g.font = "11px sans-serif"; return this.g.measureText(t).width; }),
    };
  }

  locate(name) {
    const d = this.d, k = d.viewOf.get(name);
    let i = -1;
    for (let b = 0; b < d.start.length && i < 0; b++) if (barViews(d, b).includes(k)) i = b;
    if (i < 0) return null;
    const l = d.lane[i], [first, last] = this.lanesInView();
    if (l < first || l >= last - 1) this.scroller.scrollTop = Math.max(0, (l - 2) * LANE_H);
    this.draw();
    const sc = this.sc, a = Math.max(d.start[i], sc.lo), b = Math.min(d.stop[i], sc.hi), c = this.canvas.getBoundingClientRect();
    const y = AXIS_H + l * LANE_H - this.scroller.scrollTop + LANE_H / 2;
    return { x: c.left + (sc.px(a) + sc.px(b)) / 2, y: c.top + y, x0: c.left + sc.px(a), x1: c.left + sc.px(b), color: d.colors[d.color[i]] };
  }
}

function render({ model, el }) {
  return new CanvasView(model, el).listen();
}

export default { render };
