// The explorer's colours from JupyterLab's theme (light, dark, high contrast): the --jp-* CSS
// variables resolved on the page, blended to opaque "#rrggbb" and checked for contrast. Pure but
// for resolveColor (which asks the page), so `node --test` imports this file as is.
import { contrast, inkOn } from "./treemap.js";

// What the canvases paint, the --jp-* variable each reads and its light-theme fallback.
export const THEME_VARS = {
  background: ["--jp-layout-color0", "#ffffff"], panel: ["--jp-layout-color2", "#eeeeee"],
  text: ["--jp-ui-font-color1", "#212121"], muted: ["--jp-ui-font-color2", "#616161"],
  border: ["--jp-border-color1", "#bdbdbd"], accent: ["--jp-brand-color1", "#1976d2"],
};
// Least contrast kept against the background: text 4.5:1 (WCAG AA), lines and outlines 3:1.
export const TEXT_CONTRAST = 4.5, LINE_CONTRAST = 3;

// "rgb(1, 2, 3)" / "rgba(1, 2, 3, 0.5)" / "#rrggbb" -> [r, g, b, a], or null.
export function parseColor(text) {
  if (!text) return null;
  const s = text.trim(), hex = /^#([0-9a-f]{6})$/i.exec(s);
  if (hex) { const v = parseInt(hex[1], 16); return [(v >> 16) & 255, (v >> 8) & 255, v & 255, 1]; }
  const m = /^rgba?\(([^)]*)\)$/i.exec(s);
  if (!m) return null;
  const p = m[1].split(/[,\s/]+/).filter(Boolean).map(Number);
  return p.length >= 3 && p.every((x) => !Number.isNaN(x)) ? [p[0], p[1], p[2], p.length > 3 ? p[3] : 1] : null;
}

const hex2 = (x) => Math.round(Math.max(0, Math.min(255, x))).toString(16).padStart(2, "0");

// [r, g, b, a] over an opaque "#rrggbb" -> "#rrggbb".
export function blend(rgba, under) {
  const u = parseColor(under), a = rgba[3];
  return "#" + [0, 1, 2].map((i) => hex2(rgba[i] * a + u[i] * (1 - a))).join("");
}

// The colours to paint with: `get(name)` gives a variable's resolved [r, g, b, a] (null when the
// page does not define it). Each is opaque over the background; text that would read under
// TEXT_CONTRAST (and the accent, which marks, under LINE_CONTRAST) against the background or the panel becomes
// black or white, whichever reads better.
export function themeColors(get) {
  const out = {}, bgRaw = get(THEME_VARS.background[0]);
  out.background = bgRaw ? blend(bgRaw, "#ffffff") : THEME_VARS.background[1];
  for (const [key, [name, fallback]] of Object.entries(THEME_VARS)) {
    if (key === "background") continue;
    const raw = get(name);
    out[key] = raw ? blend(raw, out.background) : fallback;
  }
  for (const [key, least] of [["text", TEXT_CONTRAST], ["muted", TEXT_CONTRAST], ["accent", LINE_CONTRAST]]) {
    const on = key === "text" ? [out.background, out.panel] : [out.background];
    if (on.some((b) => contrast(out[key], b) < least)) out[key] = inkOn(out.background);
  }
  return out;
}

// A --jp-* variable as the page resolves it on `el`, as [r, g, b, a] (null when undefined).
export function resolveColor(el, name) {
  const raw = getComputedStyle(el).getPropertyValue(name).trim();
  if (!raw) return null;
  const probe = document.createElement("span");
  probe.style.color = raw; probe.style.display = "none";
  el.append(probe);
  const out = parseColor(getComputedStyle(probe).color);
  probe.remove();
  return out;
}
