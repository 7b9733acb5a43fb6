// The overview under the lanes (DOM side): every storage as cells of a grid sized by bytes,
// coloured by how its views share it, the labelled storages numbered as in the PNG. Hover a cell:
// a tooltip names its storage; click it (or a label): the lanes scroll to that storage.
// The grid, hit-testing and texts are pure functions of geometry.js; styles in explorer.css.
import { decodeOverview, overviewGrid, overviewCodes, overviewEntryAt, overviewMarkers, overviewCounts, overviewSegments, overviewTargets, overviewTooltip } from "./geometry.js";

const M = 7;  // pixels around the grid: room for the markers on its edge cells

// The overview in `host` (a .tvz-ov element); `showTip(event, lines)` shows or (lines null) hides
// the shared tooltip; `pick(lane)` scrolls the lanes. `update(get, d)` takes a payload, `draw(width)`
// lays the grid out in that many pixels.
export class OverviewView {
  constructor(host, showTip, pick) {
    host.innerHTML = `<div class="tvz-ov-head"><span class="tvz-ov-title"></span><span class="tvz-ov-legend"></span>
      <span class="tvz-ov-hint">hover a cell: its storage · click: scroll the lanes to it</span></div>
      <div class="tvz-ov-scroll"><canvas></canvas></div><ol class="tvz-ov-labels"></ol>`;
    Object.assign(this, { host, showTip, pick, ov: null, targets: null, grid: null, drawnWidth: -1, tile: null, hovered: -1 });
    this.canvas = host.querySelector("canvas");
    this.g = this.canvas.getContext("2d");
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", (e) => { this.hover(-1); showTip(e, null); });
    this.canvas.addEventListener("click", (e) => this.onClick(e));
    host.tvz = this.hooks();
  }

  update(get, d) {
    const ov = this.ov = decodeOverview(get, d.C.names.overview_kinds);
    this.host.hidden = !ov;
    this.drawnWidth = -1; this.hovered = -1;
    if (!ov) return;
    this.targets = overviewTargets(ov, d);
    this.head();
    this.labels();
  }

  head() {
    const { ov, host } = this, n = ov.n.toLocaleString();
    host.querySelector(".tvz-ov-title").textContent =
      `every storage, in order: ${n} storage${ov.n === 1 ? "" : "s"}, cells sized by bytes`;
    const legend = host.querySelector(".tvz-ov-legend"), counts = overviewCounts(ov);
    legend.innerHTML = "";
    const key = (color, edge, text) => {
      const s = document.createElement("span");
      s.className = "tvz-cv-key";
      const i = document.createElement("i");
      i.style.background = color; i.style.borderColor = edge;
      s.append(i, text);
      legend.append(s);
    };
    counts.forEach((c, k) => { if (c) key(ov.colors[2 * k], ov.colors[2 * k + 1], `${ov.kinds[k]} ${c.toLocaleString()}`); });
    const unref = 2 * ov.kinds.length;
    if (ov.unrefBytes.some((u) => u > 0)) key(ov.colors[unref], ov.colors[unref + 1], "unreferenced bytes");
  }

  labels() {
    const list = this.host.querySelector(".tvz-ov-labels");
    list.innerHTML = "";
    this.ov.labelEntry.forEach((e, k) => {
      const li = document.createElement("li");
      li.textContent = this.ov.labels[k];
      li.addEventListener("click", () => { if (this.targets.lane[e] >= 0) this.pick(this.targets.lane[e]); });
      list.append(li);
    });
  }

  draw(width) {
    const { ov, canvas, host } = this;
    if (!ov || width === this.drawnWidth) return;
    const t0 = performance.now();
    this.drawnWidth = width;
    const grid = this.grid = overviewGrid(ov, width - 2 * M);
    const { cols, rows, px } = grid, dpr = window.devicePixelRatio || 1;
    const codes = overviewCodes(ov, cols), rgba = this.palette(), cells = new Uint32Array(cols * rows);
    for (let c = 0; c < codes.length; c++) cells[c] = rgba[codes[c]];
    const tile = this.tile = document.createElement("canvas");  // one pixel a cell, scaled up without smoothing
    tile.width = cols; tile.height = Math.max(rows, 1);
    tile.getContext("2d").putImageData(new ImageData(new Uint8ClampedArray(cells.buffer), cols, Math.max(rows, 1)), 0, 0);
    const w = cols * px + 2 * M, h = Math.max(rows, 1) * px + 2 * M;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    this.g.setTransform(dpr, 0, 0, dpr, M * dpr, M * dpr);
    this.paint();
    Object.assign(host.dataset, { cells: ov.total, cols, px, drawMs: (performance.now() - t0).toFixed(2) });
  }

  // The grid, the hovered storage's outline, the numbered markers.
  paint() {
    const { g, ov, grid } = this, { cols, rows, px } = grid;
    g.clearRect(-M, -M, cols * px + 2 * M, rows * px + 2 * M);
    g.imageSmoothingEnabled = false;
    g.drawImage(this.tile, 0, 0, cols * px, rows * px);
    if (this.hovered >= 0) {
      g.strokeStyle = "#111"; g.lineWidth = 1.5;
      for (const [x, y, w, h] of overviewSegments(ov, grid, this.hovered)) g.strokeRect(x - 0.75, y - 0.75, w + 1.5, h + 1.5);
    }
    g.font = "bold 9px sans-serif"; g.textAlign = "center"; g.textBaseline = "middle";
    for (const [k, x, y] of overviewMarkers(ov, grid)) {
      g.beginPath(); g.arc(x, y, 6.5, 0, 2 * Math.PI);
      g.fillStyle = "#fff"; g.fill(); g.strokeStyle = "#222"; g.lineWidth = 1; g.stroke();
      g.fillStyle = "#111"; g.fillText(String(k), x, y + 0.5);
    }
  }

  hover(k) {
    if (k === this.hovered || !this.grid) return;
    this.hovered = k;
    this.paint();
  }

  palette() {  // "#rrggbb" colours (and white) as little-endian RGBA words
    return [...this.ov.colors, (this.theme && this.theme.background) || "#ffffff"].map((c) => {
      const v = parseInt(c.slice(1), 16);
      return (0xff << 24 | (v & 0xff) << 16 | (v & 0xff00) | (v >> 16)) >>> 0;
    });
  }

  entryAt(e) {
    const r = this.canvas.getBoundingClientRect();
    return this.grid ? overviewEntryAt(this.ov, this.grid, e.clientX - r.left - M, e.clientY - r.top - M) : -1;
  }

  onMove(e) {
    const k = this.entryAt(e);
    this.hover(k);
    this.showTip(e, k < 0 ? null : overviewTooltip(this.ov, this.targets, k));
  }

  onClick(e) { const k = this.entryAt(e); if (k >= 0 && this.targets.lane[k] >= 0) this.pick(this.targets.lane[k]); }

  // For tests (Playwright): the storage under a client pixel; a client pixel of a storage's first
  // cell (whole numbers: mouse events floor them; a cell may be one pixel), and its colour there.
  hooks() {
    return {
      at: (x, y) => this.entryAt({ clientX: x, clientY: y }),
      cell: (storage) => {
        const { ov, grid } = this;
        if (!ov || !grid) return null;
        const e = Array.from(ov.storage).indexOf(storage);
        if (e < 0) return null;
        const r = Math.floor(ov.first[e] / grid.cols), c = ov.first[e] - r * grid.cols;
        const box = this.canvas.getBoundingClientRect(), mid = (grid.px - 1) / 2;
        return { x: Math.ceil(box.left + M + c * grid.px + mid), y: Math.ceil(box.top + M + r * grid.px + mid), lane: this.targets.lane[e], color: ov.colors[2 * ov.kind[e] + (e & 1)] };
      },
    };
  }
}
