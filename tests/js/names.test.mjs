// Tensor names are data: a name of 20,000 characters must not make a tooltip thousands of
// pixels tall. `node --test tests/js/`.
import test from "node:test";
import assert from "node:assert/strict";
import { clipName, NAME_SHOWN, tooltip, overviewTooltip } from "../../tensorviz/explorer/geometry.js";
import { C, VOCAB, lanes } from "./vocab.mjs";

test("clipName keeps a name's start and end around an ellipsis, NAME_SHOWN characters in all", () => {
  assert.equal(clipName("model.layers.0.weight"), "model.layers.0.weight");
  const long = "a".repeat(10_000) + "tail.weight";
  const shown = clipName(long);
  assert.equal(shown.length, NAME_SHOWN);
  assert.ok(shown.startsWith("aaaa") && shown.endsWith("…" + "a".repeat(NAME_SHOWN - 1 - Math.floor((NAME_SHOWN - 1) / 2) - 11) + "tail.weight"));
  assert.equal(clipName("x".repeat(NAME_SHOWN)), "x".repeat(NAME_SHOWN));
  assert.equal(clipName("abcdefghij", 5), "ab…ij");  // as Python's tensorviz.core.names.elide
});

test("a bar's and an overview cell's tooltip show a very long name clipped", () => {
  const long = "z".repeat(20_000);
  const d = {
    C, names: [long, "b"], geom: ["4;;0", "4;;0"], dtype: new Uint8Array([0, 0]), dtypes: ["float32"],
    start: new Float64Array([0, 0]), stop: new Float64Array([16, 16]), fpct: new Float32Array([1, 1]),
    flags: new Uint8Array([0, 0]), storageOf: new Int32Array([0, 0]), barView: new Uint32Array(0),
    tieFirst: new Uint32Array(0), rel: new Uint8Array([C.rel.identical, C.rel.selected]), relTo: new Uint32Array([1, 1]),
    lane: new Uint32Array([1, 2]), laneKind: lanes("storage", "view", "view"), laneBlock: new Int32Array([0, 0, 0]),
    blockNbytes: new Float64Array([16]),
  };
  assert.equal(tooltip(d, 0)[0], clipName(long));
  d.rel = new Uint8Array([C.rel.selected, C.rel.identical]); d.relTo = new Uint32Array([0, 0]);
  assert.equal(tooltip(d, 1).at(-1), `identical ${clipName(long)} (selected)`);
  const ov = { views: [3], kind: [0], kinds: VOCAB.overview_kinds, storage: [7], nbytes: [64], unrefBytes: [0] };
  const lines = overviewTooltip(ov, { name: [long], state: [0] }, 0);
  assert.equal(lines[1], `${clipName(long)} +2 views`);
});
