// Unit tests of the model map's layout (treemap.js), the theme colours (theme.js) and the label
// and outline helpers of geometry.js: `node --test tests/js/`.
import test from "node:test";
import assert from "node:assert/strict";
import { squarify, mapLayout, cellAt, contrast, inkOn, luminance } from "../../tensorviz/explorer/treemap.js";
import { themeColors, parseColor, blend, TEXT_CONTRAST } from "../../tensorviz/explorer/theme.js";
import { fitName, spanLabel, outlineColors, formatBytes } from "../../tensorviz/explorer/geometry.js";
import { VOCAB, py } from "./vocab.mjs";

const mono = (t) => 6 * [...t].length;  // a 6-px-a-character font

test("squarify lays out the paper's example (Bruls et al. 2000: 6,6,4,3,2,2,1 in 6x4)", () => {
  const r = squarify([6, 6, 4, 3, 2, 2, 1], 0, 0, 6, 4).map((q) => q.map((v) => Math.round(v * 1000) / 1000));
  assert.deepEqual(r, [
    [0, 0, 3, 2], [0, 2, 3, 2], [3, 0, 1.714, 2.333], [4.714, 0, 1.286, 2.333],
    [3, 2.333, 1.2, 1.667], [4.2, 2.333, 1.2, 1.667], [5.4, 2.333, 0.6, 1.667],
  ]);
  const area = r.reduce((a, q) => a + q[2] * q[3], 0);
  assert.ok(Math.abs(area - 24) < 0.01);  // the box, exactly filled
  assert.deepEqual(squarify([0, 5], 2, 3, 10, 10)[0], [2, 3, 0, 0]);  // nothing for 0 bytes
});

test("mapLayout: the focus fills the box, an opened cell keeps a label strip and a frame", () => {
  // (model) 300 = a (opened: a.x 100, a.y 100) + b 100 (own 0, tied 100)
  const cells = [["", "(model)", -1, 300, 0, "M", 0], ["a", "a", 0, 200, 0, "A", 1], ["b", "b", 0, 0, 100, "", 1],
    ["a.x", "x", 1, 100, 0, "", 2], ["a.y", "y", 1, 100, 0, "", 2]];
  const L = mapLayout(cells, 300, 100, 15);
  assert.deepEqual(L.rects[0], [0, 0, 300, 100]);
  assert.deepEqual(L.rects[1], [0, 0, 200, 100]);  // 200 of 300 bytes (own + tied): 2/3 of the width
  assert.deepEqual(L.rects[2], [200, 0, 100, 100]);
  assert.equal(L.strip[1], 15);
  assert.deepEqual(L.rects[3], [1, 15, 99, 84]);  // inside a's frame, under its strip
  assert.deepEqual(L.rects[4], [100, 15, 99, 84]);
  assert.equal(cellAt(L, 150, 50), 4);  // the deepest cell under the pixel
  assert.equal(cellAt(L, 150, 5), 1);  // a's strip
  assert.equal(cellAt(L, 250, 50), 2);
  assert.equal(cellAt(L, 400, 50), -1);
});

test("contrast and inkOn follow WCAG 2", () => {
  assert.equal(luminance("#ffffff"), 1);
  assert.equal(contrast("#000000", "#ffffff"), 21);
  assert.equal(Math.round(contrast("#777777", "#ffffff") * 100) / 100, 4.48);
  assert.equal(inkOn("#ee7733"), "#000000");
  assert.equal(inkOn("#4477aa"), "#ffffff");
});

test("fitName cuts a dotted name at a part boundary, never inside a part", () => {
  const name = "model.layers.0.mlp.gate_proj.weight";  // 35 characters
  assert.equal(fitName(name, 6 * 35, mono), name);
  assert.equal(fitName(name, 6 * 30, mono), "…layers.0.mlp.gate_proj.weight");
  assert.equal(fitName(name, 6 * 25, mono), "…0.mlp.gate_proj.weight");
  assert.equal(fitName(name, 6 * 20, mono), "…gate_proj.weight");
  assert.equal(fitName(name, 6 * 7, mono), "…weight");
  assert.equal(fitName(name, 6 * 5, mono), "…ight");  // the last part alone does not fit: its end
  assert.equal(fitName("blocks.0.up.weight · 1.5 KiB", 6 * 20, mono), "…up.weight · 1.5 KiB");
  assert.equal(fitName("blocks.0.up.weight · 1.5 KiB", 6 * 18, mono), "…weight · 1.5 KiB");
  assert.equal(fitName("blocks.0.up.weight · 1.5 KiB", 6 * 12, mono), "…0.up.weight");  // the size goes first
  assert.equal(fitName("abc", 3, mono), "");
});

test("spanLabel keeps whole names and counts the tied ones it cannot show (T5's four names)", () => {
  const t5 = ["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"];
  const all = t5.join(" ≡ ");
  assert.equal(spanLabel(t5, mono(all), mono), all);
  assert.equal(spanLabel(t5, 6 * 60, mono), "shared.weight ≡ encoder.embed_tokens.weight ≡ +2 tied");
  assert.equal(spanLabel(t5, 6 * 30, mono), "shared.weight ≡ +3 tied");
  assert.equal(spanLabel(t5, 6 * 15, mono), "…weight ≡ +3");
  assert.equal(spanLabel(["a.b.c"], 6 * 3, mono), "…c");
});

test("the outline's inner stroke reads on every palette colour (>= 4.5:1), orange and teal too", () => {
  const palette = py("import json; from tensorviz.plan.colors import PALETTE; print(json.dumps(PALETTE))");
  assert.ok(palette.length >= 10);
  for (const fill of palette) {  // the dashed "shares bytes" outline: plan/colors.py's, as the static pictures draw it
    assert.ok(contrast(VOCAB.shares_outline, fill) >= 3, `shares outline on ${fill}: ${contrast(VOCAB.shares_outline, fill)}`);
  }
  for (const fill of palette) {
    for (const meaning of ["selected", "shares", "hover"]) {
      const [, inner] = outlineColors(fill, meaning);
      assert.ok(contrast(inner, fill) >= 4.5, `${meaning} outline on ${fill}: ${contrast(inner, fill)}`);
    }
  }
});

test("themeColors: JupyterLab light, dark and high contrast, text >= 4.5:1 on the background", () => {
  const vars = (o) => (name) => (o[name] ? parseColor(o[name]) : null);
  const light = themeColors(vars({ "--jp-layout-color0": "#ffffff", "--jp-ui-font-color1": "rgba(0, 0, 0, 0.87)", "--jp-layout-color2": "#eeeeee" }));
  assert.equal(light.background, "#ffffff");
  assert.equal(light.text, "#212121");  // 87% black over white
  const dark = themeColors(vars({ "--jp-layout-color0": "#111111", "--jp-ui-font-color1": "rgba(255, 255, 255, 1)", "--jp-layout-color2": "#424242",
    "--jp-ui-font-color2": "rgba(255, 255, 255, 0.54)" }));
  assert.deepEqual([dark.background, dark.text, dark.muted], ["#111111", "#ffffff", "#929292"]);
  const poor = themeColors(vars({ "--jp-layout-color0": "#202020", "--jp-ui-font-color1": "#303030" }));
  assert.equal(poor.text, "#ffffff");  // a theme whose text would not read gets white
  for (const t of [light, dark, poor]) assert.ok(contrast(t.text, t.background) >= TEXT_CONTRAST);
  assert.equal(blend([255, 255, 255, 0.5], "#000000"), "#808080");
  assert.deepEqual(themeColors(() => null).background, "#ffffff");
});

test("formatBytes writes with Python's unit table (the vocab's units)", () => {
  assert.deepEqual(VOCAB.units.map(([name]) => name), ["TiB", "GiB", "MiB", "KiB", "B"]);
  assert.deepEqual([0, 1536, 4000, 3 * 2 ** 30].map(formatBytes), ["0 B", "1.5 KiB", "3.906 KiB", "3 GiB"]);
});
