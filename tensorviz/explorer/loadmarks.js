// The load check's marks on the diagram canvas (explorer/loadpane.py, "tv.explore(model, load=)"):
// the names a load leaves untouched or casts get a glyph in a coloured badge at the end of their
// bar, a legend key and a tooltip line -- a glyph and words, never colour alone. Pure but for
// drawBadge (a canvas context is passed in), so `node --test` imports this file as is.
import { contrast } from "./treemap.js";

// Each mark kind (loadpane.py MARK_KINDS, sent in the canvas's `load_marks` trait): its glyph, the
// badge's fill and ink (>= 4.5:1 against each other), and what it means.
export const LOAD_MARKS = {
  untouched: { glyph: "∅", fill: "#8e0152", ink: "#ffffff", words: "left untouched by the load (keeps its initial values)" },
  cast: { glyph: "⇄", fill: "#7f3b08", ink: "#ffffff", words: "cast by the load (its dtype differs from the source's)" },
};
export const BADGE = 14;  // the badge's side, px

// The `load_marks` trait ({code: one byte per drawn view, kinds: [names]}) -> {code, kinds}.
export function decodeMarks(trait) {
  const t = trait || {}, v = t.code;
  const code = v && v.byteLength ? new Uint8Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength)) : new Uint8Array(0);
  return { code, kinds: t.kinds || [] };
}

// The mark of a bar drawing `views` (tied names share a bar): the first marked view's kind, or null.
export function markOf(marks, views) {
  if (!marks || !marks.code.length) return null;
  for (const v of views) { const c = marks.code[v]; if (c) return marks.kinds[c - 1] || null; }
  return null;
}

// Where the badge goes for a bar drawn at [x, width] in a lane at `y` of height `laneH`: inside
// the bar's right end when the bar is wide enough, else just right of it. [x, y, side].
export function badgeRect(x, width, y, laneH, side = BADGE) {
  const top = y + Math.round((laneH - side) / 2);
  return width >= side + 4 ? [x + width - side - 2, top, side] : [x + width + 2, top, side];
}

// Legend keys of the kinds present ([css, words, glyph]); counts per kind in `counts` when given.
export function markKeys(marks) {
  if (!marks || !marks.code.length) return [];
  const seen = new Set(marks.code);
  return marks.kinds.filter((k, i) => seen.has(i + 1) && LOAD_MARKS[k]).map((k) => [
    `${LOAD_MARKS[k].fill};color:${LOAD_MARKS[k].ink}`, LOAD_MARKS[k].words, LOAD_MARKS[k].glyph,
  ]);
}

// The tooltip's line for a marked bar ("" when not marked).
export function markLine(kind) {
  return kind && LOAD_MARKS[kind] ? `${LOAD_MARKS[kind].glyph} load: ${LOAD_MARKS[kind].words}` : "";
}

// Whether each badge's glyph reads on its fill (WCAG AA, 4.5:1): checked by the node tests.
export function badgeContrast(kind) { return contrast(LOAD_MARKS[kind].fill, LOAD_MARKS[kind].ink); }

// Draw the badge of `kind` on context `g` (a light edge so it reads on dark and light bars alike).
export function drawBadge(g, kind, rect, edge) {
  const m = LOAD_MARKS[kind];
  if (!m) return;
  const [x, y, s] = rect;
  g.fillStyle = m.fill; g.fillRect(x, y, s, s);
  g.strokeStyle = edge; g.lineWidth = 1; g.strokeRect(x + 0.5, y + 0.5, s - 1, s - 1);
  g.fillStyle = m.ink; g.font = "bold 11px sans-serif"; g.textAlign = "center"; g.textBaseline = "middle";
  g.fillText(m.glyph, x + s / 2, y + s / 2 + 0.5);
  g.textAlign = "start";
}
