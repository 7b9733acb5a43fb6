// Unit tests of the interactive explain's pure geometry (tensorviz/explorer/explain.js):
// `node --test tests/js/`. tests/test_explain_widget.py compares the same functions with Python's plan.
import test from "node:test";
import assert from "node:assert/strict";
import {
  addresses, unravel, firstCells, readCells, stripWindow, cellSlots, readersOf, formulaAt, parseInts,
  checkGeometry, layoutPanel, hitPanel, panelInk, ROW_CELLS,
} from "../../tensorviz/explorer/explain.js";
import { themeColors, parseColor } from "../../tensorviz/explorer/theme.js";

test("addresses are offset + index · stride in row-major order", () => {
  assert.deepEqual(addresses([3, 4], [4, 1], 0), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  assert.deepEqual(addresses([4, 3], [1, 4], 2), [2, 6, 10, 3, 7, 11, 4, 8, 12, 5, 9, 13]);
  assert.deepEqual(addresses([4, 3], [0, 1], 0), [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]); // expand
  assert.deepEqual(addresses([], [], 5), [5]); // a scalar
  assert.deepEqual(addresses([0, 3], [3, 1], 0), []);
});

test("unravel inverts row-major numbering", () => {
  assert.deepEqual(unravel(7, [3, 4]), [1, 3]);
  assert.deepEqual(unravel(23, [2, 3, 4]), [1, 2, 3]);
});

test("an element wider than a cell covers several cells", () => {
  const f32 = { shape: [2], stride: [1], offset: 1, itemsize: 4, base: 0 };
  assert.deepEqual(firstCells(f32, 2), [2, 4]);
  assert.deepEqual(readCells(f32, 2), [2, 3, 4, 5]);
  const h = { shape: [8], stride: [1], offset: 0, itemsize: 2, base: 0 };
  assert.deepEqual(readersOf([f32, h], 2, 3), [[0, 0], [1, 3]]);
});

test("the strip window: whole storage, the reached window, or runs with small gaps kept", () => {
  assert.deepEqual(stripWindow(14, [2, 3, 4], 256), [[0, 14]]);
  assert.deepEqual(stripWindow(10000, [5000, 5009], 256), [[5000, 5010]]);
  assert.deepEqual(stripWindow(10000, [0, 1, 2, 3, 9996, 9999], 256), [[0, 4], [9996, 10000]]);
  assert.deepEqual(stripWindow(10000, [0, 9, 30], 8), [[0, 10], [30, 31]]); // a gap of 8 stays
  assert.deepEqual(stripWindow(4, [0, 6], 256), [[0, 7]]); // past the end of a freed storage
});

test("each segment starts its own row of ROW_CELLS", () => {
  const { slots, rows } = cellSlots([[0, 30], [4096, 4100]]);
  assert.deepEqual(slots.get(25), [1, 25 - ROW_CELLS]);
  assert.deepEqual(slots.get(4096), [2, 0]);
  assert.equal(rows, 3);
});

test("the formula with numbers, and the playground's parsing and checks", () => {
  const v = { shape: [3, 4], stride: [4, 1], offset: 2 };
  assert.equal(formulaAt(v, 7), "addr = 2 + 4·1 + 1·3 = 9");
  assert.deepEqual(parseInts("(2, 3)"), [2, 3]);
  assert.deepEqual(parseInts("[4 1]"), [4, 1]);
  assert.equal(parseInts("2, x"), null);
  const ok = checkGeometry([3, 4], [4, 1], 0, 4, 48, 256);
  assert.deepEqual([ok.ok, ok.leaves, ok.limit], [true, false, 12]);
  const out = checkGeometry([3, 4], [5, 1], 0, 4, 48, 256); // the last row reads 10..13
  assert.deepEqual([out.leaves, out.outside, out.first], [true, [10, 11], 12]);
  assert.equal(checkGeometry([3], [1, 1], 0, 4, 48, 256).ok, false);
  assert.match(checkGeometry([300], [1], 0, 4, 4800, 256).why, /at most 256/);
});

test("hit testing finds the cell and the element drawn where they are laid out", () => {
  const views = [{ shape: [2, 3], stride: [3, 1], offset: 0, itemsize: 4, base: 0 }];
  const panel = layoutPanel({}, views, [[0, 6]], { cell: 20, left: 10, top: 10, width: 800 });
  const [x, y, w, h] = panel.strips.get(4);
  assert.deepEqual(hitPanel(panel, x + w / 2, y + h / 2), { kind: "cell", cell: 4 });
  const [gx, gy, gw, gh] = panel.grids[0].rects[5];
  assert.deepEqual(hitPanel(panel, gx + gw / 2, gy + gh / 2), { kind: "element", view: 0, element: 5 });
  assert.equal(hitPanel(panel, 1, 1), null);
});

test("the panel's ink reads on light and dark themes; a view's colour where it reads, else the text's", () => {
  const vars = (o) => (name) => (o[name] ? parseColor(o[name]) : null);
  const light = panelInk(themeColors(() => null));  // not on the page yet: the light fallbacks
  assert.deepEqual([light.text, light.muted, light.name("#222222"), light.name("#66ccee")], ["#212121", "#616161", "#222222", "#212121"]);
  const dark = panelInk(themeColors(vars({ "--jp-layout-color0": "#111111", "--jp-ui-font-color1": "rgba(255, 255, 255, 1)",
    "--jp-layout-color2": "#424242", "--jp-ui-font-color2": "rgba(255, 255, 255, 0.54)" })));
  assert.deepEqual([dark.text, dark.muted, dark.name("#222222"), dark.name("#66ccee"), dark.name("#aa3377")],
    ["#ffffff", "#929292", "#ffffff", "#66ccee", "#aa3377"]);  // #aa3377 on #111111: 3.1:1
  assert.equal(dark.name("hsl(10, 70%, 80%)"), "#ffffff");  // not a colour it can check: the text's
});
