// Pure layout of the model map (explorer/modelmap.py sends its cells): a nested squarified
// treemap. No DOM here, so `node --test` imports this file as is; modelmap.js draws it.

// The worst aspect ratio of a row of `areas` laid along a side of `side` pixels.
function worst(areas, side) {
  let s = 0, mx = 0, mn = Infinity;
  for (const a of areas) { s += a; mx = Math.max(mx, a); mn = Math.min(mn, a); }
  return Math.max((side * side * mx) / (s * s), (s * s) / (side * side * mn));
}

// Squarified treemap (Bruls, Huizing and van Wijk, 2000): `sizes` (largest first for the
// squarest cells) laid out in the rectangle [x, y, w, h]; one [x, y, w, h] per size, in order.
// A size of 0 (or less) gets an empty rectangle at (x, y).
export function squarify(sizes, x, y, w, h) {
  const out = sizes.map(() => [x, y, 0, 0]), live = [];
  let total = 0;
  sizes.forEach((s, k) => { if (s > 0) { live.push(k); total += s; } });
  if (!live.length || w <= 0 || h <= 0) return out;
  const areas = sizes.map((s) => (s * w * h) / total), area = (k) => areas[k];  // of the whole box
  let i = 0;
  while (i < live.length) {
    const side = Math.min(w, h);
    let j = i + 1, best = worst([area(live[i])], side);
    while (j < live.length) {
      const next = worst(live.slice(i, j + 1).map(area), side);
      if (next > best) break;
      best = next; j++;
    }
    const row = live.slice(i, j), rowArea = row.reduce((a, k) => a + area(k), 0);
    if (w >= h) {  // a column on the left
      const cw = rowArea / h;
      let yy = y;
      for (const k of row) { const hh = area(k) / cw; out[k] = [x, yy, cw, hh]; yy += hh; }
      x += cw; w -= cw;
    } else {  // a row on top
      const ch = rowArea / w;
      let xx = x;
      for (const k of row) { const ww = area(k) / ch; out[k] = [xx, y, ww, ch]; xx += ww; }
      y += ch; h -= ch;
    }
    i = j;
  }
  return out;
}

// The map's rectangles in a `w` x `h` box. `cells` are map_cells rows [path, label, parent, own,
// shared, kind, depth] (a parent before its children). The first cell fills the box; an opened
// cell keeps a `head`-pixel strip for its label when it is at least two strips tall and 40 px
// wide, and a 1-pixel frame; its children share the rest by area own + shared.
// Returns {rects, kids, strip}: per cell its [x, y, w, h], its children, its strip height.
export function mapLayout(cells, w, h, head = 15) {
  const n = cells.length, rects = new Array(n).fill(null), kids = cells.map(() => []), strip = new Float64Array(n);
  cells.forEach((c, k) => { if (c[2] >= 0) kids[c[2]].push(k); });
  if (!n) return { rects, kids, strip };
  rects[0] = [0, 0, w, h];
  for (let k = 0; k < n; k++) {
    const r = rects[k];
    if (!r || !kids[k].length) continue;
    let [x, y, cw, ch] = r;
    if (k > 0) {
      strip[k] = ch >= 2 * head && cw >= 40 ? head : 0;
      x += 1; y += strip[k] || 1; cw -= 2; ch -= (strip[k] || 1) + 1;
    }
    const sizes = kids[k].map((j) => cells[j][3] + cells[j][4]);
    squarify(sizes, x, y, Math.max(cw, 0), Math.max(ch, 0)).forEach((q, m) => { rects[kids[k][m]] = q; });
  }
  return { rects, kids, strip };
}

// The cell under pixel (px, py): the deepest whose rectangle holds it, or -1.
export function cellAt(layout, px, py) {
  let found = -1;
  layout.rects.forEach((r, k) => {
    if (r && r[2] > 0 && r[3] > 0 && px >= r[0] && px < r[0] + r[2] && py >= r[1] && py < r[1] + r[3]) found = k;
  });
  return found;
}

// Relative luminance of "#rrggbb" (WCAG 2).
export function luminance(hex) {
  const v = parseInt(hex.slice(1), 16), ch = [(v >> 16) & 255, (v >> 8) & 255, v & 255].map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2];
}

// WCAG contrast ratio of two "#rrggbb" colours (1 to 21).
export function contrast(a, b) {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

// Black or white, whichever reads better on `fill`.
export function inkOn(fill) {
  return contrast(fill, "#000000") >= contrast(fill, "#ffffff") ? "#000000" : "#ffffff";
}
