// The model map (anywidget front-end of explorer/modelmap.py): the cells Python picked, laid out
// as a nested squarified treemap (treemap.js) on a HiDPI canvas. Area = bytes counted once;
// hatched = bytes read here but counted under another name (a tie). Hover: the cell's tooltip;
// click: `picked` names it (Python opens the map there and filters the diagram to it).
import { mapLayout, cellAt, inkOn } from "./treemap.js";
import { formatBytes, fitName, clipName, setUnits } from "./geometry.js";
import { themeColors, resolveColor } from "./theme.js";

const HEAD = 15;

class MapView {
  constructor(model, el) {
    this.model = model;
    this.root = document.createElement("div");
    this.root.className = "tvz-mv";
    this.root.innerHTML = `<div class="tvz-mv-head"><a class="tvz-mv-up" href="#" role="button">↑ whole model</a>
      <span class="tvz-mv-caption"></span></div><canvas></canvas><div class="tvz-mv-tip"></div>`;
    el.append(this.root);
    const $ = (s) => this.root.querySelector(s);
    Object.assign(this, { canvas: $("canvas"), tip: $(".tvz-mv-tip"), up: $(".tvz-mv-up"), captionBox: $(".tvz-mv-caption"), hover: -1, clicks: 0 });
    this.g = this.canvas.getContext("2d");
    this.root.tvz = { cell: (path) => this.cellBox(path), theme: () => this.theme, ink: (k) => this.ink[k] };
    this.load();
  }

  load() {
    this.cells = this.model.get("cells") || [];
    this.colors = this.model.get("colors") || ["#4477aa"];
    setUnits(this.model.get("units") || []);
    this.captionBox.textContent = this.model.get("caption") || "";
    this.up.hidden = !this.cells.length || this.cells[0][0] === "";
    this.resize();
  }

  resize() {
    const dpr = window.devicePixelRatio || 1;
    this.width = Math.max(200, Math.floor(this.root.clientWidth || 600));
    this.height = Math.round(Math.min(300, Math.max(150, this.width * 0.3)));
    this.canvas.width = Math.round(this.width * dpr); this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.width = this.width + "px"; this.canvas.style.height = this.height + "px";
    this.g.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.layout = mapLayout(this.cells, this.width, this.height, HEAD);
    this.draw();
  }

  // Each top-level cell's colour (its children inherit it), as the diagram's palette.
  fills() {
    const out = new Array(this.cells.length).fill(this.colors[0]);
    this.cells.forEach((c, k) => { if (c[2] === 0) out[k] = this.colors[(k - 1) % this.colors.length]; else if (c[2] > 0) out[k] = out[c[2]]; });
    return out;
  }

  draw() {
    const { g, cells, layout, width, height } = this, fills = this.fills();
    if (!this.themed) this.theme = themeColors((name) => resolveColor(this.root, name));
    this.themed = this.root.isConnected;  // read once on the page (before, nothing resolves)
    this.ink = cells.map((_, k) => inkOn(fills[k]));
    g.fillStyle = this.theme.background; g.fillRect(0, 0, width, height);
    g.font = "11px sans-serif"; g.textBaseline = "middle";
    cells.forEach((c, k) => {
      const r = layout.rects[k];
      if (!k || !r || r[2] < 1 || r[3] < 1) return;
      if (layout.kids[k].length) this.drawFrame(k, r);
      else this.drawLeaf(k, r, fills[k]);
    });
    if (this.hover > 0 && layout.rects[this.hover]) {
      const [x, y, w, h] = layout.rects[this.hover];
      g.lineWidth = 2; g.strokeStyle = this.theme.text; g.strokeRect(x + 1, y + 1, w - 2, h - 2); g.lineWidth = 1;
    }
  }

  drawFrame(k, [x, y, w, h]) {
    const { g, cells, theme } = this, c = cells[k];
    g.fillStyle = theme.panel; g.fillRect(x, y, w, h);
    g.strokeStyle = theme.border; g.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
    if (this.layout.strip[k]) {
      g.fillStyle = theme.text;
      const text = `${c[1]} · ${formatBytes(c[3])}`;
      g.fillText(fitName(text, w - 8, (t) => g.measureText(t).width), x + 4, y + HEAD / 2 + 0.5);
    }
  }

  drawLeaf(k, [x, y, w, h], fill) {
    const { g, cells, theme } = this, c = cells[k], total = c[3] + c[4], own = total ? (w * c[3]) / total : w;
    g.fillStyle = fill; g.fillRect(x, y, own, h);
    if (own < w) {  // the tied part: the colour, lighter, under dark stripes
      g.globalAlpha = 0.45; g.fillRect(x + own, y, w - own, h); g.globalAlpha = 1;
      g.save(); g.beginPath(); g.rect(x + own, y, w - own, h); g.clip();
      g.strokeStyle = this.ink[k]; g.lineWidth = 1.5; g.beginPath();
      for (let s = -h; s < w - own; s += 6) { g.moveTo(x + own + s, y + h); g.lineTo(x + own + s + h, y); }
      g.stroke(); g.restore(); g.lineWidth = 1;
    }
    g.strokeStyle = theme.background; g.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1);
    if (w < 24 || h < 13) return;
    const text = `${c[1]} · ${formatBytes(total)}`, fit = fitName(text, w - 6, (t) => g.measureText(t).width);
    if (!fit) return;
    g.fillStyle = own < w && c[3] === 0 ? theme.text : this.ink[k];
    if (own < w && c[3] === 0) { const tw = g.measureText(fit).width; g.fillStyle = theme.background; g.fillRect(x + 2, y + 3, tw + 4, 13); g.fillStyle = theme.text; }
    g.fillText(fit, x + 4, y + Math.min(h / 2, 10) + 0.5);
  }

  tooltip(k) {
    const c = this.cells[k], out = [clipName(c[0] || c[1])];
    if (c[5]) out.push(c[5]);
    const total = this.cells[0][3] || 1;
    out.push(`${formatBytes(c[3])} counted here (${(100 * c[3] / total).toFixed(1)}% of the map)`);
    if (c[4]) out.push(`${formatBytes(c[4])} more read here, counted under another name (tied: hatched)`);
    const note = (this.model.get("notes") || {})[c[0]];  // compare mode: its match in b
    if (note) out.push(note);
    if (c[0]) out.push(this.layout.kids[k].length ? "click: open it and show its tensors" : "click: show it in the diagram");
    return out;
  }

  cellBox(path) {
    const k = this.cells.findIndex((c) => c[0] === path), r = k >= 0 ? this.layout.rects[k] : null;
    if (!r) return null;
    const b = this.canvas.getBoundingClientRect();
    return { x: b.left + r[0] + Math.min(r[2] / 2, 30), y: b.top + r[1] + Math.min(r[3] / 2, 8), w: r[2], h: r[3], label: this.cells[k][1] };
  }

  point(e) { const r = this.canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }

  onMove(e) {
    const k = cellAt(this.layout, ...this.point(e));
    if (k !== this.hover) { this.hover = k; this.draw(); }
    if (k <= 0) { this.tip.style.display = "none"; return; }
    const tip = this.tip, box = this.root.getBoundingClientRect(), lines = this.tooltip(k);
    tip.innerHTML = "";
    const b = document.createElement("b"); b.textContent = lines[0]; tip.append(b, "\n" + lines.slice(1).join("\n"));
    tip.style.display = "block";
    tip.style.left = Math.min(e.clientX - box.left + 14, Math.max(0, box.width - tip.offsetWidth - 4)) + "px";
    tip.style.top = e.clientY - box.top + 16 + "px";
  }

  pick(path) { this.model.set("picked", [path, ++this.clicks]); this.model.save_changes(); }

  listen() {
    const ro = new ResizeObserver(() => {
      if (Math.floor(this.root.clientWidth) !== this.width) this.resize(); else if (!this.themed) this.draw();
    });
    ro.observe(this.root);
    const onCells = () => this.load();
    const themed = new MutationObserver(() => { this.themed = false; this.draw(); });
    themed.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
    this.model.on("change:cells", onCells); this.model.on("change:caption", onCells);
    const move = (e) => this.onMove(e), leave = () => { this.tip.style.display = "none"; this.hover = -1; this.draw(); };
    const click = (e) => { const k = cellAt(this.layout, ...this.point(e)); if (k > 0 && this.cells[k][0]) this.pick(this.cells[k][0]); };
    const up = (e) => { e.preventDefault(); this.pick(""); };
    this.canvas.addEventListener("mousemove", move); this.canvas.addEventListener("mouseleave", leave);
    this.canvas.addEventListener("click", click); this.up.addEventListener("click", up);
    return () => {
      ro.disconnect(); themed.disconnect(); this.model.off("change:cells", onCells); this.model.off("change:caption", onCells);
      this.canvas.removeEventListener("mousemove", move); this.canvas.removeEventListener("mouseleave", leave);
      this.canvas.removeEventListener("click", click); this.up.removeEventListener("click", up);
    };
  }
}

function render({ model, el }) {
  return new MapView(model, el).listen();
}

export default { render };
