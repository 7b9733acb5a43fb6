// The interactive explain panel (tv.explain(..., interactive=True)): storage cells above, each
// view's logical grid below. Hover an element: its storage cell and its address formula light
// up; hover a cell: every element of every view that reads it. The stride playground redraws a
// view with the shape, stride and offset typed in, on the same storage, and flags strides that
// leave it. Pure geometry first (tested by `node --test tests/js/` against Python's plan), the
// DOM and canvas code after, in render().
import { themeColors, resolveColor } from "./theme.js";
import { contrast } from "./treemap.js";

export const ROW_CELLS = 24;
export const GAP_CELLS = 8;

// Row-major element addresses (in elements of the view's dtype): offset + sum(index * stride).
export function addresses(shape, stride, offset) {
  const n = shape.reduce((a, b) => a * b, 1);
  const out = new Array(n);
  const idx = new Array(shape.length).fill(0);
  let addr = offset;
  for (let e = 0; e < n; e++) {
    out[e] = addr;
    for (let d = shape.length - 1; d >= 0; d--) { // odometer: step the last index, carry left
      idx[d] += 1;
      addr += stride[d];
      if (idx[d] < shape[d]) break;
      addr -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

// The multi-index of element e (row-major) and back.
export function unravel(e, shape) {
  const idx = new Array(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) { idx[d] = e % shape[d]; e = Math.floor(e / shape[d]); }
  return idx;
}

// The first storage cell each element reads (a cell is cellBytes bytes; an element covers
// itemsize / cellBytes cells from there); `base` is the cells before element address 0.
export function firstCells(view, cellBytes) {
  const per = view.itemsize / cellBytes;
  return addresses(view.shape, view.stride, view.offset).map((a) => a * per + view.base);
}

// Every cell a view reads, sorted, without repeats.
export function readCells(view, cellBytes) {
  const per = view.itemsize / cellBytes, out = new Set();
  for (const c of firstCells(view, cellBytes)) for (let k = 0; k < per; k++) out.add(c + k);
  return [...out].sort((a, b) => a - b);
}

// The drawn cells of a strip, as Python's plan draws them: the whole storage when small, else
// the window the views reach, else runs of read cells (neighbours within GAP_CELLS joined).
export function stripWindow(totalCells, reads, maxCells) {
  const reach = reads.length ? reads[reads.length - 1] + 1 : 0;
  const total = Math.max(totalCells, reach);
  if (total <= maxCells) return [[0, total]];
  if (!reads.length) return [[0, 0]];
  const lo = reads[0], hi = reach;
  if (hi - lo <= maxCells) return [[lo, hi]];
  const segs = [[reads[0], reads[0] + 1]];
  for (const c of reads.slice(1)) {
    const last = segs[segs.length - 1];
    if (c - (last[1] - 1) > GAP_CELLS + 1) segs.push([c, c + 1]);
    else last[1] = c + 1;
  }
  return segs;
}

// Place of each drawn cell: row and column (each segment starts a row of ROW_CELLS).
export function cellSlots(segments) {
  const slots = new Map();
  let row = 0;
  for (const [a, b] of segments) {
    for (let c = a; c < b; c++) slots.set(c, [row + Math.floor((c - a) / ROW_CELLS), (c - a) % ROW_CELLS]);
    row += Math.max(1, Math.ceil((b - a) / ROW_CELLS));
  }
  return { slots, rows: row };
}

// Every (view, element) reading a cell, over all views of a strip.
export function readersOf(views, cellBytes, cell) {
  const out = [];
  views.forEach((v, k) => {
    const per = v.itemsize / cellBytes;
    firstCells(v, cellBytes).forEach((c, e) => { if (c <= cell && cell < c + per) out.push([k, e]); });
  });
  return out;
}

// The formula with the element's numbers: "addr = 2 + 4·1 + 1·3 = 9".
export function formulaAt(view, e) {
  const idx = unravel(e, view.shape);
  const terms = [String(view.offset)].concat(view.stride.map((s, d) => `${s}·${idx[d]}`));
  const addr = view.offset + view.stride.reduce((a, s, d) => a + s * idx[d], 0);
  return `addr = ${terms.join(" + ")} = ${addr}`;
}

// Parse the playground's fields: "2, 3" -> [2, 3]; null when not a list of whole numbers.
export function parseInts(text) {
  const parts = String(text).split(/[\s,()[\]]+/).filter((p) => p !== "");
  if (!parts.every((p) => /^-?\d+$/.test(p))) return null;
  return parts.map(Number);
}

// Check a playground geometry against its storage: which elements read outside it.
export function checkGeometry(shape, stride, offset, itemsize, storageBytes, maxElements) {
  if (shape.length !== stride.length) return { ok: false, why: `shape has ${shape.length} dims, stride ${stride.length}` };
  if (shape.some((s) => s < 0) || stride.some((s) => s < 0) || offset < 0) return { ok: false, why: "sizes, strides and the offset are ≥ 0" };
  const n = shape.reduce((a, b) => a * b, 1);
  if (n > maxElements) return { ok: false, why: `${n} elements; the panel draws at most ${maxElements}` };
  const limit = Math.floor(storageBytes / itemsize), addr = addresses(shape, stride, offset);
  const outside = [];
  addr.forEach((a, e) => { if (a >= limit) outside.push(e); });
  const first = outside.length ? addr[outside[0]] : null;
  return { ok: true, outside, first, limit, leaves: outside.length > 0 };
}

// Where things are drawn (CSS pixels): strip cells on rows, grids below, side by side.
export function layoutPanel(strip, views, segments, opts = {}) {
  const cell = opts.cell ?? 28, left = opts.left ?? 70, top = opts.top ?? 28, width = opts.width ?? 900;
  const { slots, rows } = cellSlots(segments);
  const strips = new Map(), labels = [];
  for (const [c, [r, col]] of slots) {
    strips.set(c, [left + col * cell, top + r * (cell + 8), cell, cell]);
    if (col === 0) labels.push([top + r * (cell + 8) + cell / 2, c]);
  }
  let y0 = top + rows * (cell + 8) + 70, x = left, rowH = 0;
  const grids = views.map((v) => {
    const cols = v.shape.length ? v.shape[v.shape.length - 1] : 1;
    const nrows = v.shape.length > 1 ? v.shape.slice(0, -1).reduce((a, b) => a * b, 1) : 1;
    const g = Math.max(16, Math.min(cell, Math.floor(320 / Math.max(cols, 1))));
    const w = Math.max(cols * g, 250) + 30;
    if (x + w > width && x > left) { x = left; y0 += rowH + 70; rowH = 0; }
    const rects = [];
    for (let e = 0; e < cols * nrows; e++) rects.push([x + (e % cols) * g, y0 + Math.floor(e / cols) * g, g, g]);
    const at = [x, y0];
    x += w + 20; rowH = Math.max(rowH, nrows * g);
    return { at, rects, g };
  });
  return { strips, labels, grids, height: y0 + rowH + 20 };
}

// What is under a point: {kind: "cell", cell} or {kind: "element", view, element} or null.
export function hitPanel(panel, px, py) {
  for (const [c, [x, y, w, h]] of panel.strips) if (px >= x && px < x + w && py >= y && py < y + h) return { kind: "cell", cell: c };
  for (let k = 0; k < panel.grids.length; k++) {
    const rects = panel.grids[k].rects;
    for (let e = 0; e < rects.length; e++) {
      const [x, y, w, h] = rects[e];
      if (px >= x && px < x + w && py >= y && py < y + h) return { kind: "element", view: k, element: e };
    }
  }
  return null;
}

// ---- DOM and canvas -------------------------------------------------------------------------
const CSS = `.tvx-wrap{font:12px var(--jp-ui-font-family,sans-serif);color:var(--jp-content-font-color1,#222)}
.tvx-bar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:4px 0}
.tvx-bar input{width:9em;font:12px var(--jp-code-font-family,monospace)}
.tvx-info{font:12px var(--jp-code-font-family,monospace);min-height:1.4em;margin:2px 0}
.tvx-flag{color:#cc3311;font-weight:bold}`;

// The panel's ink from JupyterLab's theme colours (theme.js: text and labels that read on the
// page, dark themes too): a view's own colour for its name where it reads on the background
// (3:1), else the text colour.
export function panelInk(theme) {
  const reads = (c) => /^#[0-9a-f]{6}$/i.test(c) && contrast(c, theme.background) >= 3;
  return { text: theme.text, muted: theme.muted, name: (c) => (reads(c) ? c : theme.text) };
}

function colorFor(rank, n) {
  const t = n > 1 ? rank / (n - 1) : 0.5;
  return `hsl(${Math.round(250 - 230 * t)}, 70%, 80%)`;
}

// "storage #0: 67,108,864 bytes, cells = float32 elements (4 B); showing 64 cells in 8 runs"
export function stripTitle(strip, views, segments) {
  const dtypes = [...new Set(views.map((v) => v.dtype))];
  const unit = dtypes.length === 1 && views[0].itemsize === strip.cellBytes
    ? `cells = ${dtypes[0]} elements (${strip.cellBytes} B)` : `${strip.cellBytes}-byte cells`;
  const drawn = segments.reduce((a, [lo, hi]) => a + hi - lo, 0);
  const runs = segments.length > 1 ? `; showing ${drawn} cells in ${segments.length} runs (the cells between runs are cut)` : "";
  return `storage #${strip.storage}: ${strip.nbytes.toLocaleString("en-US")} bytes, ${unit}${runs}`;
}

// Facts a redraw needs, computed once per geometry: each element's first cell, the cells read,
// a colour per drawn cell (by its place among the drawn cells), the storage's end in cells.
function facts(views, strip, panel) {
  const cells = [...panel.strips.keys()], rank = new Map(cells.map((c, i) => [c, i]));
  const firsts = views.map((v) => firstCells(v, strip.cellBytes));
  const read = new Set(views.flatMap((v) => readCells(v, strip.cellBytes)));
  return { firsts, read, limit: Math.floor(strip.nbytes / strip.cellBytes), tint: (c) => colorFor(rank.get(c) ?? 0, cells.length) };
}

function paintCell(g, [x, y, w, h], fill, text, lit, font) {
  g.fillStyle = fill; g.fillRect(x, y, w, h);
  g.lineWidth = lit ? 3 : 0.6; g.strokeStyle = lit ? "#cc3311" : "#444";
  g.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
  g.font = font; g.textAlign = "center"; g.textBaseline = "middle";
  g.fillStyle = "#111"; g.fillText(text, x + w / 2, y + h / 2, w - 2);
}

const cellFill = (f, c) => (c >= f.limit ? "#f4b6a8" : f.read.has(c) ? f.tint(c) : "#e4e4e4");

// Everything but the hover: drawn once per geometry into an offscreen canvas.
function drawBase(g, st) {
  const { panel, views, f } = st;
  const ink = st.ink;
  g.textBaseline = "middle"; g.textAlign = "left"; g.font = "bold 13px sans-serif"; g.fillStyle = ink.text;
  const past = [...panel.strips.keys()].some((c) => c >= f.limit);
  g.fillText(st.title + (past ? " — red cells lie past the storage's end" : ""), 4, 12);
  g.textAlign = "right"; g.font = "10px sans-serif"; g.fillStyle = ink.muted;
  for (const [y, c] of panel.labels) g.fillText(`cell ${c}`, panel.strips.get(c)[0] - 4, y);
  for (const [c, rect] of panel.strips) paintCell(g, rect, cellFill(f, c), String(c), false, "11px sans-serif");
  views.forEach((v, k) => {
    const grid = panel.grids[k];
    g.textAlign = "left"; g.fillStyle = ink.name(v.color); g.font = "bold 12px sans-serif";
    const part = v.shown ? `  showing ${v.shown}` : "";
    g.fillText(`${v.name}${k === st.edited ? " (playground)" : ""}${part}`, grid.at[0], grid.at[1] - 40, 270);
    g.font = "11px monospace"; g.fillStyle = st.flagged && k === st.edited ? "#cc3311" : ink.text;
    g.fillText(`shape (${v.shape.join(", ")}) stride (${v.stride.join(", ")}) offset ${v.offset}`, grid.at[0], grid.at[1] - 24, 270);
    g.fillText(v.formula, grid.at[0], grid.at[1] - 10);
    grid.rects.forEach((rect, e) => paintCell(g, rect, cellFill(f, f.firsts[k][e]), String(f.firsts[k][e]), false, "10px sans-serif"));
  });
}

// A frame: the base image, then only the lit cells and elements painted again.
function draw(g, st) {
  const { panel, f, hover } = st;
  g.setTransform(1, 0, 0, 1, 0, 0);
  g.clearRect(0, 0, g.canvas.width, g.canvas.height);
  g.drawImage(st.base, 0, 0);
  g.setTransform(st.dpr, 0, 0, st.dpr, 0, 0);
  for (const c of hover?.cells ?? []) {
    const rect = panel.strips.get(c);
    if (rect) paintCell(g, rect, cellFill(f, c), String(c), true, "11px sans-serif");
  }
  for (const [k, e] of hover?.elements ?? []) {
    const c = f.firsts[k][e];
    paintCell(g, panel.grids[k].rects[e], cellFill(f, c), String(c), true, "10px sans-serif");
  }
}

function render({ model, el }) {
  const style = document.createElement("style"); style.textContent = CSS;
  el.append(style);
  const plan = model.get("plan");
  const cleanups = plan.strips.map((strip, si) => mountStrip(model, plan, strip, si, el));
  return () => cleanups.forEach((f) => f());
}

// One storage: its playground bar, its canvas, the hover line and the playground's flag.
function mountStrip(model, plan, strip, si, el) {
  const wrap = document.createElement("div"); wrap.className = "tvx-wrap";
  wrap.dataset.storage = String(strip.storage);
  const bar = document.createElement("div"); bar.className = "tvx-bar";
  const info = document.createElement("div"); info.className = "tvx-info";
  const flag = document.createElement("div"); flag.className = "tvx-info tvx-flag";
  const canvas = document.createElement("canvas"); canvas.className = "tvx-canvas";
  const pick = document.createElement("select");
  const fields = {};
  bar.append("playground:", pick);
  for (const key of ["shape", "stride", "offset"]) {
    const input = document.createElement("input"); input.className = `tvx-${key}`; input.title = key;
    fields[key] = input; bar.append(`${key}`, input);
  }
  wrap.append(bar, canvas, info, flag);
  el.append(wrap);
  let views = strip.views.map((v) => ({ ...v })), st = null, ink = null;
  // The theme's ink, read where the panel is on the page (before that nothing resolves: the
  // light fallbacks until it is); true once read there.
  const readInk = () => {
    ink = panelInk(themeColors((name) => (wrap.isConnected ? resolveColor(wrap, name) : null)));
    return wrap.isConnected;
  };
  views.forEach((v, k) => { const o = document.createElement("option"); o.value = k; o.textContent = v.name; pick.append(o); });
  const fill = () => { const v = views[+pick.value]; fields.shape.value = v.shape.join(", "); fields.stride.value = v.stride.join(", "); fields.offset.value = String(v.offset); };

  function rebuild(flagged = false, edited = -1) {
    const reads = [...new Set(views.flatMap((v) => readCells(v, strip.cellBytes)))].sort((a, b) => a - b);
    const segments = stripWindow(Math.floor(strip.nbytes / strip.cellBytes), reads, plan.maxCells);
    const width = Math.max(el.clientWidth || 900, 760);
    const panel = layoutPanel(strip, views, segments, { width });
    const dpr = window.devicePixelRatio || 1;
    canvas.width = width * dpr; canvas.height = panel.height * dpr;
    canvas.style.width = `${width}px`; canvas.style.height = `${panel.height}px`;
    const title = stripTitle(strip, views, segments), f = facts(views, strip, panel);
    st = { panel, views, strip, title, f, hover: null, flagged, edited, g: canvas.getContext("2d"), dpr, ink };
    st.base = document.createElement("canvas");
    st.base.width = canvas.width; st.base.height = canvas.height;
    const bg = st.base.getContext("2d");
    bg.setTransform(dpr, 0, 0, dpr, 0, 0);
    drawBase(bg, st);
    draw(st.g, st);
  }
  function hoverAt(px, py) {
    const t0 = performance.now();
    const hit = hitPanel(st.panel, px, py);
    if (!hit) { st.hover = null; info.textContent = ""; }
    else if (hit.kind === "element") {
      const v = views[hit.view], per = v.itemsize / strip.cellBytes, c = st.f.firsts[hit.view][hit.element];
      st.hover = { cells: Array.from({ length: per }, (_, k) => c + k), elements: [[hit.view, hit.element]] };
      info.textContent = `${v.name}[${unravel(hit.element, v.shape).join(", ")}]: ${formulaAt(v, hit.element)} → cell ${c}`;
    } else {
      const who = readersOf(views, strip.cellBytes, hit.cell);
      st.hover = { cells: [hit.cell], elements: who };
      info.textContent = `cell ${hit.cell}: ` + (who.length ? who.map(([k, e]) => `${views[k].name}[${unravel(e, views[k].shape).join(", ")}]`).join(", ") : "no view reads it");
    }
    draw(st.g, st);
    canvas.tvx.lastHoverMs = performance.now() - t0;
    return st.hover;
  }
  function applyPlayground() {
    const k = +pick.value, v = views[k];
    const shape = parseInts(fields.shape.value), stride = parseInts(fields.stride.value), off = parseInts(fields.offset.value);
    if (!shape || !stride || !off || off.length !== 1) { flag.textContent = "shape, stride and offset are whole numbers, e.g. 2, 3"; return; }
    const check = checkGeometry(shape, stride, off[0], v.itemsize, strip.nbytes, plan.maxElements);
    if (!check.ok) { flag.textContent = check.why; return; }
    const terms = [String(off[0])].concat(stride.map((s, d) => `${s}·${"ijklmnpq"[d] ?? `i${d}`}`));
    views[k] = { ...v, shape, stride, offset: off[0], formula: `addr = ${terms.join(" + ")}`, shown: "" };
    flag.textContent = check.leaves
      ? `stride leaves the storage: element [${unravel(check.outside[0], shape).join(", ")}] reads address ${check.first}, the storage holds ${check.limit} ${v.dtype} elements (${check.outside.length} elements outside)`
      : "";
    model.set("playground", { strip: si, view: k, shape, stride, offset: off[0], leaves: check.leaves, outside: check.outside.length });
    model.save_changes();
    rebuild(check.leaves, k);
  }
  const at = (e) => { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  canvas.addEventListener("mousemove", (e) => hoverAt(...at(e)));
  canvas.addEventListener("mouseleave", () => { st.hover = null; info.textContent = ""; draw(st.g, st); });
  pick.addEventListener("change", fill);
  for (const input of Object.values(fields)) input.addEventListener("change", applyPlayground);
  canvas.tvx = {
    // page coordinates of a cell or an element (tests and the bench hover there)
    locate(kind, a, b) {
      const r = canvas.getBoundingClientRect();
      const rect = kind === "cell" ? st.panel.strips.get(a) : st.panel.grids[a].rects[b];
      return { x: r.left + rect[0] + rect[2] / 2, y: r.top + rect[1] + rect[3] / 2 };
    },
    hover: () => st.hover,
    hoverAt,
    lastHoverMs: 0,
  };
  readInk(); fill(); rebuild();
  const settle = (frames) => {  // drawn before it was on the page: redraw in the theme once it is
    if (readInk()) rebuild(st.flagged, st.edited);
    else if (frames > 0) requestAnimationFrame(() => settle(frames - 1));
  };
  if (!wrap.isConnected) requestAnimationFrame(() => settle(60));
  const themed = new MutationObserver(() => { readInk(); rebuild(st.flagged, st.edited); });
  themed.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
  return () => { themed.disconnect(); canvas.tvx = null; };
}

export default { render };
