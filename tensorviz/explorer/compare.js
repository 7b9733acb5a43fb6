// The canvas's compare mode (tv.explore(a, compare=b)): two layouts row by row, a matched pair on
// one row, each change marked by a glyph and words besides a colour; hover shows both sides'
// facts; a click, Enter or Space selects the pair (the explorer's one selection). The section
// arrives in the canvas's payload under "compare" (explorer/compare.py CompareSection.wire).
// Pure helpers first (node --test imports this file); the DOM only inside CompareView.
import { column, lines, unframe, formatBytes, fitName, fitText, clipName } from "./geometry.js";
import { inkOn } from "./treemap.js";

export const ROW_H = 20, HEAD_H = 20, ROWS_SHOWN = 14;
// How long a hover waits for the kernel's answer about a row not sent before saying none came
// (a notebook saved with its widgets and opened without a kernel never answers).
export const ASK_PATIENCE_MS = 5000;

// The section (its frame unframed by its own column names) decoded for drawing.
export function decodeCompare(sent) {
  const p = unframe(sent.frame, sent.columns || []), n = column(p.side, Uint8Array).length;
  const text = (k) => lines(p[k], n), num = (k) => column(p[k], Float64Array);
  const dtypes = sent.dtypes || [], dt = (k) => Array.from(column(p[k], Uint8Array), (x) => dtypes[x] ?? "");
  const c = {
    n, side: column(p.side, Uint8Array), marks: column(p.marks, Uint16Array), kind: column(p.kind, Uint8Array),
    namesA: text("names_a"), namesB: text("names_b"), rule: text("rule"),
    bytesA: num("bytes_a"), bytesB: num("bytes_b"), offsetA: num("offset_a"), offsetB: num("offset_b"),
    shapeA: text("shape_a"), shapeB: text("shape_b"), strideA: text("stride_a"), strideB: text("stride_b"),
    dtypeA: dt("dtype_a"), dtypeB: dt("dtype_b"), storageA: text("storage_a"), storageB: text("storage_b"),
    tieA: text("tie_a"), tieB: text("tie_b"),
    markVocab: sent.marks || [], kinds: sent.kinds || [], summary: sent.summary || "", sources: sent.sources || ["a", "b"],
    rules: sent.rules || [], counts: sent.counts || [], leftOut: sent.left_out || 0, total: sent.total ?? n,
  };
  for (let i = 0; i < n; i++) if ((c.side[i] & 2) && !c.namesB[i]) c.namesB[i] = c.namesA[i];  // same name on both sides
  c.biggest = Math.max(1, ...c.bytesA, ...c.bytesB);
  c.rowOf = new Map();
  for (let i = 0; i < n; i++) c.rowOf.set(rowKey(c, i), i);
  return c;
}

// A row's selection key: its a-name, or its b-name when only in b (as Python's CompareRow.key).
export function rowKey(c, i) { return c.side[i] & 1 ? c.namesA[i] : c.namesB[i]; }

// The marks of row i: [key, glyph, words, colour] each, in vocabulary order.
export function rowMarks(c, i) { return c.markVocab.filter((_, k) => c.marks[i] & (1 << k)); }

// The words after a row: each mark as its glyph and words ("Δ dtype · ≢ tie lost"); "" unchanged.
export function markText(c, i) { return rowMarks(c, i).map((m) => `${m[1]} ${m[2]}`).join(" · "); }

// The name drawn on a row: the a-name (a renamed row's b-name is in its hover), the b-name when
// only in b.
export function rowLabel(c, i) { return c.side[i] & 1 ? c.namesA[i] : c.namesB[i]; }

// The hover's title: the a-name, "a → b" when renamed, the b-name when only in b.
export function pairTitle(c, i) {
  const a = c.side[i] & 1, b = c.side[i] & 2;
  return a && b && c.namesA[i] !== c.namesB[i] ? `${c.namesA[i]} → ${c.namesB[i]}` : rowLabel(c, i);
}

// The row under y (px from the top of the rows, scrolled by scrollTop); -1 outside.
export function rowAt(y, scrollTop, n, rowH = ROW_H) {
  if (y < 0) return -1;
  const i = Math.floor((y + scrollTop) / rowH);
  return i >= 0 && i < n ? i : -1;
}

// Where each part of a row goes at `width` px: [x, w] of the badge, the name, a's bytes, a's bar
// (growing leftwards to the middle), b's bar (rightwards), b's bytes and the marks' words.
export function rowColumns(width) {
  const name = Math.round(Math.min(340, Math.max(120, width * 0.28)));
  const tags = Math.round(Math.min(260, Math.max(120, width * 0.2)));
  const bytes = 60, rest = width - 28 - name - 2 * bytes - 22 - tags;
  const bar = Math.max(30, Math.min(220, Math.floor(rest / 2)));
  const out = { badge: [2, 22], name: [28, name] };
  out.bytesA = [28 + name + 4, bytes];
  out.barA = [out.bytesA[0] + bytes + 4, bar];
  out.middle = out.barA[0] + bar + 3;
  out.barB = [out.middle + 3, bar];
  out.bytesB = [out.barB[0] + bar + 4, bytes];
  out.tags = [out.bytesB[0] + bytes + 4, Math.max(40, width - out.bytesB[0] - bytes - 8)];
  return out;
}

// A bar's length in px for `bytes` of `biggest` over `w` px: 0 when absent (< 0), at least 2
// for a non-empty tensor.
export function barLength(bytes, biggest, w) {
  if (bytes < 0) return 0;
  if (bytes === 0) return 1;
  return Math.max(2, (w * bytes) / biggest);
}

// The next cursor row for a key press (n rows, `page` rows in view); null: not a moving key.
export function moveCursor(key, cur, n, page) {
  if (!n) return null;
  const at = cur < 0 ? -1 : cur;
  const to = {
    ArrowDown: at + 1, ArrowUp: cur < 0 ? 0 : at - 1, PageDown: at + page, PageUp: at - page, Home: 0, End: n - 1,
  }[key];
  return to === undefined ? null : Math.max(0, Math.min(n - 1, to));
}

const pad = (t, w) => (t.length > w ? t.slice(0, w - 1) + "…" : t + " ".repeat(w - t.length));
const exact = (b) => (b < 0 ? "" : `${formatBytes(b)}${b >= 1024 ? ` (${Math.round(b).toLocaleString("en-US")} B)` : ""}`);

// The hover's lines for row i (the first drawn bold): the name, what changed, the rule, both
// names, then each fact side by side ("≠" where they differ), storage and tie per side.
export function pairTooltip(c, i) {
  const a = c.side[i] & 1, b = c.side[i] & 2, out = [clipName(pairTitle(c, i))];
  out.push(markText(c, i) || "no change");
  if (c.rule[i]) out.push(`matched by rule: ${c.rule[i]}`);
  out.push(`a: ${a ? clipName(c.namesA[i]) : "— (not in a)"}`, `b: ${b ? clipName(c.namesB[i]) : "— (not in b)"}`);
  return [...out, ...factLines(c, i)];
}

// Row i's facts side by side: shape, dtype, stride and offset in two columns ("≠" between them
// where they differ), then bytes, storage (its file or device) and tie a line per side.
export function factLines(c, i) {
  const a = c.side[i] & 1, b = c.side[i] & 2, out = [`${pad("", 8)}${pad("a", 24)}   b`];
  const facts = [
    ["shape", c.shapeA[i], c.shapeB[i]], ["dtype", c.dtypeA[i], c.dtypeB[i]], ["stride", c.strideA[i], c.strideB[i]],
    ["offset", a ? Math.round(c.offsetA[i]).toLocaleString("en-US") : "", b ? Math.round(c.offsetB[i]).toLocaleString("en-US") : ""],
  ];
  for (const [label, x, y] of facts) {
    const l = a ? x : "—", r = b ? y : "—";
    out.push(`${pad(label, 8)}${pad(l, 24)} ${a && b && x !== y ? "≠" : " "} ${r}`);
  }
  const perSide = (label, x, y, mark = true) => [  // long values: a line per side, "≠" before b's when they differ
    `${pad(label, 8)}a: ${a ? x : "—"}`, `${mark && a && b && x !== y ? "      ≠ " : "        "}b: ${b ? y : "—"}`,
  ];
  out.push(...perSide("bytes", exact(c.bytesA[i]), exact(c.bytesB[i])));
  out.push(...perSide("storage", c.storageA[i], c.storageB[i], false));  // numbered per side: not compared
  out.push(...perSide("tie", c.tieA[i] || "none", c.tieB[i] || "none"));
  return out;
}

// The lines a view of a's hover adds in compare mode (the lanes' bars and labels): for `names`
// (the a-names a bar draws: one, or a tie's), what b holds. `find(name)` gives the row of an
// a-name as [section, row], null when the kernel said no row has it, undefined while unknown
// (not sent: the caller asks the kernel), "silent" when asked and unanswered for ASK_PATIENCE_MS.
// The first name gets its matched view's facts beside its own ("≠" where they differ; "only in
// a" when nothing of b matches); the others a line each.
export function matchTooltip(names, find) {
  const out = [];
  names.slice(0, 4).forEach((name, k) => {
    const hit = find(name), head = k ? `${clipName(name, 80)} → ` : "in b: ";
    if (hit === undefined) { out.push(`${head}asking the kernel…`); return; }
    if (hit === "silent") {
      out.push(`${head}no answer from the kernel (busy, or not running: a saved page holds only the rows it was sent)`);
      return;
    }
    if (hit === null) { out.push(`${head}— (not in the comparison: the name filter hides its row)`); return; }
    const [c, i] = hit;
    if (!(c.side[i] & 2)) { out.push(`${head}— only in a (no tensor of b matches it by name or rule)`); return; }
    const b = clipName(c.namesB[i], k ? 80 : undefined), marks = markText(c, i) || "no change";
    out.push(k ? `${head}${b} · ${marks}` : `${head}${b}`);
    if (k) return;
    out.push(marks);
    if (c.rule[i]) out.push(`matched by rule: ${c.rule[i]}`);
    out.push(...factLines(c, i));
  });
  if (names.length > 4) out.push(`… ${names.length - 4} more names on this bar: hover their rows above`);
  return out;
}

// The next row after `from` (before it when dir < 0) carrying a mark of `mask` (every mark but
// "renamed" when null), wrapping around; -1 when none does.
export function nextMarked(c, from, dir = 1, mask = null) {
  const want = mask ?? c.markVocab.reduce((m, v, k) => (v[0] === "renamed" ? m : m | (1 << k)), 0);
  for (let step = 1; step <= c.n; step++) {
    const i = (((from + dir * step) % c.n) + c.n) % c.n;
    if (c.marks[i] & want) return i;
  }
  return -1;
}

// The legend's entries: each mark that some row carries, with its count over every row.
export function legendEntries(c) {
  return c.markVocab.map((m, k) => [m, c.counts[k] || 0]).filter(([, n]) => n > 0);
}

// A hatch per row kind (the static picture's: "//" changed, ".." tie, "xx" only in one side),
// so the bars' kind reads without colour: [[x0, y0, x1, y1], ...] lines in a `size` px tile.
export function hatchLines(kind, size = 6) {
  if (kind === "changed") return [[0, size, size, 0], [-1, 1, 1, -1], [size - 1, size + 1, size + 1, size - 1]];
  if (kind === "only") return [[0, 0, size, size], [0, size, size, 0]];
  if (kind === "tie") return [[1, 1, 2, 1], [4, 4, 5, 4]];
  return [];
}

// -- the view (DOM) --------------------------------------------------------------------------
const HTML = `<div class="tvz-cmp-head"><b class="tvz-cmp-summary"></b><span class="tvz-cmp-legend"></span></div>
  <div class="tvz-cmp-rules"></div><div class="tvz-cmp-scroll"><canvas tabindex="0" role="listbox"
  aria-label="comparison of a and b: arrow keys move, n the next change, Enter selects"></canvas><div class="tvz-cmp-spacer"></div></div>
  <div class="tvz-cmp-foot"></div>`;

export class CompareView {
  // `el`: the (hidden) container; `on.select(keys)`: set the explorer's selection; `on.tip(e,
  // lines)`: the canvas's tooltip beside a mouse event (null hides it); `on.ask(names)`: ask the
  // kernel for rows not sent; `on.wait(ms)`: show the hover again after `ms` (its asks unanswered).
  constructor(el, on) {
    this.el = el; this.on = on; this.c = null; this.hover = -1; this.cursor = -1; this.selected = new Set();
    this.asked = new Map(); this.askedAt = new Map(); this.now = () => performance.now();
    this.theme = null; this.width = 600; this.patterns = new Map();
  }

  update(sent, theme, selected, revision = 0) {
    this.theme = theme; this.selected = selected; this.asked = new Map(); this.askedAt = new Map(); this.revision = revision;
    if (!sent || !sent.frame) { this.el.hidden = true; this.c = null; return; }
    if (!this.canvas) this.build();
    this.c = decodeCompare(sent); this.el.hidden = false; this.hover = -1;
    this.cursor = Math.min(this.cursor, this.c.n - 1);
    this.el.querySelector(".tvz-cmp-summary").textContent = this.c.summary;
    const rules = this.c.rules.length ? `names matched by rule: ${this.c.rules.join("; ")}` : "";
    this.el.querySelector(".tvz-cmp-rules").textContent = `a: ${this.c.sources[0]} · b: ${this.c.sources[1]}${rules ? " · " + rules : ""}`;
    this.legend(); this.resize(this.width);
    // start at the first change when it is out of view (applied once the rows are on the page)
    const first = this.cursor < 0 && this.scroller.scrollTop === 0 ? nextMarked(this.c, -1) : -1;
    this.startAt = first >= ROWS_SHOWN ? first - 2 : -1;
    this.draw();
  }

  build() {
    this.el.innerHTML = HTML;
    const $ = (s) => this.el.querySelector(s);
    this.scroller = $(".tvz-cmp-scroll"); this.canvas = $("canvas"); this.spacer = $(".tvz-cmp-spacer"); this.foot = $(".tvz-cmp-foot");
    this.g = this.canvas.getContext("2d");
    const on = (t, type, f) => t.addEventListener(type, f);
    on(this.canvas, "mousemove", (e) => this.onMove(e));
    on(this.canvas, "mouseleave", () => { this.hover = -1; this.on.tip(null, null); this.draw(); });
    on(this.canvas, "click", (e) => { const i = this.rowAtEvent(e); if (i >= 0) this.pick(i, e.shiftKey || e.ctrlKey || e.metaKey); });
    on(this.canvas, "keydown", (e) => this.onKey(e));
    on(this.canvas, "blur", () => this.on.tip(null, null));
    on(this.scroller, "scroll", () => {  // a scroll of the user's hides the hover; the cursor's own keeps it
      if (!this.ownScroll) this.on.tip(null, null);
      this.ownScroll = false; this.draw();
    });
  }

  legend() {
    const box = this.el.querySelector(".tvz-cmp-legend");
    box.innerHTML = "";
    for (const [m, count] of legendEntries(this.c)) {
      const s = document.createElement("span"), i = document.createElement("i");
      s.className = "tvz-cv-key tvz-cmp-key"; i.textContent = m[1];
      i.style.background = m[3]; i.style.color = inkOn(m[3]);
      s.append(i, `${m[2]} ${count.toLocaleString()}`);
      s.title = `show the next row marked "${m[2]}"`;
      const bit = 1 << this.c.markVocab.indexOf(m);
      s.addEventListener("click", () => this.goTo(nextMarked(this.c, this.cursor, 1, bit)));
      box.append(s);
    }
  }

  // The lines a hover on a's views `names` adds (matchTooltip): from the rows sent, else from
  // the kernel, asked once per name (`on.ask(names)`; its answer comes to `receive`), "silent"
  // once unanswered for ASK_PATIENCE_MS (`on.wait` shows the hover again then); [] when not comparing.
  matchLines(names) {
    const c = this.c, unknown = [], now = this.now();
    if (!c || !names.length) return [];
    const find = (name) => {
      const i = c.rowOf.get(name);
      if (i !== undefined && c.side[i] & 1) return [c, i];
      if (!this.asked.has(name)) { this.asked.set(name, undefined); this.askedAt.set(name, now); unknown.push(name); }
      const hit = this.asked.get(name);
      return hit === undefined && now - this.askedAt.get(name) >= ASK_PATIENCE_MS ? "silent" : hit;
    };
    const out = matchTooltip(names, find);
    if (unknown.length) { this.on.ask(unknown); this.on.wait?.(ASK_PATIENCE_MS); }
    return out;
  }

  // The kernel's answer to `on.ask`: a section of the rows asked for (CompareRows.lookup), its
  // frame the message's buffer. Each name asked gets its row, or null when none has it.
  receive(msg, buffers) {
    if (!this.c || msg.revision !== this.revision) return false;
    const c = decodeCompare({ ...msg, frame: buffers[0] });
    for (const name of msg.asked) {
      const i = c.rowOf.get(name);
      this.asked.set(name, i !== undefined && c.side[i] & 1 ? [c, i] : null);
    }
    return true;
  }

  setSelection(selected) { this.selected = selected; this.draw(); }

  setTheme(theme) { this.theme = theme; this.draw(); }

  resize(width) {
    this.width = Math.max(240, width);
    if (!this.c) return;
    const dpr = window.devicePixelRatio || 1, shown = Math.max(1, Math.min(this.c.n, ROWS_SHOWN));
    this.height = HEAD_H + shown * ROW_H + 2;
    this.inner = this.width - (this.c.n > ROWS_SHOWN ? 16 : 0);  // room for the scroll bar
    this.canvas.width = Math.round(this.inner * dpr); this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.width = this.inner + "px"; this.canvas.style.height = this.height + "px";
    this.scroller.style.height = this.height + "px";
    this.spacer.style.height = Math.max(0, HEAD_H + this.c.n * ROW_H + 2 - this.height) + "px";
    this.g.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.draw();
  }

  draw() {
    const { c, g, theme: th } = this;
    if (!c || !g || !th) return;
    if (this.startAt >= 0 && this.scroller.clientHeight > 0) {
      this.scroller.scrollTop = this.startAt * ROW_H; this.startAt = -1; this.ownScroll = true;
    }
    const w = this.inner, cols = rowColumns(w), top = this.scroller.scrollTop, first = Math.floor(top / ROW_H);
    g.fillStyle = th.background; g.fillRect(0, 0, w, this.height);
    g.textBaseline = "middle";
    for (let i = first; i < Math.min(c.n, first + ROWS_SHOWN + 1); i++) this.drawRow(i, HEAD_H + i * ROW_H - top, cols);
    g.fillStyle = th.background; g.fillRect(0, 0, w, HEAD_H);
    g.fillStyle = th.text; g.font = "bold 11px sans-serif";
    const measure = (t) => g.measureText(t).width;
    g.fillText("name", cols.name[0], HEAD_H / 2);
    g.textAlign = "right"; g.fillText(fitText(`a: ${c.sources[0]}`, cols.barA[1] + cols.bytesA[1], measure), cols.middle - 4, HEAD_H / 2);
    g.textAlign = "left"; g.fillText(fitText(`b: ${c.sources[1]}`, cols.barB[1] + cols.bytesB[1], measure), cols.middle + 4, HEAD_H / 2);
    g.fillText("what changed", cols.tags[0], HEAD_H / 2);
    g.strokeStyle = th.border; g.beginPath(); g.moveTo(0, HEAD_H - 0.5); g.lineTo(w, HEAD_H - 0.5); g.stroke();
    const top1 = Math.round(top / ROW_H), last = Math.min(c.n, top1 + ROWS_SHOWN);  // rows mostly in view
    this.foot.textContent = `rows ${c.n ? top1 + 1 : 0}–${last} of ${c.n.toLocaleString()}` +
      (c.leftOut ? ` · … ${c.leftOut.toLocaleString()} more unchanged rows not sent: filter by name to reach them` : "") +
      " · hover a row: both sides · click, or Tab here, ↑↓ (n: next change) and Enter: select the pair";
    this.el.dataset.rows = c.n; this.el.dataset.cursor = this.cursor;
  }

  drawRow(i, y, cols) {
    const { c, g, theme: th } = this, key = rowKey(c, i), sel = this.selected.has(key);
    const measure = (t) => g.measureText(t).width, mid = y + ROW_H / 2;
    if (sel || i === this.hover) { g.fillStyle = th.panel; g.fillRect(0, y, this.inner, ROW_H); }
    const marks = rowMarks(c, i);
    if (marks.length) {  // the badge: the first mark's glyph on its colour
      const [, glyph, , colour] = marks[0];
      g.fillStyle = colour; g.fillRect(cols.badge[0], y + 2, cols.badge[1], ROW_H - 4);
      g.fillStyle = inkOn(colour); g.font = "bold 12px sans-serif"; g.textAlign = "center";
      g.fillText(glyph, cols.badge[0] + cols.badge[1] / 2, mid);
    }
    g.textAlign = "left"; g.font = "11px sans-serif"; g.fillStyle = th.text;
    g.fillText(fitName(rowLabel(c, i), cols.name[1], measure), cols.name[0], mid);
    const [kindName, fill] = c.kinds[c.kind[i]] || ["same", "#9aa5b1"];
    const la = barLength(c.bytesA[i], c.biggest, cols.barA[1]), lb = barLength(c.bytesB[i], c.biggest, cols.barB[1]);
    this.bar(cols.middle - 3 - la, y, la, fill, kindName);
    this.bar(cols.barB[0], y, lb, fill, kindName);
    g.strokeStyle = th.border; g.beginPath(); g.moveTo(cols.middle + 0.5, y); g.lineTo(cols.middle + 0.5, y + ROW_H); g.stroke();
    g.fillStyle = th.text; g.font = "10.5px sans-serif";
    g.textAlign = "right"; g.fillText(c.side[i] & 1 ? formatBytes(c.bytesA[i]) : "—", cols.bytesA[0] + cols.bytesA[1], mid);
    g.textAlign = "left"; g.fillText(c.side[i] & 2 ? formatBytes(c.bytesB[i]) : "—", cols.bytesB[0], mid);
    g.font = "bold 11px sans-serif";
    g.fillText(fitText(markText(c, i), cols.tags[1], measure), cols.tags[0], mid);
    if (sel || i === this.cursor) {
      g.strokeStyle = th.accent; g.lineWidth = 2; g.setLineDash(sel ? [] : [4, 3]);
      g.strokeRect(1, y + 1, this.inner - 2, ROW_H - 2); g.setLineDash([]); g.lineWidth = 1;
    }
  }

  bar(x, y, length, fill, kind) {
    if (length <= 0) return;
    const g = this.g;
    g.fillStyle = fill; g.fillRect(x, y + 4, length, ROW_H - 8);
    const hatch = this.pattern(kind);
    if (hatch && length > 4) { g.fillStyle = hatch; g.fillRect(x, y + 4, length, ROW_H - 8); }
    g.strokeStyle = "#333333"; g.lineWidth = 1; g.strokeRect(x + 0.5, y + 4.5, Math.max(length - 1, 1), ROW_H - 9);
  }

  pattern(kind) {
    if (!this.patterns.has(kind)) {
      const segs = hatchLines(kind);
      let p = null;
      if (segs.length) {
        const tile = document.createElement("canvas");
        tile.width = tile.height = 6;
        const t = tile.getContext("2d");
        t.strokeStyle = "rgba(0,0,0,0.55)"; t.lineWidth = 1; t.beginPath();
        for (const [x0, y0, x1, y1] of segs) { t.moveTo(x0, y0); t.lineTo(x1, y1); }
        t.stroke();
        p = this.g.createPattern(tile, "repeat");
      }
      this.patterns.set(kind, p);
    }
    return this.patterns.get(kind);
  }

  rowAtEvent(e) {
    const r = this.canvas.getBoundingClientRect(), y = e.clientY - r.top;
    return y < HEAD_H ? -1 : rowAt(y - HEAD_H, this.scroller.scrollTop, this.c ? this.c.n : 0);
  }

  onMove(e) {
    const i = this.rowAtEvent(e);
    if (i !== this.hover) { this.hover = i; this.draw(); }
    this.on.tip(e, i >= 0 ? pairTooltip(this.c, i) : null);
  }

  pick(i, add) {
    const key = rowKey(this.c, i);
    let next = new Set([key]);
    if (add) { next = new Set(this.selected); if (next.has(key)) next.delete(key); else next.add(key); }
    this.cursor = i;
    this.on.select([...next]);
  }

  onKey(e) {
    if (!this.c) return;
    if (e.key === "Enter" || e.key === " ") { if (this.cursor >= 0) this.pick(this.cursor, e.shiftKey); e.preventDefault(); return; }
    if (e.key === "Escape") { this.on.select([]); this.on.tip(null, null); e.preventDefault(); return; }
    const to = e.key === "n" || e.key === "N" ? nextMarked(this.c, this.cursor, e.key === "n" ? 1 : -1) : moveCursor(e.key, this.cursor, this.c.n, ROWS_SHOWN);
    if (to === null || to < 0) return;
    e.preventDefault();
    this.goTo(to);
  }

  // Move the cursor to row `to`, scrolled into view, its hover shown beside it.
  goTo(to) {
    if (to < 0) return;
    this.cursor = to;
    const top = to * ROW_H, s = this.scroller, was = s.scrollTop;
    if (top < s.scrollTop) s.scrollTop = top;
    else if (top + ROW_H > s.scrollTop + this.height - HEAD_H) s.scrollTop = top + ROW_H - (this.height - HEAD_H);
    this.ownScroll = s.scrollTop !== was;
    this.draw();
    const r = this.canvas.getBoundingClientRect();
    this.on.tip({ clientX: r.left + rowColumns(this.inner).tags[0], clientY: r.top + HEAD_H + top - s.scrollTop + ROW_H / 2 }, pairTooltip(this.c, to));
  }

  // Where a row is drawn (page px), scrolled into view; null when no row has `key` (for tests).
  locate(key) {
    if (!this.c || !this.c.rowOf.has(key)) return null;
    const i = this.c.rowOf.get(key), s = this.scroller;
    if (i * ROW_H < s.scrollTop || (i + 1) * ROW_H > s.scrollTop + this.height - HEAD_H) {
      const was = s.scrollTop;
      s.scrollTop = Math.max(0, (i - 2) * ROW_H);
      this.ownScroll = s.scrollTop !== was;
    }
    this.draw();
    const r = this.canvas.getBoundingClientRect(), cols = rowColumns(this.inner);
    return { row: i, x: r.left + cols.name[0] + 10, y: r.top + HEAD_H + i * ROW_H - s.scrollTop + ROW_H / 2, xa: r.left + cols.middle - 10, xb: r.left + cols.middle + 10 };
  }
}
