// The payload's vocabulary as Python sends it (tensorviz/explorer/payload.py VOCAB, the canvas's
// `vocab` trait): the tests name flags, lane kinds, marks and relations by it, as the canvas does.
// Python: $TENSORVIZ_PYTHON, else the project's .venv, else python3 (with numpy).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { vocabCodes } from "../../tensorviz/explorer/geometry.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const venv = root + ".venv/bin/python";
const python = process.env.TENSORVIZ_PYTHON || (existsSync(venv) ? venv : "python3");
const script = "import json; from tensorviz.explorer.payload import VOCAB; print(json.dumps(VOCAB))";

// What a Python snippet printed, parsed as JSON (run from the project root, this tensorviz).
export const py = (code) => JSON.parse(execFileSync(python, ["-c", code], {
  cwd: root, env: { ...process.env, PYTHONPATH: root }, encoding: "utf8",
}));
export const VOCAB = py(script);
export const C = vocabCodes(VOCAB);
// Lane kinds by name, e.g. lanes("storage", "view") -> Uint8Array of their codes.
export const lanes = (...names) => Uint8Array.from(names, (n) => C.lane[n]);
