// Unit tests of the compare mode's pure helpers (tensorviz/explorer/compare.js): `node --test tests/js/`.
// The section is made by Python (explorer/compare.py CompareSection.wire) from a real tv.diff.
import test from "node:test";
import assert from "node:assert/strict";
import {
  decodeCompare, rowKey, rowMarks, markText, rowLabel, pairTitle, rowAt, rowColumns, barLength, moveCursor, pairTooltip,
  legendEntries, hatchLines, nextMarked, matchTooltip, factLines, ROW_H, CompareView, ASK_PATIENCE_MS,
} from "../../tensorviz/explorer/compare.js";
import { py } from "./vocab.mjs";

// Sections as the canvas receives them, made in one Python run: each frame a DataView (at an odd
// offset, as a message buffer may put it), the rest JSON.
function sections(codes) {
  const made = py(`import base64, json, torch, tensorviz as tv
from tensorviz.explorer.compare import CompareRows
out = {}
${Object.entries(codes).map(([k, code]) => `${code}\nout[${JSON.stringify(k)}] = CompareRows(d).section().wire()`).join("\n")}
for w in out.values():
    w["frame"] = base64.b64encode(w["frame"]).decode()
print(json.dumps(out))`);
  for (const sent of Object.values(made)) {
    const raw = Buffer.from(sent.frame, "base64"), buf = new ArrayBuffer(raw.length + 3);
    new Uint8Array(buf).set(raw, 3);
    sent.frame = new DataView(buf, 3, raw.length);
  }
  return made;
}

// a: w and v tied, x only in a; b: the same under "module.", w in float16, the tie gone, y only
// in b (its name with a bidi override and markup: data, shown escaped).
const S = sections({
  tied: `w = torch.zeros(4, 4)
d = tv.diff({"w": w, "v": w, "x": torch.zeros(3)}, {"module.w": w.half(), "module.v": w.clone(), "module.y\u202e<b>": torch.zeros(2)})`,
  big: `d = tv.diff({"e": torch.empty(128256, 8192, device="meta")}, {"e": torch.empty(128256, 8192, device="meta", dtype=torch.bfloat16)})`,
});
const section = (k) => S[k];
const TIED = "tied";

test("decodeCompare reads every row in the static side-by-side order, with both sides' facts", () => {
  const c = decodeCompare(section(TIED));
  assert.equal(c.n, 4);
  assert.deepEqual([0, 1, 2, 3].map((i) => rowKey(c, i)), ["w", "v", "x", "module.y\\u202e<b>"]);
  assert.deepEqual([0, 1, 2, 3].map((i) => rowLabel(c, i)), ["w", "v", "x", "module.y\\u202e<b>"]);
  assert.deepEqual([0, 1, 2, 3].map((i) => pairTitle(c, i)), ["w → module.w", "v → module.v", "x", "module.y\\u202e<b>"]);
  assert.deepEqual(Array.from(c.side), [3, 3, 1, 2]);
  assert.deepEqual(Array.from(c.bytesA), [64, 64, 12, -1]);
  assert.deepEqual(Array.from(c.bytesB), [32, 64, -1, 8]);
  assert.deepEqual([c.dtypeA[0], c.dtypeB[0], c.shapeA[2], c.strideB[3]], ["float32", "float16", "(3,)", "(1,)"]);
  assert.deepEqual([c.tieA[0], c.tieB[0], c.rule[0]], ["tied with v", "", "prefix 'module.' removed from b"]);
  assert.equal(c.biggest, 64);
  assert.equal(c.rowOf.get("x"), 2);
  assert.match(c.summary, /^3 tensors in a, 3 in b, 2 matched \(2 by rule\) · only in a 1, only in b 1, tie lost 2, dtype 1 · differ$/);
});

test("marks and their words: a glyph and words per change, in vocabulary order", () => {
  const c = decodeCompare(section(TIED));
  assert.deepEqual(rowMarks(c, 0).map((m) => m[0]), ["tie lost", "dtype", "renamed"]);  // the badge: the first
  assert.equal(markText(c, 0), "≢ tie lost · Δ dtype · → renamed");
  assert.equal(markText(c, 2), "− only in a");
  assert.equal(markText(c, 3), "+ only in b");
  assert.deepEqual(legendEntries(c).map(([m, n]) => [m[2], n]), [["only in a", 1], ["only in b", 1], ["tie lost", 2], ["dtype", 1], ["renamed", 2]]);
});

test("pairTooltip shows both sides' facts, marking the ones that differ", () => {
  const c = decodeCompare(section(TIED));
  const tip = pairTooltip(c, 0);
  assert.deepEqual(tip.slice(0, 5), [
    "w → module.w", "≢ tie lost · Δ dtype · → renamed", "matched by rule: prefix 'module.' removed from b", "a: w", "b: module.w",
  ]);
  assert.ok(tip.includes("dtype   float32                  ≠ float16"), tip.join("\n"));
  assert.ok(tip.includes("shape   (4, 4)                     (4, 4)"), tip.join("\n"));
  assert.deepEqual(tip.slice(-6), [
    "bytes   a: 64 B", "      ≠ b: 32 B", "storage a: #0 cpu · 64 B", "        b: #0 cpu · 32 B",
    "tie     a: tied with v", "      ≠ b: none",
  ]);
  const only = pairTooltip(c, 3);
  assert.deepEqual(only.slice(0, 4), ["module.y\\u202e<b>", "+ only in b", "a: — (not in a)", "b: module.y\\u202e<b>"]);
  assert.ok(only.includes("dtype   —                          float32"), only.join("\n"));
});

// A view of a's rows as the canvas's hover finds them: [section, row] for an a-name.
const finder = (c, known = new Map()) => (name) => (known.has(name) ? known.get(name) : c.rowOf.has(name) && c.side[c.rowOf.get(name)] & 1 ? [c, c.rowOf.get(name)] : undefined);

test("matchTooltip: a hovered view of a shows its matched view in b, side by side", () => {
  const c = decodeCompare(section(TIED));
  // the bar of the tie w ≡ v: w's match in full, v's in one line
  assert.deepEqual(matchTooltip(["w", "v"], finder(c)), [
    "in b: module.w",
    "≢ tie lost · Δ dtype · → renamed",
    "matched by rule: prefix 'module.' removed from b",
    "        a                          b",
    "shape   (4, 4)                     (4, 4)",
    "dtype   float32                  ≠ float16",
    "stride  (4, 1)                     (4, 1)",
    "offset  0                          0",
    "bytes   a: 64 B",
    "      ≠ b: 32 B",
    "storage a: #0 cpu · 64 B",
    "        b: #0 cpu · 32 B",
    "tie     a: tied with v",
    "      ≠ b: none",
    "v → module.v · ≢ tie lost · → renamed",
  ]);
  assert.deepEqual(factLines(c, 0), matchTooltip(["w"], finder(c)).slice(3));
  assert.deepEqual(matchTooltip(["x"], finder(c)), ["in b: — only in a (no tensor of b matches it by name or rule)"]);
});

test("matchTooltip: a row not sent is asked for (undefined), one the kernel has not (null)", () => {
  const c = decodeCompare(section(TIED));
  assert.deepEqual(matchTooltip(["gone"], finder(c)), ["in b: asking the kernel…"]);
  const told = finder(c, new Map([["gone", null]]));
  assert.deepEqual(matchTooltip(["w", "gone"], told).slice(-1), ["gone → — (not in the comparison: the name filter hides its row)"]);
  const many = matchTooltip(["w", "v", "x", "w", "v", "x"], finder(c));
  assert.deepEqual(many.slice(-4), [
    "v → module.v · ≢ tie lost · → renamed", "x → — only in a (no tensor of b matches it by name or rule)",
    "w → module.w · ≢ tie lost · Δ dtype · → renamed", "… 2 more names on this bar: hover their rows above",
  ]);
});

test("matchLines: a row asked of the kernel and not answered in ASK_PATIENCE_MS says so; a late answer still shows", () => {
  const c = decodeCompare(section(TIED)), asks = [], waits = [];
  const view = new CompareView(null, { ask: (names) => asks.push(names), wait: (ms) => waits.push(ms) });
  let clock = 1000;
  view.c = c; view.now = () => clock;
  assert.deepEqual(view.matchLines(["gone"]), ["in b: asking the kernel…"]);
  assert.deepEqual([asks, waits], [[["gone"]], [ASK_PATIENCE_MS]]);
  clock += ASK_PATIENCE_MS - 1;
  assert.deepEqual(view.matchLines(["gone"]), ["in b: asking the kernel…"]);
  clock += 1;
  const silent = "in b: no answer from the kernel (busy, or not running: a saved page holds only the rows it was sent)";
  assert.deepEqual(view.matchLines(["gone"]), [silent]);
  assert.deepEqual(view.matchLines(["w", "gone"]).slice(-1), [silent.replace("in b: ", "gone → ")]);
  assert.equal(asks.length, 1);  // asked once per name, never again
  view.asked.set("gone", null);  // the kernel's answer, however late
  assert.deepEqual(view.matchLines(["gone"]), ["in b: — (not in the comparison: the name filter hides its row)"]);
  assert.deepEqual(view.matchLines(["w"]).slice(0, 1), ["in b: module.w"]);  // a row sent needs no kernel
});

test("big sizes are shown exactly in the hover", () => {
  const c = decodeCompare(section("big"));
  const tip = pairTooltip(c, 0);
  assert.deepEqual(tip.slice(-6, -4), ["bytes   a: 3.914 GiB (4,202,692,608 B)", "      ≠ b: 1.957 GiB (2,101,346,304 B)"]);
});

test("rowAt hits the row under y (scrolled), -1 outside", () => {
  assert.equal(rowAt(0, 0, 5), 0);
  assert.equal(rowAt(ROW_H - 0.1, 0, 5), 0);
  assert.equal(rowAt(ROW_H, 0, 5), 1);
  assert.equal(rowAt(5, 3 * ROW_H, 5), 3);
  assert.equal(rowAt(5, 5 * ROW_H, 5), -1);
  assert.equal(rowAt(-1, 0, 5), -1);
});

test("rowColumns lays out the parts left to right without overlap at 1024 and 1400 px", () => {
  for (const width of [600, 1000, 1366]) {
    const k = rowColumns(width);
    const order = [k.badge, k.name, k.bytesA, k.barA, k.barB, k.bytesB, k.tags];
    for (let j = 1; j < order.length; j++) assert.ok(order[j][0] >= order[j - 1][0] + order[j - 1][1], `${width} ${j}`);
    assert.ok(k.tags[0] + k.tags[1] <= width, `${width}`);
    assert.ok(k.barA[0] + k.barA[1] < k.middle && k.middle < k.barB[0]);
    assert.equal(k.barA[1], k.barB[1]);  // one byte scale on both sides
  }
});

test("barLength: absent 0, empty 1, else proportional with at least 2 px", () => {
  assert.equal(barLength(-1, 100, 200), 0);
  assert.equal(barLength(0, 100, 200), 1);
  assert.equal(barLength(50, 100, 200), 100);
  assert.equal(barLength(1, 1e9, 200), 2);
});

test("moveCursor: arrows, pages, Home and End, clamped; other keys do nothing", () => {
  assert.equal(moveCursor("ArrowDown", -1, 10, 4), 0);
  assert.equal(moveCursor("ArrowUp", -1, 10, 4), 0);
  assert.equal(moveCursor("ArrowDown", 9, 10, 4), 9);
  assert.equal(moveCursor("PageDown", 3, 10, 4), 7);
  assert.equal(moveCursor("PageUp", 3, 10, 4), 0);
  assert.equal(moveCursor("End", 0, 10, 4), 9);
  assert.equal(moveCursor("Home", 5, 10, 4), 0);
  assert.equal(moveCursor("a", 5, 10, 4), null);
  assert.equal(moveCursor("ArrowDown", -1, 0, 4), null);
});

test("hatchLines: a pattern per changed kind, none for unchanged rows", () => {
  assert.equal(hatchLines("same").length, 0);
  for (const k of ["changed", "only", "tie"]) assert.ok(hatchLines(k).length > 0, k);
  assert.notDeepEqual(hatchLines("changed"), hatchLines("only"));
});

test("nextMarked finds the next (or previous) changed row, wrapping; renamed alone is no change", () => {
  const c = decodeCompare(section(TIED));  // rows: w (tie lost, dtype, renamed), v (tie lost, renamed), x (only in a), y (only in b)
  assert.equal(nextMarked(c, -1), 0);
  assert.equal(nextMarked(c, 0), 1);
  assert.equal(nextMarked(c, 3), 0);
  assert.equal(nextMarked(c, 0, -1), 3);
  const dtype = 1 << c.markVocab.findIndex((m) => m[0] === "dtype");
  assert.equal(nextMarked(c, 0, 1, dtype), 0);  // the only dtype row, found again after wrapping
  const renamedOnly = { ...c, n: 2, marks: Uint16Array.from([1 << c.markVocab.findIndex((m) => m[0] === "renamed"), 0]) };
  assert.equal(nextMarked(renamedOnly, -1), -1);
});
