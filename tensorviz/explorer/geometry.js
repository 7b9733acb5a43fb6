// Pure geometry for the tensorviz diagram canvas: decoding columns, byte labels, ticks, lane
// windows, bar rectangles and hit-testing. No DOM here, so `node --test` imports this file as is;
// canvas.js and overview.js import it (explorer/modules.py links the three for anywidget).

import { inkOn } from "./treemap.js";

// The binary units, largest first, as Python's core/units.py sends them in the vocab (`units`:
// its one table); vocabCodes sets them. Until then bytes are written in B.
let UNITS = [];

// A bytes trait arrives as a DataView over the message buffer (maybe unaligned): copy it out.
export function column(view, Type) {
  if (!view || !view.byteLength) return new Type(0);
  const buf = view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength);
  return new Type(buf);
}

// "\n"-joined UTF-8 lines (names, labels) -> array of strings.
export function lines(view, count) {
  if (!view || !view.byteLength) return new Array(count).fill("");
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  return new TextDecoder().decode(bytes).split("\n");
}

// Unsigned LEB128 varints (Python's explorer/wire.py varint) -> Float64Array: 7 bits a byte, the
// high bit set on all but a value's last byte; exact up to 2**53 (multiplies, not 32-bit shifts).
export function varints(view) {
  if (!view || !view.byteLength) return new Float64Array(0);
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let n = 0;
  for (let k = 0; k < bytes.length; k++) if (!(bytes[k] & 128)) n++;
  const out = new Float64Array(n);
  let v = 0, mul = 1, j = 0;
  for (let k = 0; k < bytes.length; k++) {
    const b = bytes[k];
    v += (b & 127) * mul;
    if (b & 128) mul *= 128; else { out[j++] = v; v = 0; mul = 1; }
  }
  return out;
}

// The payload's framed columns (Python's wire.py frame): the lengths of the `names` columns as
// varints, then their bytes -> {name: DataView} (views into the message, no copy).
export function unframe(view, names) {
  const out = {};
  if (!view || !view.byteLength) return out;
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength), lengths = [];
  let pos = 0;
  while (lengths.length < names.length) {
    let v = 0, mul = 1, b;
    do { b = bytes[pos++]; v += (b & 127) * mul; mul *= 128; } while (b & 128);
    lengths.push(v);
  }
  names.forEach((name, k) => { out[name] = new DataView(view.buffer, view.byteOffset + pos, lengths[k]); pos += lengths[k]; });
  return out;
}

// Each view's "shape;stride;offset" from the distinct "shape;stride" heads and the varint
// pairs (head, offset) per view.
export function geomLines(heads, pairs) {
  const out = new Array(pairs.length >> 1);
  for (let k = 0; k < out.length; k++) out[k] = `${heads[pairs[2 * k]]};${pairs[2 * k + 1]}`;
  return out;
}

// Names sent affix-coded (wire.py affix_code): each keeps the first `prefix[k]` and the last
// `suffix[k]` characters of the previous one around the middle sent (no suffix column: none).
export function frontDecode(rest, prefix, suffix) {
  const out = new Array(rest.length);
  let prev = "";
  for (let k = 0; k < rest.length; k++) {
    const s = suffix && suffix.length ? suffix[k] : 0;
    prev = prev.slice(0, prefix[k] || 0) + rest[k] + (s ? prev.slice(prev.length - s) : "");
    out[k] = prev;
  }
  return out;
}

// Use Python's unit table ([[name, bytes], ...], largest first; the 1-byte unit is written "B").
export function setUnits(units) { UNITS = units.filter(([, size]) => size > 1); }

// The payload's codes by name, from the canvas's `vocab` trait (explorer/payload.py VOCAB, the one
// table): `flag[name]` is a bar flag's bit mask; `lane`, `mark`, `rel` number the lane kinds, mark
// kinds and relations; `names` keeps the lists (code -> name).
export function vocabCodes(vocab) {
  const number = (names) => Object.fromEntries(names.map((name, k) => [name, k]));
  if (vocab.units) setUnits(vocab.units);
  return {
    flag: Object.fromEntries(vocab.flags.map((name, k) => [name, 1 << k])),
    lane: number(vocab.lane_kinds), mark: number(vocab.mark_kinds), rel: number(vocab.relations),
    names: vocab,
  };
}

// Bars sent without lanes sit one on each view/simple lane, in order (`C`: vocabCodes).
export function ownLanes(kind, n, C) {
  const out = new Uint32Array(n), { view, simple } = C.lane;
  let k = 0;
  for (let l = 0; l < kind.length && k < n; l++) if (kind[l] === view || kind[l] === simple) out[k++] = l;
  return out;
}

// The block of each lane: a block starts at a storage or simple lane and runs to the next one,
// or to a diagram-wide row ("more storages", the summary), which belongs to none (-1).
export function blockOfLanes(kind, C) {
  const out = new Int32Array(kind.length), { storage, simple, summary } = C.lane, more = C.lane["more-storages"];
  let b = -1;
  for (let l = 0; l < kind.length; l++) {
    if (kind[l] === storage || kind[l] === simple) b++;
    out[l] = kind[l] === more || kind[l] === summary ? -1 : b;
  }
  return out;
}

// Row-major strides of a contiguous shape ("4, 6" -> "6, 1").
export function rowMajor(shape) {
  const dims = shape ? shape.split(",").map((x) => Number(x.trim())) : [];
  const out = new Array(dims.length);
  let step = 1;
  for (let k = dims.length - 1; k >= 0; k--) { out[k] = step; step *= Math.max(dims[k], 1); }
  return out.join(", ");
}

// Binary units (the vocab's table), at most 4 significant digits, as Python's units.byte_text:
// 1536 -> "1.5 KiB", 4000 -> "3.906 KiB".
export function formatBytes(n) {
  const sign = n < 0 ? "-" : "";
  let a = Math.abs(n);
  for (const [name, size] of UNITS) {
    if (a >= size) {
      const v = a / size;
      const digits = Math.max(0, 3 - Math.floor(Math.log10(v)));
      return sign + trim(v.toFixed(digits)) + " " + name;
    }
  }
  return sign + Math.round(a) + " B";
}

function trim(s) {
  return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
}

// `text` shortened at the front to fit `maxW` pixels ("…0.mlp.gate_proj.weight"): the end of a
// dotted name (layer index, module, parameter) tells the most; `measure(s)` gives a width.
export function fitText(text, maxW, measure) {
  if (measure(text) <= maxW) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {  // the most trailing characters kept that still fit
    const mid = (lo + hi + 1) >> 1;
    if (measure("…" + text.slice(text.length - mid)) <= maxW) lo = mid; else hi = mid - 1;
  }
  return "…" + text.slice(text.length - lo);
}

// `text` (a dotted name, or "name · size") shortened to fit `maxW` pixels at a name boundary:
// whole leading parts dropped ("…layers.0.mlp.gate_proj.weight"), never a part cut in two --
// unless the last part alone does not fit, when its end is kept (fitText). "" when not even
// "…" fits. `measure(s)` gives a width.
export function fitName(text, maxW, measure) {
  if (measure(text) <= maxW) return text;
  const name = text.split(" · ")[0];
  for (let k = name.indexOf("."); k >= 0; k = name.indexOf(".", k + 1)) {
    const tail = "…" + text.slice(k + 1);
    if (measure(tail) <= maxW) return tail;
  }
  if (name !== text && measure(name) <= maxW) return name;  // the size goes before the name
  if (name !== text) return fitName(name, maxW, measure);
  return measure("…") <= maxW ? fitText(text, maxW, measure) : "";
}

// A span label for views that share one bar (tied names), in `maxW` pixels: every name joined by
// " ≡ " when they fit, else the first names whole and how many more ("a ≡ b ≡ +2 tied"), else the
// first name (fitName) and the count. Every name is in the bar's tooltip, one a line.
export function spanLabel(names, maxW, measure) {
  const all = names.join(" ≡ ");
  if (names.length < 2 || measure(all) <= maxW) return names.length < 2 ? fitName(all, maxW, measure) : all;
  for (let k = names.length - 1; k >= 1; k--) {
    const s = `${names.slice(0, k).join(" ≡ ")} ≡ +${names.length - k} tied`;
    if (measure(s) <= maxW) return s;
  }
  const more = ` ≡ +${names.length - 1}`;
  return fitName(names[0], maxW - measure(more), measure) + more;
}

// The two strokes of a bar's outline on `fill` ("#rrggbb"): the meaning's colour outside (black
// for selected, the accent for shares-bytes, blue for hover) and, inside it, black or white,
// whichever reads better on the fill (at least 4.5:1 on any colour) -- so the outline shows on
// every palette colour, the orange and teal ones included. Returns [outer, inner].
export const OUTLINE = { selected: "#000000", shares: "#e07000", hover: "#1f5fbf" };
export function outlineColors(fill, meaning) {
  return [OUTLINE[meaning] || "#000000", inkOn(fill)];
}

// A name as a tooltip shows it: at most `most` characters, its start and end kept around a "…"
// (as Python's names.elide): a hostile 20,000-character name would make a tooltip of hundreds
// of lines. Names arrive escaped (wire.py browser_form): no control character to cut through.
export const NAME_SHOWN = 300;
export function clipName(text, most = NAME_SHOWN) {
  if (text.length <= most) return text;
  const head = (most - 1) >> 1;
  return text.slice(0, head) + "…" + text.slice(text.length - (most - 1 - head));
}

export function hex(n) {
  return "0x" + Math.round(n).toString(16);
}

// Ticks on multiples of a power-of-two step, at most maxTicks in [lo, hi]. When zoomed far from
// zero, `offset` is a round base the labels are relative to ("+256 B" after "1 GiB +").
export function ticks(lo, hi, maxTicks = 8) {
  const span = Math.max(hi - lo, 1);
  let step = 1;
  while (span / step > maxTicks) step *= 2;
  const values = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) values.push(v);
  let offset = 0;
  if (lo > 0 && step * 1024 < lo) offset = Math.floor(lo / (step * 1024)) * step * 1024;
  const labels = values.map((v) => (offset ? "+" : "") + formatBytes(v - offset));
  return { values, labels, offset, step };
}

// Pixel <-> byte mapping of the plot area [x0, x0 + width) for the byte window [lo, hi).
export function scale(lo, hi, x0, width) {
  const k = width / Math.max(hi - lo, 1e-9);
  return { lo, hi, x0, width, k, px: (b) => x0 + (b - lo) * k, byte: (p) => lo + (p - x0) / k };
}

// The lanes [first, last) visible when scrolled `top` pixels into `count` lanes of `laneH`.
export function laneWindow(top, height, laneH, count) {
  const first = Math.max(0, Math.min(count, Math.floor(top / laneH)));
  const last = Math.max(first, Math.min(count, Math.ceil((top + height) / laneH)));
  return [first, last];
}

// Bars grouped per lane, each lane's bars sorted by start: {first, order, maxStop}.
// `maxStop[j]` is the largest stop among order[first[l]..j] (prefix max per lane), so a lane's
// bars that may reach a byte are found by binary search even when they overlap.
export function laneIndex(lane, start, stop, nLanes) {
  const n = lane.length, first = new Uint32Array(nLanes + 1);
  for (let i = 0; i < n; i++) first[lane[i] + 1]++;
  for (let l = 0; l < nLanes; l++) first[l + 1] += first[l];
  const fill = first.slice(0, nLanes), order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[fill[lane[i]]++] = i;
  const maxStop = new Float64Array(n);
  for (let l = 0; l < nLanes; l++) {
    const a = first[l], b = first[l + 1];
    if (b - a > 1) {
      const part = Array.from(order.subarray(a, b)).sort((i, j) => start[i] - start[j] || i - j);
      order.set(part, a);
    }
    let m = -Infinity;
    for (let j = a; j < b; j++) { m = Math.max(m, stop[order[j]]); maxStop[j] = m; }
  }
  return { first, order, maxStop };
}

// Positions [a, b) in `order` of lane l's bars that can intersect bytes [lo, hi).
export function laneRange(index, start, l, lo, hi) {
  const a = index.first[l], b = index.first[l + 1];
  // first position whose prefix-max stop passes lo
  let x = a, y = b;
  while (x < y) { const m = (x + y) >> 1; if (index.maxStop[m] <= lo) x = m + 1; else y = m; }
  // first position whose start is >= hi (starts are sorted)
  let u = x, v = b;
  while (u < v) { const m = (u + v) >> 1; if (start[index.order[m]] < hi) u = m + 1; else v = m; }
  return [x, u];
}

// The bar under byte `at` on lane l (tolerance `tol` bytes for bars thinner than a pixel):
// the narrowest bar containing it, else the nearest within tol; -1 when none.
export function hitBar(index, start, stop, l, at, tol) {
  if (l < 0 || l + 1 >= index.first.length) return -1;
  const [a, b] = laneRange(index, start, l, at - tol, at + tol + 1e-9);
  let best = -1, bestW = Infinity, bestD = Infinity;
  for (let j = a; j < b; j++) {
    const i = index.order[j], s = start[i], e = Math.max(stop[i], s);
    const d = at < s ? s - at : at >= e ? at - e : 0;
    if (d > tol) continue;
    const w = e - s;
    if (d < bestD || (d === bestD && w < bestW)) { best = i; bestW = w; bestD = d; }
  }
  return best;
}

// A drag from pixel p0 to p1 as a new byte window; null for a click (under minPx pixels).
export function dragWindow(sc, p0, p1, minPx = 5) {
  if (Math.abs(p1 - p0) < minPx) return null;
  const a = Math.max(sc.x0, Math.min(p0, p1)), b = Math.min(sc.x0 + sc.width, Math.max(p0, p1));
  const lo = sc.byte(a), hi = sc.byte(b);
  return hi - lo >= 1 ? [Math.floor(lo), Math.ceil(hi)] : [Math.floor(lo), Math.floor(lo) + 1];
}

// Rectangle of bytes [s, e) clipped to the scale's window, at least minW pixels wide.
export function barRect(sc, s, e, minW = 1) {
  const a = Math.max(s, sc.lo), b = Math.min(e, sc.hi);
  if (b < a || (b === a && !(s === e && s >= sc.lo && s <= sc.hi))) return null;
  const x = sc.px(a), w = Math.max(minW, sc.px(b) - x);
  return [x, w];
}

// A storage row's label: "storage #1 · 3 KiB", with its file or device tag when it has one.
export function storageLabel(storage, tag, nbytes) {
  return [`storage #${storage}`, tag, formatBytes(nbytes)].filter(Boolean).join(" · ");
}

// What each mark kind means (by its name in the vocab), as the legend and tooltips say it.
export const MARK_WORDS = {
  unreferenced: "unreferenced bytes (no view reads them)", "read-twice": "read by ≥ 2 bars", header: "file header",
  "past-end": "past its storage's end (storage freed: no memory there)",
};
export const markWords = (C, kind) => MARK_WORDS[C.names.mark_kinds[kind]];

// Bytes [storage end, bar end) that bar `bar` addresses past its storage's end (a storage freed
// with resize_(0) keeps its views), or null. Simple rows are their storage: never past it.
export function pastEnd(d, bar) {
  const b = d.laneBlock[d.lane[bar]];
  if (b < 0 || d.laneKind[d.lane[bar]] === d.C.lane.simple) return null;
  const end = d.blockNbytes[b];
  return d.stop[bar] > end && d.stop[bar] > d.start[bar] ? [Math.max(end, d.start[bar]), d.stop[bar]] : null;
}

// The lines of a storage lane's tooltip at byte `at`: the storage, its bars, the marks under the
// mouse, and whether some shared bytes are also read by views the filters left out.
export function storageTooltip(d, l, at, tol) {
  const b = d.laneBlock[l], out = [d.laneLabels[l] || `storage #${d.blockStorage[b]}`];
  const bars = d.blockBars ? d.blockBars[b] : 0, hidden = d.blockHidden ? d.blockHidden[b] : 0;
  out.push(`${bars.toLocaleString()} bar${bars === 1 ? "" : "s"} drawn on it`);
  const [a, e] = laneRange(d.markIndex, d.markStart, l, at - tol, at + tol + 1e-9);
  for (let j = a; j < e; j++) {
    const m = d.markIndex.order[j], s0 = d.markStart[m], s1 = d.markStop[m];
    if (at + tol < s0 || at - tol >= s1) continue;
    out.push(`${markWords(d.C, d.markKind[m])}: bytes [${formatBytes(s0)}, ${formatBytes(s1)}) · ${formatBytes(s1 - s0)}`);
  }
  if (hidden) out.push(`${hidden.toLocaleString()} of them share bytes with views not shown (filtered out)`);
  return out;
}

// How a view relates to the selected one it was compared with (by the relation's name).
export const RELATION_WORDS = {
  identical: "identical", "same-bytes": "same bytes as", contains: "contains", within: "within", overlaps: "overlaps",
  disjoint: "disjoint from", unrelated: "unrelated to",
};
const SHARING = new Set(["selected", "identical", "same-bytes", "contains", "within", "overlaps"]);
// True when relation `code` means the view shares bytes with the selection (or is selected).
export const sharesBytes = (C, code) => SHARING.has(C.names.relations[code]);

// A byte count in the largest unit that states it exactly (core/units.py's exact_bytes): the
// words of a cell's size, as the static picture's legend writes them ("per 8 KiB cell").
export function exactBytes(n) {
  for (const [name, size] of UNITS) {
    if (n >= size && (n * 1000) % size === 0) return `${trim((n / size).toFixed(3))} ${name}`;
  }
  return `${n} B`;
}

// The legend's words for bars with gaps: "(solid: bytes read)", with the cell size when a bar
// is drawn per cell (the largest, as the static legend's "bytes read (per 8 KiB cell)").
export function gapsKey(d) {
  const cell = d.cell ? d.cell.reduce((a, b) => Math.max(a, b), 0) : 0;
  return `span with gaps (solid: bytes read${cell ? `, per ${exactBytes(cell)} cell` : ""})`;
}

// The lines of a bar's tooltip. `d` holds the decoded columns (see canvas.js `decodeAll`).
export function tooltip(d, bar) {
  const views = barViews(d, bar), v = views[0], out = [];
  out.push(views.map((k) => clipName(d.names[k])).join(" ≡ "));
  const [shape, given, offset] = (d.geom[v] || ";;").split(";");
  const stride = given || rowMajor(shape);
  const dtype = d.dtypes[d.dtype[v]] || "?";
  out.push(`${dtype}[${shape}] · stride (${stride}) · offset ${offset}`);
  const s = d.start[bar], e = d.stop[bar];
  out.push(`bytes [${formatBytes(s)}, ${formatBytes(e)}) · ${formatBytes(e - s)} · storage #${d.storageOf[bar]}`);
  const past = pastEnd(d, bar);
  if (past) out.push(`reads past its storage's end (${formatBytes(d.blockNbytes[d.laneBlock[d.lane[bar]]])}): storage freed, bytes [${formatBytes(past[0])}, ${formatBytes(past[1])}) have no memory`);
  const pct = d.fpct[bar];
  out.push(`footprint ${trim((100 * pct).toPrecision(4))}% of its span${pct < 1 ? " (strided, with gaps)" : ""}`);
  const cell = d.cell && d.cell.length ? d.cell[bar] : 0;
  if (cell) out.push(`bytes read drawn per ${exactBytes(cell)} cell: a cell is solid when it holds one (the % is exact)`);
  const flags = d.flags[bar], F = d.C.flag;
  if (flags & F.overlaps_other) {
    out.push(flags & F.partner_hidden ? "shares bytes with a view not shown (filtered out)" : "shares bytes with another bar (red)");
  }
  if (flags & F.reinterpreted) out.push("reads bytes as another dtype (reinterpreted)");
  if (flags & F.expanded) out.push("expanded: some bytes read more than once");
  if (d.rel && d.rel.length) {
    const code = d.rel[v];
    if (code === d.C.rel.selected) out.push("selected");
    else if (code) out.push(`${RELATION_WORDS[d.C.names.relations[code]]} ${clipName(d.names[d.relTo[v]])} (selected)`);
  }
  return out;
}

// The view indices a bar draws (several for a span group of tied views).
export function barViews(d, bar) {
  const first = d.barView.length ? d.barView[bar] : bar;
  const out = [first];
  if (d.tieFirst && d.tieFirst.length) {
    for (let j = d.tieFirst[bar]; j < d.tieFirst[bar + 1]; j++) out.push(d.ties[j]);
  }
  return out;
}

// -- the overview: every storage as cells of a grid sized by bytes (the PNG's overview panel) --

// What each overview kind (plan/overview.py KINDS, in the vocab) means.
const KIND_WORDS = {
  simple: "one view or none", packed: "several views, no byte shared", overlapping: "views share bytes (slices, fused weights)",
  tied: "two views read the same span (tied weights)",
};

// The overview's columns (payload_overview.py) from a getter of the payload; null when none.
// `kinds` names each kind code (the vocab's overview_kinds).
export function decodeOverview(get, kinds) {
  const columns = get("ov_columns");
  if (!columns) return null;
  const packed = varints(get("ov_cells")), n = packed.length;
  const kind = new Uint8Array(n), cells = new Float64Array(n), first = new Float64Array(n + 1);
  for (let e = 0; e < n; e++) {
    kind[e] = packed[e] % 4; cells[e] = Math.floor(packed[e] / 4); first[e + 1] = first[e] + cells[e];
  }
  let storage = varints(get("ov_storage"));
  if (!storage.length) storage = Float64Array.from({ length: n }, (_, e) => e);
  else for (let e = 1; e < n; e++) storage[e] += storage[e - 1];
  const unrefCells = new Float64Array(n), unrefBytes = new Float64Array(n), triples = varints(get("ov_unref"));
  for (let k = 0; k + 2 < triples.length; k += 3) { unrefCells[triples[k]] = triples[k + 1]; unrefBytes[triples[k]] = triples[k + 2]; }
  const labelEntry = Array.from(column(get("ov_label_entry"), Uint32Array));
  const prefix = column(get("ov_name_prefix"), Uint8Array), suffix = column(get("ov_name_suffix"), Uint8Array);
  return {
    n, kind, kinds, cells, first, total: first[n], storage, unrefCells, unrefBytes, columns,
    views: varints(get("ov_views")), nbytes: varints(get("ov_nbytes")),
    names: frontDecode(lines(get("ov_names"), prefix.length), prefix, suffix),
    labelEntry, labels: lines(get("ov_labels"), labelEntry.length), colors: get("ov_colors"),
  };
}

// The grid in `width` pixels, as the PNG lays it out (render/mpl/overview.py grid_shape): the
// plan's columns at the largest whole number of pixels a cell (at most 24) that fits, or one
// pixel a cell and as many columns as there are pixels when the plan's do not fit.
export function overviewGrid(ov, width) {
  const room = Math.max(Math.floor(width), 1);
  const cols = Math.max(Math.min(ov.columns, room), 1);
  const px = Math.min(24, Math.max(1, Math.floor(room / cols)));
  return { cols, rows: Math.ceil(ov.total / cols), px };
}

// Per cell (row-major, rows * cols), its colour's index: kind k shade j at 2k + j (neighbouring
// storages alternate shades), a storage's last unreferenced cells 2K + j (K kinds: 8 + j), the
// background 2K + 2 (10).
export function overviewCodes(ov, cols) {
  const unref = 2 * ov.kinds.length, rows = Math.ceil(ov.total / cols), out = new Uint8Array(rows * cols).fill(unref + 2);
  for (let e = 0; e < ov.n; e++) {
    const a = ov.first[e], b = ov.first[e + 1], u = b - ov.unrefCells[e], j = e & 1;
    out.fill(2 * ov.kind[e] + j, a, u);
    out.fill(unref + j, u, b);
  }
  return out;
}

// The entry whose cell is under pixel (x, y) of the grid, or -1 (outside, or past the last cell).
export function overviewEntryAt(ov, grid, x, y) {
  const c = Math.floor(x / grid.px), r = Math.floor(y / grid.px);
  if (x < 0 || y < 0 || c >= grid.cols) return -1;
  const cell = r * grid.cols + c;
  if (cell >= ov.total) return -1;
  let lo = 0, hi = ov.n - 1;  // the last entry whose first cell is <= cell
  while (lo < hi) { const m = (lo + hi + 1) >> 1; if (ov.first[m] <= cell) lo = m; else hi = m - 1; }
  return lo;
}

// The centre (pixels) of each labelled storage's middle cell, numbered from 1 as the label list.
export function overviewMarkers(ov, grid) {
  return ov.labelEntry.map((e, k) => {
    const mid = ov.first[e] + Math.floor(ov.cells[e] / 2);
    const r = Math.floor(mid / grid.cols), c = mid - r * grid.cols;
    return [k + 1, (c + 0.5) * grid.px, (r + 0.5) * grid.px];
  });
}

// The rectangles [x, y, w, h] (pixels) covering entry e's cells, one per grid row they touch.
export function overviewSegments(ov, grid, e) {
  const out = [], a = ov.first[e], b = ov.first[e + 1] - 1;
  if (b < a) return out;
  const r0 = Math.floor(a / grid.cols), r1 = Math.floor(b / grid.cols);
  for (let r = r0; r <= r1; r++) {
    const c0 = r === r0 ? a - r * grid.cols : 0, c1 = r === r1 ? b - r * grid.cols : grid.cols - 1;
    out.push([c0 * grid.px, r * grid.px, (c1 - c0 + 1) * grid.px, grid.px]);
  }
  return out;
}

export function overviewCounts(ov) {
  const out = ov.kinds.map(() => 0);
  for (let e = 0; e < ov.n; e++) out[ov.kind[e]]++;
  return out;
}

// Where each entry is in the lanes: its block's first lane (drawn), the summary row (folded into
// it), or -1 (filtered out); and its name: the first bar drawn on the block, else the name sent.
export function overviewTargets(ov, d) {
  const blockOf = new Map(), laneOf = new Int32Array(d.blockStorage.length).fill(-1);
  d.blockStorage.forEach((s, b) => blockOf.set(s, b));
  for (let l = d.laneKind.length - 1; l >= 0; l--) if (d.laneBlock[l] >= 0) laneOf[d.laneBlock[l]] = l;
  const summary = Array.from(d.laneKind).indexOf(d.C.lane.summary);
  const lane = new Int32Array(ov.n), state = new Uint8Array(ov.n), name = new Array(ov.n);
  for (let e = 0, k = 0; e < ov.n; e++) {
    const b = blockOf.get(ov.storage[e]);
    if (b !== undefined) { lane[e] = laneOf[b]; state[e] = 1; name[e] = blockName(d, b, laneOf[b]); continue; }
    name[e] = ov.names[k++] || "";
    lane[e] = summary; state[e] = summary >= 0 ? 2 : 0;
  }
  return { lane, state, name };
}

// The names of the first bar drawn on block b (its lanes start at `lane`).
export function blockName(d, b, lane) {
  for (let l = lane; l >= 0 && l < d.laneKind.length && d.laneBlock[l] === b; l++) {
    const j = d.index.first[l];
    if (j < d.index.first[l + 1]) return barViews(d, d.index.order[j]).map((v) => d.names[v]).join(" ≡ ");
  }
  return "";
}

// The lines of an overview cell's tooltip: storage, size and kind; its name; unreferenced
// bytes; and what a click does.
export function overviewTooltip(ov, targets, e) {
  const v = ov.views[e], k = ov.kind[e];
  const out = [`storage #${ov.storage[e]} · ${formatBytes(ov.nbytes[e])} · ${ov.kinds[k]}`];
  const more = v > 1 ? ` +${(v - 1).toLocaleString()} view${v > 2 ? "s" : ""}` : "";
  out.push(v ? `${clipName(targets.name[e]) || "(no view drawn)"}${more}` : "no views");
  out.push(KIND_WORDS[ov.kinds[k]]);
  if (ov.unrefBytes[e]) out.push(`${formatBytes(ov.unrefBytes[e])} unreferenced (no view reads them)`);
  const s = targets.state[e];
  out.push(s === 1 ? "click: scroll the lanes to it" : s === 2
    ? "folded into the summary row (expand simple storages draws it): click to scroll there"
    : "not in the lanes (filtered out)");
  return out;
}
