// Unit tests of the load-check pane (loadpane.js) and the canvas's load marks (loadmarks.js):
// `node --test tests/js/`. The section comes from Python (explorer/loadpane.py load_section of a
// real tv.load_check), as the pane receives it.
import test from "node:test";
import assert from "node:assert/strict";
import { verdictKind, listHeading, moreLine, marksLine, isLit, pickMessage } from "../../tensorviz/explorer/loadpane.js";
import {
  LOAD_MARKS, decodeMarks, markOf, badgeRect, markKeys, markLine, badgeContrast,
} from "../../tensorviz/explorer/loadmarks.js";
import { py } from "./vocab.mjs";

// TiedLM (wte.weight = lm_head.weight, ln.weight, ln.bias) <- its state dict under "module.".
const section = py(`
import collections, json, torch
from tests.helpers.models import TiedLM
from tensorviz.explorer.loadpane import load_section, applicable, MARK_KINDS
import tensorviz as tv
m = TiedLM()
sd = collections.OrderedDict(("module." + k, torch.zeros_like(v)) for k, v in m.state_dict().items())
r = tv.load_check(m, sd)
s = load_section(r, "load_state_dict", applicable(m, sd), frozenset(tv.analyze(m).names), "sd")
print(json.dumps(dict(s.to_json(), kinds=list(MARK_KINDS))))
`);

test("the verdict of a load that raises, and its lists' headings (the canvas's glyph on marked lists)", () => {
  assert.equal(section.verdict, "raises RuntimeError: Error(s) in loading state_dict for TiedLM:");
  assert.equal(verdictKind(section), "raises");
  assert.deepEqual(section.lists.map(listHeading), ["missing (4)", "unexpected (4)", "∅ untouched (keep their initial values) (4)"]);
  assert.deepEqual(section.lists[0].rows, [["wte.weight", true], ["ln.weight", true], ["ln.bias", true], ["lm_head.weight", true]]);
  assert.deepEqual(section.lists[1].rows.map((r) => r[1]), [false, false, false, false]);  // not model names: no click
  assert.equal(marksLine(section), "marked in the diagram: ∅ 4 untouched");
  assert.deepEqual(section.kinds, Object.keys(LOAD_MARKS));  // Python's MARK_KINDS, in code order
});

test("verdictKind: clean, warn, failed; moreLine counts the rows not sent", () => {
  assert.equal(verdictKind({ verdict: "does not raise: clean", raises: false, clean: true }), "clean");
  assert.equal(verdictKind({ verdict: "does not raise: not clean (see the lists)", raises: false, clean: false }), "warn");
  assert.equal(verdictKind({ verdict: "does not raise: clean; casts 4 tensors (4 narrowing)", raises: false, clean: true, narrowing: 4 }), "warn");
  assert.equal(verdictKind({ verdict: "does not raise: clean; casts 4 tensors (0 narrowing)", raises: false, clean: true, narrowing: 0 }), "clean");
  assert.equal(verdictKind({ verdict: "the check failed: OptionError: x", raises: false, clean: false }), "failed");
  assert.equal(verdictKind({}), "");
  assert.equal(moreLine({ count: 1234, rows: new Array(500) }), "… 734 more: print(tv.load_check(...)) lists them all");
  assert.equal(moreLine({ count: 3, rows: [1, 2, 3] }), "");
  assert.equal(listHeading({ kind: "cast", title: "cast (source → model)", count: 12000 }), "⇄ cast (source → model) (12,000)");
  assert.equal(marksLine({ marks: { untouched: 0, cast: 2 } }), "marked in the diagram: ⇄ 2 cast");
  assert.equal(marksLine({ marks: { untouched: 0, cast: 0 } }), "");
});

test("a row is lit when its names are selected; a click sends the list and the row", () => {
  const lit = [["missing", 1], ["untouched", 1]];
  assert.equal(isLit(lit, "missing", 1), true);
  assert.equal(isLit(lit, "missing", 0), false);
  assert.equal(isLit(lit, "unexpected", 1), false);
  assert.equal(isLit(undefined, "missing", 1), false);
  assert.deepEqual(pickMessage("missing", 2), { pick: ["missing", 2] });
});

test("load marks: one code per drawn view; a tied bar takes its first marked view's kind", () => {
  const code = new Uint8Array([0, 1, 2, 0]);
  const marks = decodeMarks({ code: new DataView(code.buffer), kinds: ["untouched", "cast"] });
  assert.deepEqual([...marks.code], [0, 1, 2, 0]);
  assert.equal(markOf(marks, [0]), null);
  assert.equal(markOf(marks, [0, 1]), "untouched");
  assert.equal(markOf(marks, [2]), "cast");
  assert.equal(markOf(decodeMarks({}), [1]), null);
  assert.deepEqual(markKeys(marks).map((k) => k[2]), ["∅", "⇄"]);
  assert.deepEqual(markKeys(decodeMarks({ code: new DataView(new Uint8Array([2, 0]).buffer), kinds: ["untouched", "cast"] })).map((k) => k[1]),
    ["cast by the load (its dtype differs from the source's)"]);
  assert.equal(markLine("untouched"), "∅ load: left untouched by the load (keeps its initial values)");
  assert.equal(markLine(null), "");
});

test("the badge sits inside a wide bar's right end, right of a narrow one, centred in the lane", () => {
  assert.deepEqual(badgeRect(100, 50, 40, 20), [134, 43, 14]);
  assert.deepEqual(badgeRect(100, 10, 40, 20), [112, 43, 14]);
  for (const kind of Object.keys(LOAD_MARKS)) assert.ok(badgeContrast(kind) >= 4.5, `${kind}: ${badgeContrast(kind)}`);
});
