// The calculators' forms: read the fields, call formulas.js, show the results (ADR-0008).
// Loaded by calc-loader.js when a placeholder nears the viewport. No arithmetic here: every number
// shown comes from formulas.js, whose functions tests/test_calculators.py checks against Python.
import { attentionCalc, memoryCalc, moeCalc, rooflineCalc, specCalc } from "./formulas.js";

const PASTE = "paste";
const CUSTOM = "custom";
const WEIGHTS = [["bf16", "BF16 (2 B per weight)"], ["fp8", "FP8 (W8: 1 B per linear weight)"], ["awq", "AWQ 4-bit, group 128"]];
const KV = [["bf16", "BF16 (2 B)"], ["fp8", "FP8 (1 B)"]];

// --- formatting (as infercourse.fmt writes numbers on the pages) ---
const count = (x) => Math.round(x).toLocaleString("en-US");
const fixed = (x, d = 1) => x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
const gb = (x) => `${fixed(x / 1e9, 2)} GB (${fixed(x / 2 ** 30, 2)} GiB)`;
const ms = (s) => `${fixed(s * 1e3, 3)} ms`;

// Each calculator: its URL prefix, its fields, how to read them into the pure function's input, its outputs.
function modelOptions(reg, paste) {
  const opts = Object.keys(reg.models).map((m) => [m, m]);
  return paste ? [...opts, [PASTE, "Paste a config.json…"]] : opts;
}
const gpuOptions = (reg, custom) => {
  const opts = Object.entries(reg.gpus).map(([k, g]) => [k, g.name]);
  return custom ? [...opts, [CUSTOM, "Custom memory…"]] : opts;
};

// The model and GPU pickers of a calculator over the registry's models and cards (no pasted config, no custom card).
const modelAndGpu = (reg, modelLabel = "Model") => [
  { key: "model", label: modelLabel, type: "select", options: modelOptions(reg, false), value: reg.defaults.model },
  { key: "gpu", label: "GPU", type: "select", options: gpuOptions(reg, false), value: reg.defaults.gpu },
];

const CALCS = {
  memory: {
    prefix: "m",
    title: "Memory and KV-cache capacity",
    fields: (reg) => [
      { key: "model", label: "Model", type: "select", options: modelOptions(reg, true), value: reg.defaults.model },
      { key: "config", label: "config.json (pasted)", type: "textarea", value: "", showIf: (v) => v.model === PASTE },
      { key: "weights", label: "Weight format", type: "select", options: WEIGHTS, value: "bf16" },
      { key: "kv", label: "KV-cache dtype", type: "select", options: KV, value: "bf16" },
      { key: "gpu", label: "GPU", type: "select", options: gpuOptions(reg, true), value: reg.defaults.gpu },
      { key: "memory_gib", label: "Device memory (GiB)", type: "number", value: "24", step: "any", showIf: (v) => v.gpu === CUSTOM },
      { key: "utilization", label: "gpu_memory_utilization", type: "number", value: String(reg.defaults.utilization), step: "0.01" },
      { key: "max_model_len", label: "max_model_len (tokens; empty: the model's max_position_embeddings)", type: "number", value: "", step: "1" },
      { key: "reserve_gib", label: "Reserve besides weights and KV (GiB; an assumption)", type: "number", value: String(reg.defaults.reserve_gib), step: "any" },
    ],
    input: (v, reg, errors) => ({
      config: configOf(v, reg, errors),
      weights: v.weights, kv: v.kv,
      gpu: v.gpu === CUSTOM ? null : v.gpu,
      memory_gib: v.gpu === CUSTOM ? num(v.memory_gib, "Device memory", errors, "memory_gib") : null,
      utilization: num(v.utilization, "gpu_memory_utilization", errors, "utilization"),
      max_model_len: v.max_model_len.trim() === "" ? null : num(v.max_model_len, "max_model_len", errors, "max_model_len"),
      reserve_gib: num(v.reserve_gib, "Reserve", errors, "reserve_gib"),
    }),
    compute: memoryCalc,
    errorField: { config: "config", weights: "weights", memory_gib: "memory_gib", utilization: "utilization", max_model_len: "max_model_len", reserve_gib: "reserve_gib" },
    rows: (o, v, reg) => [
      ["Attention", o.attention],
      ["Parameters N", o.params === null ? null : count(o.params)],
      ["Weights", o.weight_bytes === null ? null : gb(o.weight_bytes)],
      ["κ (KV bytes per token)", o.kappa === null ? null : `${count(o.kappa)} B`],
      ["Device memory", o.total_bytes === null ? null : gb(o.total_bytes)
        + (v.gpu !== CUSTOM && !reg.gpus[v.gpu].total_is_cuda ? ", the datasheet's figure read as GiB: an upper bound" : "")],
      ["KV budget", o.budget === null ? null : o.budget > 0 ? gb(o.budget)
        : `none: the weights and the reserve exceed total × utilization by ${gb(-o.budget)}`],
      ["KV capacity", o.tokens === null ? null : `${count(o.tokens)} tokens`],
      ["Maximum concurrency", o.concurrency === null ? null : `${fixed(o.concurrency, 2)}×`],
      ["Whole requests of max_model_len", o.sequences === null ? null : count(o.sequences)],
      ["Would vLLM start?", o.starts === null ? null : o.starts ? "yes" : `no: ${o.reason}`],
      ["Note", o.note || null],
    ],
  },
  roofline: {
    prefix: "r",
    title: "Roofline and decode floor",
    fields: (reg) => [
      ...modelAndGpu(reg),
      { key: "weights", label: "Weight format", type: "select", options: WEIGHTS, value: "bf16" },
      { key: "kv", label: "KV-cache dtype", type: "select", options: KV, value: "bf16" },
      { key: "batch", label: "Batch B (sequences)", type: "number", value: "1", step: "1" },
      { key: "context", label: "Context S (tokens per sequence)", type: "number", value: "1024", step: "1" },
    ],
    input: (v, reg, errors) => ({
      config: reg.models[v.model], gpu: v.gpu, weights: v.weights, kv: v.kv,
      batch: num(v.batch, "Batch", errors, "batch"), context: num(v.context, "Context", errors, "context"),
    }),
    compute: rooflineCalc,
    errorField: { config: "model", batch: "batch", context: "context" },
    rows: (o) => [
      ["Ridge point (the matmuls' peak)", o.ridge === null ? null : `${fixed(o.ridge, 1)} FLOP/B at ${fixed(o.peak_tflops, 1)} TFLOP/s`],
      ["Bytes per matmul weight b", o.b === null ? null : `${fixed(o.b, 3)} B`],
      ["Weight matmuls", o.linear_s === null ? null
        : `${fixed(o.linear_intensity, 1)} FLOP/B, ${o.linear_bound}-bound, floor ${ms(o.linear_s)}`],
      ["Attention", o.attention_s === null ? null
        : `${fixed(o.attention_intensity, 1)} FLOP/B, ${o.attention_bound}-bound, floor ${ms(o.attention_s)}`],
      ["Decode step floor", o.step_s === null ? null : ms(o.step_s)],
      ["Tokens/s ceiling (B / floor)", o.tokens_per_s === null ? null : count(o.tokens_per_s)],
      ["B* (matmuls reach the ridge)", o.bstar === null ? null : `${fixed(o.bstar, 1)} sequences`],
    ],
    figure: rooflineFigure,
  },
  attention: {
    prefix: "a",
    title: "Attention kernels",
    fields: (reg) => [
      ...modelAndGpu(reg),
      { key: "kv", label: "KV-cache dtype", type: "select", options: KV, value: "bf16" },
      { key: "batch", label: "Decode batch B (sequences)", type: "number", value: "1", step: "1" },
      { key: "context", label: "Tokens S (prompt, or context of a decode step)", type: "number", value: "32768", step: "1" },
    ],
    input: (v, reg, errors) => ({
      config: reg.models[v.model], gpu: v.gpu, kv: v.kv,
      batch: num(v.batch, "Batch", errors, "batch"), context: num(v.context, "Tokens", errors, "context"),
    }),
    compute: attentionCalc,
    errorField: { config: "model", batch: "batch", context: "context" },
    rows: (o) => [
      ["Score matrix, one head (S × S, BF16)", o.score_head === null ? null : gb(o.score_head)],
      ["Score matrices of one layer (every query head)", o.score_layer === null ? null : gb(o.score_layer)],
      ["Naive attention, one head: bytes through memory", o.naive === null ? null : gb(o.naive)],
      ["Tiled (FlashAttention), one head", o.tiled === null ? null
        : `${gb(o.once)} to ${gb(o.tiled)} (each tensor once; K and V re-read per tile)`],
      ["Decode: thread blocks (B × h_kv)", o.blocks === null ? null
        : o.sms === null ? count(o.blocks) : `${count(o.blocks)} for ${count(o.sms)} SMs (${fixed(o.busy * 100, 1)} % busy)`],
      ["Splits of the keys that fill the SMs", o.splits === null ? null : count(o.splits)],
      ["vLLM 0.26.0's attention backend (its default choice)", o.backend],
    ],
  },
  spec: {
    prefix: "s",
    title: "Speculative-decoding speedup",
    fields: (reg) => [
      ...modelAndGpu(reg, "Target model"),
      { key: "alpha", label: "Acceptance rate α (0 to 1)", type: "number", value: "0.7", step: "0.05" },
      { key: "k", label: "Draft tokens per step k", type: "number", value: "4", step: "1" },
      { key: "draft", label: "Draft model", type: "select", options: modelOptions(reg, false), value: reg.defaults.draft },
      { key: "batch", label: "Batch B (sequences)", type: "number", value: "1", step: "1" },
      { key: "context", label: "Context S (tokens per sequence)", type: "number", value: "1024", step: "1" },
    ],
    input: (v, reg, errors) => ({
      config: reg.models[v.model], gpu: v.gpu,
      alpha: num(v.alpha, "α", errors, "alpha"), k: num(v.k, "k", errors, "k"), draft: reg.models[v.draft],
      batch: num(v.batch, "Batch", errors, "batch"), context: num(v.context, "Context", errors, "context"),
    }),
    compute: specCalc,
    errorField: { config: "model", alpha: "alpha", k: "k", draft: "draft", batch: "batch", context: "context" },
    rows: (o) => [
      ["Expected tokens per target step", o.expected === null ? null : fixed(o.expected, 3)],
      ["Plain step floor τ", o.tau === null ? null : ms(o.tau)],
      ["Draft step floor τ_d", o.tau_d === null ? null : `${ms(o.tau_d)} (ρ = τ_d / τ = ${fixed(o.rho, 3)})`],
      ["Verification step floor τ_v", o.tau_v === null ? null : ms(o.tau_v)],
      ["Time per token with speculation", o.tpot === null ? null : ms(o.tpot)],
      ["Speedup σ", o.speedup === null ? null : `${fixed(o.speedup, 2)}×`],
    ],
  },
  moe: {
    prefix: "e",
    title: "Mixture-of-experts decode",
    fields: (reg) => [
      { key: "model", label: "Model (mixture of experts)", type: "select", options: moeModelOptions(reg), value: reg.defaults.moe_model },
      { key: "gpu", label: "GPU", type: "select", options: gpuOptions(reg, false), value: reg.defaults.gpu },
      { key: "batch", label: "Decode batch B (sequences)", type: "number", value: "1", step: "1" },
    ],
    input: (v, reg, errors) => ({ config: reg.models[v.model], gpu: v.gpu, batch: num(v.batch, "Batch", errors, "batch") }),
    compute: moeCalc,
    errorField: { config: "model", batch: "batch" },
    rows: (o) => [
      ["Experts per MoE layer, per token", o.experts === null ? null : `${count(o.experts)}, ${count(o.top_k)}`],
      ["Parameters: total, active per token", o.total === null ? null : `${count(o.total)}, ${count(o.active)}`],
      ["All weights in BF16", o.weight_bytes === null ? null
        : `${gb(o.weight_bytes)}: ${o.cards === 1 ? "fits one card's memory" : `fills ${count(o.cards)} of these cards' memory before any KV cache`}`],
      ["Experts the batch reaches per MoE layer (uniform routing: the most on average)", o.touched === null ? null
        : `${fixed(o.touched, 1)} (${fixed(o.touched_share * 100, 1)} % of them)`],
      ["Weights one decode step reads (BF16)", o.read_bytes === null ? null : `${gb(o.read_bytes)}; every expert: ${gb(o.all_bytes)}`],
      ["Weight matmuls' floor per step (weights only: add the KV cache's read)", o.linear_s === null ? null : ms(o.linear_s)],
      ["Batch at which the experts reach the ridge point (B* nₑ / kₑ)", o.ridge_batch === null ? null : `${count(o.ridge_batch)} sequences`],
    ],
  },
};

// The models a mixture-of-experts calculator takes: those whose config names routed experts.
const moeModelOptions = (reg) => Object.keys(reg.models)
  .filter((m) => reg.models[m].num_experts !== undefined || reg.models[m].n_routed_experts !== undefined)
  .map((m) => [m, m]);

// A number from a text field, or a message for the field (never NaN into the formulas). Only plain decimals:
// Number() would also read "0x10", "1e308", "Infinity"; full-width digits and "1_000" are refused here too.
// Each field's range is checked by formulas.js, with the message Python gives (calculators.LIMITS).
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)$/;
function num(text, label, errors, field) {
  const t = String(text).trim();
  if (t === "") { errors[field] = `${label}: enter a number`; return null; }
  if (!DECIMAL.test(t)) {
    errors[field] = `${label}: "${t}" is not a plain decimal number (digits and at most one point, like 1024 or 0.9)`;
    return null;
  }
  return Number(t);
}

function configOf(v, reg, errors) {
  if (v.model !== PASTE) return reg.models[v.model];
  let c;
  try { c = JSON.parse(v.config); } catch (e) {
    errors.config = `config.json is not valid JSON (${e.message}); paste the whole file`;
    return null;
  }
  if (c === null || typeof c !== "object" || Array.isArray(c)) {
    errors.config = "config.json must be a JSON object ({ ... }); paste the whole file";
    return null;
  }
  return c;
}

// --- the roofline figure: attainable FLOP/s against intensity, log-log, with both kernels marked ---
function rooflineFigure(o, v, reg) {
  const g = reg.gpus[v.gpu];
  // On a phone a 560-unit chart would shrink its 13-unit text to about 7 px: draw it 360 units wide there,
  // so the text stays at least 11 px (tests/test_calculators.py measures it at 390 px).
  const W = window.matchMedia("(max-width: 44.9375em)").matches ? 360 : 560, H = 300, L = 62, R = 14, T = 14, B = 44;
  const x0 = 0, x1 = 4, bw = g.bandwidth_gb_s * 1e9; // 10^0 .. 10^4 FLOP/B
  const y1 = Math.ceil(Math.log10(Math.max(o.peak_tflops, g.bf16_dense_tflops) * 1e12));
  const y0 = y1 - 4;
  const px = (i) => L + (Math.log10(i) - x0) / (x1 - x0) * (W - L - R);
  const py = (f) => T + (y1 - Math.log10(f)) / (y1 - y0) * (H - T - B);
  const roof = (peak) => {
    const ridge = peak * 1e12 / bw;
    return `M${px(10 ** x0)},${py(10 ** x0 * bw)} L${px(ridge)},${py(peak * 1e12)} L${px(10 ** x1)},${py(peak * 1e12)}`;
  };
  const point = (i, label, cls, peak) => {
    const y = Math.min(peak * 1e12, i * bw);
    const cx = px(Math.min(Math.max(i, 10 ** x0), 10 ** x1));
    return `<circle class="${cls}" cx="${cx}" cy="${py(y)}" r="5"/>`
      + `<text x="${cx + 8}" y="${py(y) + 16}">${label}</text>`;
  };
  const ticksX = [0, 1, 2, 3, 4].map((e) => `<text x="${px(10 ** e)}" y="${H - B + 18}" `
    + `text-anchor="${e === x1 ? "end" : "middle"}">${count(10 ** e)}</text>`).join("");
  const peakLabel = (peak, what) => `<text x="${W - R}" y="${py(peak * 1e12) - 6}" text-anchor="end">${what} ${count(peak)} TFLOP/s</text>`;
  const ticksY = [0, 1, 2, 3, 4].map((k) => y0 + k).map((e) => `<text x="${L - 6}" y="${py(10 ** e) + 4}" text-anchor="end">${fixed(10 ** e / 1e12, e >= 12 ? 0 : 2)}</text>`).join("");
  const fp8 = o.peak_tflops !== g.bf16_dense_tflops;
  const dashed = fp8 ? `<path class="ic-roof ic-roof--bf16" d="${roof(g.bf16_dense_tflops)}"/>` + peakLabel(g.bf16_dense_tflops, "BF16") : "";
  const desc = `Roofline of the ${g.name}: ridge point ${fixed(o.ridge, 1)} FLOP/B; the weight matmuls at `
    + `${fixed(o.linear_intensity, 1)} FLOP/B are ${o.linear_bound}-bound, attention at ${fixed(o.attention_intensity, 1)} FLOP/B is ${o.attention_bound}-bound.`;
  return `<svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${desc}" class="ic-roofline">`
    + `<path class="ic-axis" d="M${L},${T} V${H - B} H${W - R}"/>${dashed}<path class="ic-roof" d="${roof(o.peak_tflops)}"/>`
    + peakLabel(o.peak_tflops, fp8 ? "FP8" : "BF16")
    + point(o.linear_intensity, "matmuls", "ic-pt ic-pt--lin", o.peak_tflops)
    + point(o.attention_intensity, "attention", "ic-pt ic-pt--att", g.bf16_dense_tflops)
    + ticksX + ticksY
    + `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">intensity (FLOP/B)</text>`
    + `<text transform="translate(14 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">TFLOP/s</text></svg>`;
}

// --- the form ---
const esc = (s) => String(s).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]);

export function mount(el, reg) {
  const calc = CALCS[el.dataset.calc];
  if (!calc) throw new Error(`unknown calculator ${el.dataset.calc}`);
  const id = (k) => `ic-${calc.prefix}-${k}`;
  const fields = calc.fields(reg);
  const params = new URLSearchParams(location.search);
  const values = {};
  for (const f of fields) {
    const fromUrl = params.get(`${calc.prefix}.${f.key}`);
    const allowed = f.type !== "select" || f.options.some(([k]) => k === fromUrl);
    values[f.key] = fromUrl !== null && allowed ? fromUrl : f.value;
  }
  const control = (f) => {
    const common = `id="${id(f.key)}" name="${f.key}" aria-describedby="${id(f.key)}-msg"`;
    if (f.type === "select") {
      const opts = f.options.map(([k, label]) => `<option value="${esc(k)}"${k === values[f.key] ? " selected" : ""}>${esc(label)}</option>`);
      return `<select ${common}>${opts.join("")}</select>`;
    }
    if (f.type === "textarea") return `<textarea ${common} rows="6" spellcheck="false">${esc(values[f.key])}</textarea>`;
    return `<input ${common} type="text" inputmode="decimal" autocomplete="off" value="${esc(values[f.key])}">`;
  };
  const hadFocus = el.contains(document.activeElement); // the load button: focus moves on to the first field
  el.innerHTML = `<form class="ic-form" novalidate aria-label="${esc(calc.title)}">`
    + fields.map((f) => `<div class="ic-field" data-key="${f.key}"><label for="${id(f.key)}">${esc(f.label)}</label>`
      + `${control(f)}<p class="ic-msg" id="${id(f.key)}-msg"></p></div>`).join("")
    + `</form><div class="ic-out" role="status" aria-live="polite" aria-atomic="true"></div><div class="ic-fig"></div>`;
  el.dataset.state = "ready";
  const form = el.querySelector("form");
  const out = el.querySelector(".ic-out");
  const fig = el.querySelector(".ic-fig");

  const update = () => {
    for (const f of fields) values[f.key] = form.elements[f.key].value;
    for (const f of fields) el.querySelector(`.ic-field[data-key="${f.key}"]`).hidden = f.showIf ? !f.showIf(values) : false;
    const errors = {};
    const inp = calc.input(values, reg, errors);
    const result = Object.keys(errors).length ? { errors } : calc.compute(inp, reg);
    const byField = {};
    for (const [k, msg] of Object.entries(result.errors)) byField[calc.errorField[k] ?? k] = msg;
    for (const f of fields) {
      const msg = byField[f.key] ?? "";
      el.querySelector(`#${id(f.key)}-msg`).textContent = msg;
      form.elements[f.key].setAttribute("aria-invalid", msg ? "true" : "false");
    }
    if (Object.keys(result.errors).length && !("attention" in result && result.kappa !== null)) {
      out.innerHTML = `<p>Fix the field marked above to see the results.</p>`;
    } else {
      const rows = calc.rows(result, values, reg).filter(([, v]) => v !== null);
      out.innerHTML = `<dl>${rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("")}</dl>`
        + (Object.keys(result.errors).length ? `<p>Fix the field marked above to see the rest.</p>` : "");
    }
    fig.innerHTML = calc.figure && !Object.keys(result.errors).length ? calc.figure(result, values, reg) : "";
    const url = new URL(location.href);
    for (const f of fields) {
      const key = `${calc.prefix}.${f.key}`;
      if (values[f.key] === f.value || (f.showIf && !f.showIf(values))) url.searchParams.delete(key);
      else url.searchParams.set(key, values[f.key]);
    }
    history.replaceState(history.state, "", url);
  };
  form.addEventListener("input", update);
  form.addEventListener("change", update);
  form.addEventListener("submit", (e) => e.preventDefault());
  update();
  if (hadFocus) form.elements[0].focus();
}
