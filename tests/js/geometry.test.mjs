// Unit tests of the canvas's pure geometry (tensorviz/explorer/geometry.js): `node --test tests/js/`.
import test from "node:test";
import assert from "node:assert/strict";
import {
  column, lines, formatBytes, ticks, scale, laneWindow, laneIndex, laneRange, hitBar, dragWindow, barRect,
  tooltip, storageTooltip, storageLabel, barViews, fitText, frontDecode, rowMajor, ownLanes, blockOfLanes,
  pastEnd, exactBytes, gapsKey,
} from "../../tensorviz/explorer/geometry.js";
import { C, lanes } from "./vocab.mjs";

const F = C.flag, R = C.rel;

test("column copies an unaligned DataView into an aligned typed array", () => {
  const buf = new ArrayBuffer(1 + 16); // two float64 at byte offset 1: unaligned
  const bytes = new Uint8Array(buf);
  const src = new Uint8Array(new Float64Array([1.5, 4096]).buffer);
  bytes.set(src, 1);
  const out = column(new DataView(buf, 1, 16), Float64Array);
  assert.deepEqual(Array.from(out), [1.5, 4096]);
  assert.equal(column(null, Uint32Array).length, 0);
});

test("lines splits UTF-8 text, and empty text gives empty strings", () => {
  const enc = new TextEncoder().encode("wte.weight\nlm_head.weight\nα≡β");
  assert.deepEqual(lines(new DataView(enc.buffer), 3), ["wte.weight", "lm_head.weight", "α≡β"]);
  assert.deepEqual(lines(new DataView(new ArrayBuffer(0)), 2), ["", ""]);
});

test("formatBytes: binary units, at most 4 significant digits", () => {
  const cases = [[0, "0 B"], [1023, "1023 B"], [1024, "1 KiB"], [1536, "1.5 KiB"], [4000, "3.906 KiB"],
    [1048000, "1023 KiB"], [3 * 2 ** 30, "3 GiB"], [140 * 2 ** 30 + 2 ** 29, "140.5 GiB"], [2 ** 41, "2 TiB"], [-2048, "-2 KiB"]];
  for (const [n, text] of cases) assert.equal(formatBytes(n), text, `${n}`);
});

test("ticks sit on power-of-two multiples; far from zero they are relative to an offset", () => {
  const t = ticks(0, 16000, 8);
  assert.equal(t.step, 2048);
  assert.deepEqual(t.values, [0, 2048, 4096, 6144, 8192, 10240, 12288, 14336]);
  assert.deepEqual(t.labels.slice(0, 3), ["0 B", "2 KiB", "4 KiB"]);
  assert.equal(t.offset, 0);
  const z = ticks(2 ** 30 + 1000, 2 ** 30 + 2000, 6);
  assert.equal(z.step, 256);
  assert.equal(z.offset, 2 ** 30);
  assert.deepEqual(z.labels, ["+1 KiB", "+1.25 KiB", "+1.5 KiB", "+1.75 KiB"]);
});

test("scale maps bytes to pixels and back", () => {
  const sc = scale(1000, 3000, 100, 400);
  assert.equal(sc.px(1000), 100);
  assert.equal(sc.px(3000), 500);
  assert.equal(sc.byte(300), 2000);
});

test("laneWindow: the lanes visible at a scroll position, clamped to the lane count", () => {
  assert.deepEqual(laneWindow(0, 100, 20, 1000), [0, 5]);
  assert.deepEqual(laneWindow(30, 100, 20, 1000), [1, 7]);
  assert.deepEqual(laneWindow(19990, 100, 20, 1000), [999, 1000]);
  assert.deepEqual(laneWindow(0, 100, 20, 2), [0, 2]);
});

// lane 0: [0, 100) wide; lane 1: three bars out of order, one overlapping; lane 2: empty
const start = new Float64Array([0, 50, 10, 30, 40]);
const stop = new Float64Array([100, 60, 20, 45, 40]);
const lane = new Uint32Array([0, 1, 1, 1, 1]);

test("laneIndex groups bars per lane sorted by start, with a running max of stops", () => {
  const ix = laneIndex(lane, start, stop, 3);
  assert.deepEqual(Array.from(ix.first), [0, 1, 5, 5]);
  assert.deepEqual(Array.from(ix.order), [0, 2, 3, 4, 1]);
  assert.deepEqual(Array.from(ix.maxStop.subarray(1, 5)), [20, 45, 45, 60]);
  assert.deepEqual(laneRange(ix, start, 1, 21, 29), [2, 2]); // nothing reaches [21, 29)
  assert.deepEqual(laneRange(ix, start, 1, 0, 1000), [1, 5]);
  assert.deepEqual(laneRange(ix, start, 1, 44, 46), [2, 4]); // [30, 45) and the empty bar at 40
});

test("hitBar: the bar under a byte, the narrowest when bars overlap, tolerance for thin bars", () => {
  const ix = laneIndex(lane, start, stop, 3);
  assert.equal(hitBar(ix, start, stop, 0, 99.5, 0), 0);
  assert.equal(hitBar(ix, start, stop, 0, 100, 0), -1); // half-open
  assert.equal(hitBar(ix, start, stop, 1, 15, 0), 2);
  assert.equal(hitBar(ix, start, stop, 1, 25, 0), -1);
  assert.equal(hitBar(ix, start, stop, 1, 25, 6), 2); // 5 bytes from both: the narrower wins
  assert.equal(hitBar(ix, start, stop, 1, 26, 6), 3); // 4 bytes from [30, 45), 6 from [10, 20)
  assert.equal(hitBar(ix, start, stop, 1, 40.5, 1), 3); // inside [30, 45) beats 0.5 from the empty bar
  assert.equal(hitBar(ix, start, stop, 1, 46, 0), -1);
  assert.equal(hitBar(ix, start, stop, 2, 10, 5), -1);
  assert.equal(hitBar(ix, start, stop, 7, 10, 5), -1); // past the last lane
  assert.equal(hitBar(ix, start, stop, -1, 10, 5), -1);
});

test("hitBar finds the bar at a byte among 100,000 bars on one lane", () => {
  const n = 100000, s = new Float64Array(n), e = new Float64Array(n), l = new Uint32Array(n);
  for (let i = 0; i < n; i++) { s[i] = 16 * (n - 1 - i); e[i] = s[i] + 16; }
  const ix = laneIndex(l, s, e, 1);
  assert.equal(hitBar(ix, s, e, 0, 16 * 12345 + 3, 0), n - 1 - 12345);
});

test("dragWindow: a drag becomes a byte window, a click (few pixels) does not", () => {
  const sc = scale(0, 16000, 100, 800);
  assert.deepEqual(dragWindow(sc, 300, 500), [4000, 8000]);
  assert.deepEqual(dragWindow(sc, 500, 300), [4000, 8000]);
  assert.equal(dragWindow(sc, 300, 303), null);
  assert.deepEqual(dragWindow(sc, 0, 200), [0, 2000]); // clamped to the plot area
});

test("barRect clips to the window and keeps thin bars visible", () => {
  const sc = scale(100, 200, 0, 100);
  assert.deepEqual(barRect(sc, 150, 160), [50, 10]);
  assert.deepEqual(barRect(sc, 50, 120), [0, 20]);
  assert.equal(barRect(sc, 0, 50), null);
  assert.deepEqual(barRect(sc, 150, 150.1, 1.5), [50, 1.5]);
});

test("tooltip: name, dtype[shape], stride, offset, byte range, footprint, relation", () => {
  const d = {
    C, names: ["qkv.weight", "q.weight", "wte.weight", "lm_head.weight"],
    geom: ["48, 16;;0", "16, 16;16, 1;0", "64, 16;;0", "64, 16;;0"],
    dtype: new Uint8Array([0, 0, 0, 0]), dtypes: ["float32"],
    start: new Float64Array([0, 0, 0]), stop: new Float64Array([3072, 1024, 4096]),
    fpct: new Float32Array([1, 0.5, 1]), flags: new Uint8Array([0, F.sparse | F.overlaps_other | F.partner_hidden, 0]),
    storageOf: new Int32Array([1, 1, 0]), barView: new Uint32Array([0, 1, 2]),
    tieFirst: new Uint32Array([0, 0, 0, 1]), ties: new Uint32Array([3]),
    rel: new Uint8Array([R.contains, R.selected, 0, 0]), relTo: new Uint32Array([1, 1, 0, 0]),
    // storage #1 (3 KiB) with qkv and q on its view lanes; wte's storage is one simple row
    lane: new Uint32Array([1, 2, 3]), laneKind: lanes("storage", "view", "view", "simple"),
    laneBlock: new Int32Array([0, 0, 0, 1]), blockNbytes: new Float64Array([3072, 4096]),
  };
  assert.deepEqual(tooltip(d, 0), [
    "qkv.weight", "float32[48, 16] · stride (16, 1) · offset 0", "bytes [0 B, 3 KiB) · 3 KiB · storage #1",
    "footprint 100% of its span", "contains q.weight (selected)"]);
  const q = tooltip(d, 1);
  assert.equal(q[3], "footprint 50% of its span (strided, with gaps)");
  assert.equal(q[4], "shares bytes with a view not shown (filtered out)");
  assert.equal(q[5], "selected");
  assert.deepEqual(barViews(d, 2), [2, 3]);
  assert.equal(tooltip(d, 2)[0], "wte.weight ≡ lm_head.weight");
});

test("tooltip: a bar drawn per cell says its cell size (payload cell_bar, cell), the others nothing", () => {
  const d = {
    C, names: ["a", "row"], geom: ["4, 32;64, 2;0", "64;;192"], dtype: new Uint8Array([0, 0]), dtypes: ["uint8"],
    start: new Float64Array([0, 192]), stop: new Float64Array([160, 256]), fpct: new Float32Array([0.4, 1]),
    cell: new Float64Array([8200, 0]), flags: new Uint8Array([F.sparse, 0]), storageOf: new Int32Array([0, 0]),
    barView: new Uint32Array([0, 1]), lane: new Uint32Array([1, 2]), laneKind: lanes("storage", "view", "view"),
    laneBlock: new Int32Array([0, 0, 0]), blockNbytes: new Float64Array([256]),
  };
  assert.deepEqual(tooltip(d, 0).slice(3), [
    "footprint 40% of its span (strided, with gaps)",
    "bytes read drawn per 8200 B cell: a cell is solid when it holds one (the % is exact)"]);
  assert.ok(!tooltip(d, 1).some((line) => line.includes("cell")));
  assert.deepEqual([8192, 8200, 1536, 1 << 30].map(exactBytes), ["8 KiB", "8200 B", "1.5 KiB", "1 GiB"]);
  assert.equal(gapsKey(d), "span with gaps (solid: bytes read, per 8200 B cell)");
  assert.equal(gapsKey({ ...d, cell: new Float64Array(2) }), "span with gaps (solid: bytes read)");
});

test("fitText keeps the end of a long name, in the width given", () => {
  const w = (t) => t.length * 6; // 6 px per character
  assert.equal(fitText("lm_head.weight", 200, w), "lm_head.weight");
  const out = fitText("model.layers.0.mlp.gate_proj.weight", 120, w);
  assert.equal(out, "…lp.gate_proj.weight"); // 20 characters: the ellipsis and the last 19
  assert.ok(w(out) <= 120);
  assert.equal(fitText("abc", 0, w), "…");
});

test("frontDecode undoes the affix coding; rowMajor gives contiguous strides", () => {
  assert.deepEqual(frontDecode(["model.layers.0.q.weight", "k.weight", "é.a"], new Uint8Array([0, 15, 0])),
    ["model.layers.0.q.weight", "model.layers.0.k.weight", "é.a"]);
  assert.deepEqual(frontDecode(["l.0.q_proj.weight", "k", "1.self", ""], new Uint8Array([0, 4, 2, 2]), new Uint8Array([0, 12, 12, 12])),
    ["l.0.q_proj.weight", "l.0.k_proj.weight", "l.1.self_proj.weight", "l._proj.weight"]);
  assert.equal(rowMajor("4, 6"), "6, 1");
  assert.equal(rowMajor("2, 0, 3"), "3, 3, 1");
  assert.equal(rowMajor(""), "");
});

test("lanes of bars sent without lanes, and the block of every lane", () => {
  const kind = lanes("storage", "view", "view", "more", "storage", "view", "simple", "simple", "summary");
  assert.deepEqual(Array.from(ownLanes(kind, 5, C)), [1, 2, 5, 6, 7]);
  assert.deepEqual(Array.from(blockOfLanes(kind, C)), [0, 0, 0, 0, 1, 1, 2, 3, -1]);
  assert.equal(blockOfLanes(lanes("storage", "view", "more-storages"), C)[2], -1);
});

test("storageTooltip: the storage, its bars, the marks under the mouse, filtered-out readers", () => {
  const markStart = new Float64Array([0, 512]), markStop = new Float64Array([256, 1024]);
  const d = {
    C, laneBlock: new Int32Array([0, 0]), laneLabels: ["storage #3 · 1 KiB", ""], blockStorage: new Int32Array([3]),
    blockBars: new Uint32Array([2]), blockHidden: new Uint32Array([1]),
    markKind: new Uint8Array([C.mark["read-twice"], C.mark.unreferenced]), markStart, markStop,
    markIndex: laneIndex(new Uint32Array([0, 0]), markStart, markStop, 2),
  };
  assert.deepEqual(storageTooltip(d, 0, 100, 1), [
    "storage #3 · 1 KiB", "2 bars drawn on it", "read by ≥ 2 bars: bytes [0 B, 256 B) · 256 B",
    "1 of them share bytes with views not shown (filtered out)"]);
  assert.deepEqual(storageTooltip(d, 0, 600, 1)[2], "unreferenced bytes (no view reads them): bytes [512 B, 1 KiB) · 512 B");
  assert.equal(storageTooltip(d, 0, 400, 1).length, 3); // no mark at 400: storage, bars, the filtered note
});

test("storageLabel: number, tag, size in the one byte format", () => {
  assert.equal(storageLabel(1, "", 3072), "storage #1 · 3 KiB");
  assert.equal(storageLabel(0, "model.safetensors", 16000), "storage #0 · model.safetensors · 15.63 KiB");
});

test("pastEnd: the bytes a view of a freed storage addresses past its end, and its tooltip says so", () => {
  // storage #0 freed (0 B): w reads [0, 80), v [20, 60); storage #1 (32 B) is a simple row
  const d = {
    C, names: ["w", "v", "other"], geom: ["4, 5;;0", "2, 5;;5", "8;;0"], dtype: new Uint8Array(3), dtypes: ["float32"],
    start: new Float64Array([0, 20, 0]), stop: new Float64Array([80, 60, 32]), fpct: new Float32Array([1, 1, 1]),
    flags: new Uint8Array(3), storageOf: new Int32Array([0, 0, 1]), barView: new Uint32Array(0),
    lane: new Uint32Array([1, 2, 3]), laneKind: lanes("storage", "view", "view", "simple"),
    laneBlock: new Int32Array([0, 0, 0, 1]), blockNbytes: new Float64Array([0, 32]),
  };
  assert.deepEqual(pastEnd(d, 0), [0, 80]);
  assert.deepEqual(pastEnd(d, 1), [20, 60]);
  assert.equal(pastEnd(d, 2), null);  // a simple row is its whole storage
  d.blockNbytes[0] = 40;  // a storage shrunk to 40 B: only the tail is past its end
  assert.deepEqual(pastEnd(d, 1), [40, 60]);
  d.blockNbytes[0] = 0;
  assert.ok(tooltip(d, 1).includes("reads past its storage's end (0 B): storage freed, bytes [20 B, 60 B) have no memory"));
  assert.ok(!tooltip(d, 2).some((line) => line.includes("past")));
  // the storage row's tooltip names the past-end mark the planner sends
  const markStart = new Float64Array([0]), markStop = new Float64Array([80]);
  const s = { C, laneBlock: d.laneBlock, laneLabels: ["storage #0 · 0 B", "", "", ""], blockStorage: new Int32Array([0, 1]),
    blockBars: new Uint32Array([2, 1]), blockHidden: new Uint32Array(2), markKind: new Uint8Array([C.mark["past-end"]]),
    markStart, markStop, markIndex: laneIndex(new Uint32Array([0]), markStart, markStop, 4) };
  assert.equal(storageTooltip(s, 0, 50, 1)[2], "past its storage's end (storage freed: no memory there): bytes [0 B, 80 B) · 80 B");
});
