// Unit tests of the overview's pure geometry (tensorviz/explorer/geometry.js): `node --test tests/js/`.
import test from "node:test";
import assert from "node:assert/strict";
import {
  varints, geomLines, decodeOverview, overviewGrid, overviewCodes, overviewEntryAt, overviewMarkers, overviewCounts,
  overviewTargets, overviewTooltip, overviewSegments, blockName, laneIndex,
} from "../../tensorviz/explorer/geometry.js";
import { C, VOCAB, lanes } from "./vocab.mjs";

const K = Object.fromEntries(VOCAB.overview_kinds.map((name, k) => [name, k]));  // overview kind codes

const bytes = (...b) => new DataView(new Uint8Array(b).buffer);
const text = (s) => new DataView(new TextEncoder().encode(s).buffer);

test("varints reads unsigned LEB128, exact up to 2**53", () => {
  assert.deepEqual(Array.from(varints(bytes(0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02))), [0, 1, 127, 128, 300]);
  assert.deepEqual(Array.from(varints(bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f))), [2 ** 53 - 1]);
  assert.equal(varints(null).length, 0);
  const unaligned = new DataView(new Uint8Array([9, 0x80, 0x02]).buffer, 1, 2);  // a view into a bigger message
  assert.deepEqual(Array.from(varints(unaligned)), [256]);
});

test("geomLines rebuilds each view's shape;stride;offset from the shared heads", () => {
  assert.deepEqual(geomLines(["4, 6;", "4;6"], [0, 0, 1, 1, 0, 12]), ["4, 6;;0", "4;6;1", "4, 6;;12"]);
});

// Three storages: #0 simple (1 cell), #2 tied (4 cells, the last one unreferenced: 100 B), #5
// overlapping (2 cells); storage indices sent as deltas (0, 2, 3); two labels.
function sample() {
  const traits = {
    ov_columns: 3,
    ov_cells: bytes((1 << 2) | K.simple, (4 << 2) | K.tied, (2 << 2) | K.overlapping),
    ov_views: bytes(1, 2, 3),
    ov_nbytes: bytes(0x80, 0x08, 0x80, 0x20, 0xc0, 0x0c),  // 1024, 4096, 1600
    ov_storage: bytes(0, 2, 3),
    ov_unref: bytes(1, 1, 100),
    ov_names: text("solo.weight"), ov_name_prefix: bytes(0),
    ov_label_entry: new DataView(new Uint32Array([1, 2]).buffer),
    ov_labels: text("#2 wte ≡ head · 4 KiB · tied\n#5 qkv +2 views · 1.562 KiB · overlapping"),
    ov_colors: ["#a9c4e4", "#86a9d6", "#93cc9e", "#6db27b", "#f3a35c", "#e0823a", "#c2448f", "#982c6c", "#e6e6e6", "#cfcfcf"],
  };
  return decodeOverview((k) => traits[k], VOCAB.overview_kinds);
}

test("decodeOverview: kinds, cells, storages, unreferenced cells, names and labels", () => {
  const ov = sample();
  assert.equal(ov.n, 3);
  assert.deepEqual(Array.from(ov.kind), [K.simple, K.tied, K.overlapping]);
  assert.deepEqual(Array.from(ov.cells), [1, 4, 2]);
  assert.deepEqual(Array.from(ov.first), [0, 1, 5, 7]);
  assert.equal(ov.total, 7);
  assert.deepEqual(Array.from(ov.storage), [0, 2, 5]);
  assert.deepEqual(Array.from(ov.nbytes), [1024, 4096, 1600]);
  assert.deepEqual(Array.from(ov.unrefCells), [0, 1, 0]);
  assert.deepEqual(Array.from(ov.unrefBytes), [0, 100, 0]);
  assert.deepEqual(ov.names, ["solo.weight"]);
  assert.deepEqual(ov.labelEntry, [1, 2]);
  assert.equal(ov.labels[1], "#5 qkv +2 views · 1.562 KiB · overlapping");
  assert.deepEqual(VOCAB.overview_kinds, ["simple", "packed", "overlapping", "tied"]);  // the counts' order
  assert.deepEqual(overviewCounts(ov), [1, 0, 1, 1]);
  assert.equal(decodeOverview((k) => (k === "ov_columns" ? 0 : null), VOCAB.overview_kinds), null);
});

test("overviewGrid lays the cells out as the PNG does", () => {
  const ov = sample();
  assert.deepEqual(overviewGrid(ov, 100), { cols: 3, rows: 3, px: 24 });  // at most 24 px a cell
  assert.deepEqual(overviewGrid(ov, 40), { cols: 3, rows: 3, px: 13 });
  assert.deepEqual(overviewGrid(ov, 2), { cols: 2, rows: 4, px: 1 });  // narrower than the plan's columns
  assert.deepEqual(overviewGrid({ columns: 900, total: 150_778 }, 620), { cols: 620, rows: 244, px: 1 });
});

test("overviewCodes: kind shades alternating per storage, unreferenced last cells, background", () => {
  // entry 0 simple (shade 0), entry 1 tied (shade 1) with its last cell unreferenced, entry 2 overlapping
  assert.deepEqual(Array.from(overviewCodes(sample(), 3)), [0, 7, 7, 7, 9, 4, 4, 10, 10]);
});

test("overviewEntryAt and overviewMarkers: pixels to storages and back", () => {
  const ov = sample(), grid = { cols: 3, rows: 3, px: 10 };
  const at = (x, y) => overviewEntryAt(ov, grid, x, y);
  assert.deepEqual([at(5, 5), at(15, 5), at(5, 15), at(15, 15), at(25, 15), at(5, 25)], [0, 1, 1, 1, 2, 2]);
  assert.deepEqual([at(15, 25), at(35, 5), at(-1, 5)], [-1, -1, -1]);  // past the last cell; right of the grid
  // storage #2's middle cell is cell 3 (row 1, col 0); #5's is cell 6 (row 2, col 0)
  assert.deepEqual(overviewMarkers(ov, grid), [[1, 5, 15], [2, 5, 25]]);
  // storage #2's four cells (1-4): the end of row 0, the start of row 1; #5's two (5, 6): the end
  // of row 1, the start of row 2; #0's one cell
  assert.deepEqual(overviewSegments(ov, grid, 1), [[10, 0, 20, 10], [0, 10, 20, 10]]);
  assert.deepEqual(overviewSegments(ov, grid, 2), [[20, 10, 10, 10], [0, 20, 10, 10]]);
  assert.deepEqual(overviewSegments(ov, grid, 0), [[0, 0, 10, 10]]);
});

test("overviewTargets and overviewTooltip: drawn storages scroll to their lanes, folded ones to the summary", () => {
  const ov = sample();
  // lanes: storage #2 (storage row, two views), storage #5 (simple row), the summary row
  const start = new Float64Array([0, 0, 0]), stop = new Float64Array([4096, 4096, 1600]);
  const lane = new Uint32Array([1, 2, 3]);
  const d = {
    C, blockStorage: new Int32Array([2, 5]), laneKind: lanes("storage", "view", "view", "simple", "summary"),
    laneBlock: new Int32Array([0, 0, 0, 1, -1]), names: ["wte", "head", "qkv"],
    barView: new Uint32Array(0), tieFirst: new Uint32Array(0), index: laneIndex(lane, start, stop, 5),
  };
  assert.equal(blockName(d, 0, 0), "wte");  // the storage row has no bar: its first view lane's
  const t = overviewTargets(ov, d);
  assert.deepEqual(Array.from(t.lane), [4, 0, 3]);
  assert.deepEqual(Array.from(t.state), [2, 1, 1]);
  assert.deepEqual(t.name, ["solo.weight", "wte", "qkv"]);
  assert.deepEqual(overviewTooltip(ov, t, 1), [
    "storage #2 · 4 KiB · tied", "wte +1 view", "two views read the same span (tied weights)",
    "100 B unreferenced (no view reads them)", "click: scroll the lanes to it"]);
  assert.equal(overviewTooltip(ov, t, 2)[1], "qkv +2 views");
  assert.equal(overviewTooltip(ov, t, 0).at(-1), "folded into the summary row (expand simple storages draws it): click to scroll there");
  d.laneKind[4] = C.lane["more-storages"];  // no summary row: a storage not drawn is filtered out
  assert.equal(overviewTooltip(ov, overviewTargets(ov, d), 0).at(-1), "not in the lanes (filtered out)");
});
