// The explorer's load-check pane (anywidget front-end of explorer/loadpane.py): a loader picker,
// the verdict, the lists of names (a click on a model name selects it in the canvas: Python sets
// the explorer's one selection) and the fixes to paste. Every text goes in with textContent
// (Python sent it elided, control characters escaped); nothing is parsed as HTML. Pure helpers
// are exported for `node --test`; DOM code lives in render.
import { LOAD_MARKS } from "./loadmarks.js";

// The lists' kinds that the canvas marks, and with which glyph.
const MARKED = { untouched: "untouched", cast: "cast" };
const fmt = (n) => Number(n).toLocaleString("en-US");

// The verdict's class: "raises", "clean" (no raise, nothing to report, no narrowing cast),
// "warn" (no raise, but something is missing, unexpected, narrowed...) or "failed" (the check
// itself could not run).
export function verdictKind(s) {
  if (!s || !s.verdict) return "";
  if (s.raises) return "raises";
  if (s.verdict.startsWith("the check failed")) return "failed";
  return s.clean && !s.narrowing ? "clean" : "warn";
}

// A list's heading: its glyph when the canvas marks its names, its title and its count.
export function listHeading(lst) {
  const mark = LOAD_MARKS[MARKED[lst.kind]];
  return `${mark ? mark.glyph + " " : ""}${lst.title} (${fmt(lst.count)})`;
}

// The line under a list whose rows were capped ("" when all are listed).
export function moreLine(lst) {
  const hidden = lst.count - lst.rows.length;
  return hidden > 0 ? `… ${fmt(hidden)} more: print(tv.load_check(...)) lists them all` : "";
}

// What the canvas marks, in words ("" when nothing).
export function marksLine(s) {
  const parts = Object.entries((s && s.marks) || {}).filter(([k, n]) => n > 0 && LOAD_MARKS[k])
    .map(([k, n]) => `${LOAD_MARKS[k].glyph} ${fmt(n)} ${k}`);
  return parts.length ? `marked in the diagram: ${parts.join(" · ")}` : "";
}

// Whether row `row` of list `kind` names a selected tensor (`highlight`: [kind, row] pairs).
export function isLit(highlight, kind, row) {
  return (highlight || []).some(([k, r]) => k === kind && r === row);
}

// The message a click on a row sends to Python.
export function pickMessage(kind, row) { return { pick: [kind, row] }; }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function picker(model, s) {
  const label = el("label", "tvz-lp-pick", "loader ");
  const select = el("select");
  for (const [key, call] of s.choices || []) {
    const o = el("option", "", call);
    o.value = key;
    select.append(o);
  }
  select.value = s.choice;
  select.addEventListener("change", () => { model.set("choice", select.value); model.save_changes(); });
  label.append(select);
  return label;
}

function list(model, lst) {
  const box = el("section", "tvz-lp-list");
  box.dataset.kind = lst.kind;
  box.append(el("h4", "", listHeading(lst)));
  const ul = el("ul");
  lst.rows.forEach(([text, pickable], r) => {
    const li = el("li");
    li.dataset.row = r;
    if (pickable) {
      const b = el("button", "tvz-lp-name", text);
      b.type = "button";
      b.title = "select in the diagram";
      b.addEventListener("click", () => model.send(pickMessage(lst.kind, r)));
      li.append(b);
    } else li.append(el("code", "tvz-lp-text", text));
    ul.append(li);
  });
  box.append(ul);
  const more = moreLine(lst);
  if (more) box.append(el("div", "tvz-lp-more", more));
  return box;
}

function fix([title, code]) {
  const d = el("details", "tvz-lp-fix");
  d.open = true;
  d.append(el("summary", "", `fix: ${title}`), el("pre", "", code));
  return d;
}

function build(root, model) {
  const s = model.get("section") || {};
  root.replaceChildren();
  const head = el("div", "tvz-lp-head");
  head.append(picker(model, s), el("span", "tvz-lp-source", `source: ${s.source || ""}`));
  const verdict = el("div", `tvz-lp-verdict tvz-lp-${verdictKind(s)}`, s.verdict || "");
  root.append(head, verdict);
  const marks = marksLine(s);
  if (marks) root.append(el("div", "tvz-lp-marks", marks));
  const lists = el("div", "tvz-lp-lists");
  (s.lists || []).forEach((lst) => lists.append(list(model, lst)));
  root.append(lists);
  (s.fixes || []).forEach((f) => root.append(fix(f)));
  light(root, model.get("highlight"));
}

function light(root, highlight) {
  root.querySelectorAll(".tvz-lp-list").forEach((box) => {
    box.querySelectorAll("li").forEach((li) => li.classList.toggle("tvz-lp-lit", isLit(highlight, box.dataset.kind, Number(li.dataset.row))));
  });
}

function render({ model, el: host }) {
  const root = document.createElement("div");
  root.className = "tvz-lp";
  host.append(root);
  const draw = () => build(root, model), lit = () => light(root, model.get("highlight"));
  model.on("change:section", draw);
  model.on("change:highlight", lit);
  draw();
  return () => { model.off("change:section", draw); model.off("change:highlight", lit); };
}

export default { render };
