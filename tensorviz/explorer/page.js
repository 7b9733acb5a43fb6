// The exported page's stand-in for a kernel (tv.export_html): a model with anywidget's interface
// (get, set, on, off, save_changes) over the state Python wrote into the page, so canvas.js runs
// unchanged with no kernel and no network. What the kernel would answer is precomputed: the
// relations of each view to the others (sparse, per view), and a payload per grouping.
import canvas from "./canvas.js";

// base64 -> DataView (what anywidget hands canvas.js for a bytes trait).
export function bytes(b64) {
  const bin = atob(b64 || ""), u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  return new DataView(u.buffer);
}

// Each drawn view's relation to the selection, as explorer/payload.py's relations() computes it:
// per selected view its precomputed (view, code) pairs; the closest relation (lowest code) wins,
// the selected views are "selected". `rel` = {first: Uint32Array(n+1), to: Uint32Array, code: Uint8Array}.
export function relationsOf(rel, n, selected, selectedCode) {
  const code = new Uint8Array(n), to = new Uint32Array(n);
  for (const s of selected) {
    for (let k = rel.first[s]; k < rel.first[s + 1]; k++) {
      const j = rel.to[k], c = rel.code[k];
      if (code[j] === 0 || c < code[j]) { code[j] = c; to[j] = s; }
    }
  }
  for (const s of selected) { code[s] = selectedCode; to[s] = s; }
  return { code, to };
}

export class PageModel {
  constructor(state) { this.state = state; this.handlers = new Map(); this.changed = new Set(); }
  get(key) { return this.state[key]; }
  set(key, value) { this.state[key] = value; this.fire(key); }
  on(event, f) { if (!this.handlers.has(event)) this.handlers.set(event, new Set()); this.handlers.get(event).add(f); }
  off(event, f) { this.handlers.get(event)?.delete(f); }
  save_changes() {}
  fire(key) { for (const f of [...(this.handlers.get(`change:${key}`) || [])]) f(); }
}

function decodeRelations(r) {
  const col = (b64, T) => { const v = bytes(b64); return new T(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength)); };
  return { first: col(r.first, Uint32Array), to: col(r.to, Uint32Array), code: col(r.code, Uint8Array) };
}

// One grouping's model state: its payload (frame as a DataView) and an empty selection.
function stateOf(view, vocab) {
  return { vocab, payload: { ...view.payload, frame: bytes(view.payload.frame) }, selected: [], zoom: [],
    relations: { code: new DataView(new ArrayBuffer(0)), to: new DataView(new ArrayBuffer(0)) } };
}

// Draw the explorer into `el` from the page's JSON (`data`: vocab, views by grouping, first grouping);
// the grouping buttons under `buttons` switch views. Returns the model (for tests).
export function mount(el, buttons, data) {
  let current = data.views[data.first];
  let rel = decodeRelations(current.relations);
  const model = new PageModel(stateOf(current, data.vocab));
  const selectedCode = data.vocab.relations.indexOf("selected");
  const names = () => current.names;
  model.on("change:selected", () => {
    const index = new Map(names().map((n, i) => [n, i]));
    const picked = model.get("selected").filter((n) => index.has(n)).map((n) => index.get(n));
    const { code, to } = relationsOf(rel, names().length, picked, selectedCode);
    model.set("relations", { code: new DataView(code.buffer), to: new DataView(to.buffer) });
  });
  canvas.render({ model, el });
  for (const b of buttons) {
    b.addEventListener("click", () => {
      current = data.views[b.dataset.by]; rel = decodeRelations(current.relations);
      buttons.forEach((o) => o.classList.toggle("tvz-on", o === b));
      const next = stateOf(current, data.vocab);
      model.state.selected = []; model.state.zoom = []; model.state.relations = next.relations;
      model.set("payload", next.payload);
    });
  }
  return model;
}
