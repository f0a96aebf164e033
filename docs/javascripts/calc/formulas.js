// The calculators' arithmetic: a line-for-line port of the course's Python formulas (ADR-0008).
// Reference: src/infercourse/calculators.py, which composes transformer.py, memory.py and roofline.py.
// Each function below names the Python function it mirrors; keep the order of operations the same
// (floating-point results then agree bit for bit) and the error messages the same (tests compare both:
// tests/test_calculators.py). Facts (model configs, GPU figures, vLLM defaults) are not here: they come
// from the registry, exported at build time to assets/calc/registry.json (hooks/calculators.py).

const GIB = 2 ** 30;
export const KV_DTYPE_BYTES = { bf16: 2, fp8: 1 };
export const WEIGHT_DTYPES = ["bf16", "fp8", "awq"];

// Python's repr() of the values a config or a form can hold, for error messages.
export function repr(v) {
  if (v === undefined || v === null) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "string") return `'${v}'`;
  if (typeof v === "number") {
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
    return String(v);
  }
  return JSON.stringify(v);
}

const isInt = (v) => typeof v === "number" && Number.isInteger(v);
const commas = (x) => x.toLocaleString("en-US"); // Python's f"{x:,}" for whole numbers
// transformer.CONFIG_SIZE_MAX, which need() checks: set by useLimits() from the registry each calculator is given
let configSizeMax = Infinity;
const isNum = (v) => typeof v === "number" && !Number.isNaN(v);
const has = (c, k) => c[k] !== undefined && c[k] !== null;

// CPython's float floor division (float_floor_div): Math.floor(a / b) can differ when a / b rounds up.
function floorDiv(a, b) {
  const mod = a % b;
  let div = (a - mod) / b;
  if (mod && (b < 0) !== (mod < 0)) div -= 1;
  if (!div) return 0;
  let floordiv = Math.floor(div);
  if (div - floordiv > 0.5) floordiv += 1;
  return floordiv;
}
const intDiv = (a, b) => Math.floor(a / b); // both whole and far below 2^53
const ceilDiv = (a, b) => -intDiv(-a, b);

// --- transformer.py ---------------------------------------------------------------------------
function need(c, key) { // _need
  if (!(key in c)) throw new Error(`the config.json has no ${key}: use the model's whole config.json`);
  const v = c[key];
  if (!isInt(v) || !(v > 0 && v <= configSizeMax)) {
    throw new Error(`config['${key}'] must be a positive integer up to ${commas(configSizeMax)}, got ${repr(v)}`);
  }
  return v;
}

export function headDim(c) { // head_dim
  if (has(c, "head_dim")) return need(c, "head_dim");
  const hidden = need(c, "hidden_size"), heads = need(c, "num_attention_heads");
  if (hidden % heads) throw new Error(`hidden_size ${hidden} is not divisible by num_attention_heads ${heads}; set head_dim`);
  return intDiv(hidden, heads);
}

export function paramBreakdown(c) { // param_breakdown
  for (const key of ["kv_lora_rank", "n_routed_experts", "num_experts"]) {
    if (has(c, key)) {
      throw new Error(`config sets '${key}': MLA and mixture-of-experts models are not covered by this dense count`);
    }
  }
  const hidden = need(c, "hidden_size"), layers = need(c, "num_hidden_layers");
  const vocab = need(c, "vocab_size"), inter = need(c, "intermediate_size");
  const dh = headDim(c);
  const qOut = need(c, "num_attention_heads") * dh, kvOut = need(c, "num_key_value_heads") * dh;
  const arch = c.model_type;
  const qkvBias = arch === "qwen2" || Boolean(c.attention_bias ?? false);
  let attention = hidden * qOut + 2 * hidden * kvOut + qOut * hidden;
  if (qkvBias) attention += qOut + 2 * kvOut;
  const normsPerLayer = 2 * hidden + (arch === "qwen3" ? 2 * dh : 0);
  const embedding = vocab * hidden;
  return {
    embedding,
    attention: layers * attention,
    mlp: layers * 3 * hidden * inter,
    norms: layers * normsPerLayer + hidden,
    lm_head: c.tie_word_embeddings ? 0 : embedding,
  };
}

export function paramCount(c) { // param_count
  if (isMoe(c)) return moeParamBreakdown(c).total;
  const p = paramBreakdown(c);
  return p.embedding + p.attention + p.mlp + p.norms + p.lm_head;
}

function linearWeightCount(c) { // linear_weight_count
  if (isMoe(c)) {
    const p = moeParamBreakdown(c);
    return p.attention + p.dense_mlp + p.shared_experts + p.routed_experts;
  }
  const hidden = need(c, "hidden_size"), dh = headDim(c);
  const qOut = need(c, "num_attention_heads") * dh, kvOut = need(c, "num_key_value_heads") * dh;
  const perLayer = 2 * hidden * qOut + 2 * hidden * kvOut + 3 * hidden * need(c, "intermediate_size");
  return need(c, "num_hidden_layers") * perLayer;
}

const isMla = (c) => has(c, "kv_lora_rank");

// --- transformer.py, lesson 7B: mixture of experts ---
const isMoe = (c) => has(c, "num_experts") || has(c, "n_routed_experts"); // is_moe

function moeExperts(c) { // moe_experts
  if (!isMoe(c)) throw new Error("not a mixture-of-experts config: it sets neither num_experts nor n_routed_experts");
  const experts = need(c, has(c, "num_experts") ? "num_experts" : "n_routed_experts");
  const topK = need(c, "num_experts_per_tok");
  if (topK > experts) throw new Error(`num_experts_per_tok ${topK} exceeds the ${experts} routed experts`);
  return [experts, topK];
}

function moeLayerIndices(c) { // moe_layer_indices
  moeExperts(c);
  const layers = need(c, "num_hidden_layers");
  const all = [...Array(layers).keys()];
  if (has(c, "first_k_dense_replace") || has(c, "moe_layer_freq")) {
    const first = c.first_k_dense_replace ? need(c, "first_k_dense_replace") : 0;
    const freq = has(c, "moe_layer_freq") ? need(c, "moe_layer_freq") : 1;
    return all.filter((i) => i >= first && i % freq === 0);
  }
  const step = has(c, "decoder_sparse_step") ? need(c, "decoder_sparse_step") : 1;
  const v = c.mlp_only_layers; // Python's `config.get("mlp_only_layers") or []`
  const dense = !v || (Array.isArray(v) && !v.length) ? [] : v;
  if (!Array.isArray(dense) || !dense.every(isInt)) {
    throw new Error(`config['mlp_only_layers'] must be a list of layer numbers, got ${repr(dense)}`);
  }
  return all.filter((i) => !dense.includes(i) && (i + 1) % step === 0);
}

function mlaAttentionParams(c) { // _mla_attention_params
  const hidden = need(c, "hidden_size"), heads = need(c, "num_attention_heads");
  const nope = need(c, "qk_nope_head_dim"), rope = need(c, "qk_rope_head_dim");
  const latent = need(c, "kv_lora_rank"), vDim = need(c, "v_head_dim");
  const qWidth = heads * (nope + rope);
  let qLora = has(c, "q_lora_rank") ? c.q_lora_rank : null;
  if (qLora !== null) qLora = need(c, "q_lora_rank");
  const q = qLora === null ? hidden * qWidth : hidden * qLora + qLora + qLora * qWidth;
  const kv = hidden * (latent + rope) + latent + latent * heads * (nope + vDim);
  return q + kv + heads * vDim * hidden;
}

export function moeParamBreakdown(c) { // moe_param_breakdown
  const [experts, topK] = moeExperts(c);
  const hidden = need(c, "hidden_size"), layers = need(c, "num_hidden_layers"), vocab = need(c, "vocab_size");
  const moeLayers = moeLayerIndices(c).length;
  const expertWidth = need(c, has(c, "moe_intermediate_size") ? "moe_intermediate_size" : "intermediate_size");
  const expert = 3 * hidden * expertWidth;
  const arch = c.model_type;
  let attention;
  if (isMla(c)) {
    attention = mlaAttentionParams(c);
  } else {
    const dh = headDim(c);
    const qOut = need(c, "num_attention_heads") * dh, kvOut = need(c, "num_key_value_heads") * dh;
    attention = 2 * hidden * qOut + 2 * hidden * kvOut;
    attention += ({ qwen3_moe: 2 * dh, olmoe: qOut + kvOut })[arch] ?? 0;
  }
  const denseLayers = layers - moeLayers;
  const parts = {
    embedding: vocab * hidden,
    lm_head: c.tie_word_embeddings ? 0 : vocab * hidden,
    attention: layers * attention,
    dense_mlp: denseLayers ? denseLayers * 3 * hidden * need(c, "intermediate_size") : 0,
    router: moeLayers * (hidden * experts + (c.topk_method === "noaux_tc" ? experts : 0)),
    shared_experts: moeLayers * (c.n_shared_experts ? need(c, "n_shared_experts") : 0) * expert,
    routed_experts: moeLayers * experts * expert,
    norms: layers * 2 * hidden + hidden,
  };
  const total = Object.values(parts).reduce((a, b) => a + b, 0);
  return { ...parts, expert, moe_layers: moeLayers, total, active: total - moeLayers * (experts - topK) * expert };
}

export function attentionKind(c) { // attention_kind
  if (isMla(c)) return "MLA";
  const heads = need(c, "num_attention_heads"), kv = need(c, "num_key_value_heads");
  if (heads % kv) {
    throw new Error(`num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kv}; `
      + "each KV head must serve a whole group of query heads");
  }
  if (kv === heads) return "MHA";
  return kv === 1 ? "MQA" : "GQA";
}

function kvBytesPerLayerToken(c, b) { // kv_bytes_per_layer_token
  if (isMla(c)) return (need(c, "kv_lora_rank") + need(c, "qk_rope_head_dim")) * b;
  return 2 * need(c, "num_key_value_heads") * headDim(c) * b;
}

export function kvBytesPerToken(c, b = 2) { // kv_bytes_per_token
  return need(c, "num_hidden_layers") * kvBytesPerLayerToken(c, b);
}

export function slidingWindowLayers(c) { // sliding_window_layers
  if (!has(c, "sliding_window") || c.use_sliding_window === false) return 0;
  need(c, "sliding_window");
  if (has(c, "layer_types")) return c.layer_types.filter((k) => k === "sliding_attention").length;
  return need(c, "num_hidden_layers");
}

function quantisedBytes(c, perLinear) { // _bytes_with_quantised_linears
  const q = linearWeightCount(c);
  return q * perLinear + 2 * (paramCount(c) - q);
}

export function weightBytes(c, dtype, awqGroup) { // calculators.weight_bytes
  if (dtype === "bf16") return paramCount(c) * 2;
  if (dtype === "fp8") return Math.trunc(quantisedBytes(c, 1));
  if (dtype === "awq") return quantisedBytes(c, 0.5 + (2 + 0.5) / awqGroup);
  throw new Error(`weight dtype must be one of ${WEIGHT_DTYPES.join(", ")}, got ${repr(dtype)}`);
}

function attentionFlopsPerToken(c, ctx) { // attention_flops_per_token
  if (!isInt(ctx) || ctx <= 0) throw new Error(`context_len must be a positive whole number of tokens, got ${repr(ctx)}`);
  if (isMla(c)) {
    throw new Error("config sets 'kv_lora_rank': MLA's attention products (over the shared latent, key size "
      + "qk_nope_head_dim + qk_rope_head_dim) are not modelled by this count");
  }
  const heads = need(c, "num_attention_heads"); // Python's order, so a config missing both names the same one
  return 4 * need(c, "num_hidden_layers") * heads * headDim(c) * ctx;
}

// --- memory.py --------------------------------------------------------------------------------
function kvCapacityTokens(budget, kappa, block) { // kv_capacity_tokens
  return floorDiv(budget, kappa * block) * block;
}

function maxSequences(budget, kappa, ctx, block) { // max_sequences
  return intDiv(intDiv(kvCapacityTokens(budget, kappa, block), block), ceilDiv(ctx, block));
}

// --- roofline.py ------------------------------------------------------------------------------
const ridgePoint = (g, peak) => (peak ?? g.bf16_dense_tflops) * 1e12 / (g.bandwidth_gb_s * 1e9);
const timeFloor = (g, flops, bytes, peak) =>
  Math.max(flops / ((peak ?? g.bf16_dense_tflops) * 1e12), bytes / (g.bandwidth_gb_s * 1e9));

function matmulParams(c) { // matmul_params
  const p = paramBreakdown(c);
  return p.embedding + p.attention + p.mlp + p.norms + p.lm_head - p.embedding - p.lm_head + c.vocab_size * c.hidden_size;
}

function decodeKernelFloors(g, c, ctx, batch, b = 2, kvB = 2, peak = null) { // decode_kernel_floors
  const m = matmulParams(c);
  const linear = timeFloor(g, 2 * m * batch, m * b, peak);
  const attention = timeFloor(g, batch * attentionFlopsPerToken(c, ctx), batch * kvBytesPerToken(c, kvB) * ctx);
  return [linear, attention];
}

function expectedTokensPerStep(alpha, k) { // expected_tokens_per_step
  if (!isNum(alpha) || !(alpha >= 0 && alpha <= 1)) {
    throw new Error(`alpha (acceptance rate) must be a number from 0 to 1, got ${repr(alpha)}`);
  }
  if (!isInt(k) || k < 1) throw new Error(`k (draft tokens per step) must be a whole number >= 1, got ${repr(k)}`);
  return alpha === 1 ? k + 1 : (1 - alpha ** (k + 1)) / (1 - alpha);
}

// --- calculators.py ---------------------------------------------------------------------------
// calculators.LIMITS as exported with the registry (reg.limits); config sizes go to need()
function useLimits(reg) {
  configSizeMax = reg.limits.config_size;
  return reg.limits;
}
const real = (v) => isNum(v) && Number.isFinite(v); // _real
function whole(name, v, high) { // _whole (high: LIMITS[field])
  if (!isInt(v) || !(v >= 1 && v <= high)) throw new Error(`${name} must be a whole number from 1 to ${commas(high)}, got ${repr(v)}`);
}
const attempt = (errors, field, fn) => {
  try { fn(); return true; } catch (e) { errors[field] = e.message; return false; }
};

// memory_calc. `inp`: {config, weights, kv, gpu, memory_gib (null: the GPU's), utilization, max_model_len
// (null: max_position_embeddings), reserve_gib}; `reg`: the exported registry.
export function memoryCalc(inp, reg) {
  const c = inp.config;
  const out = { attention: null, params: null, weight_bytes: null, kappa: null, total_bytes: null, budget: null,
    tokens: null, concurrency: null, sequences: null, starts: null, reason: "", note: "", errors: {} };
  const errors = out.errors;
  const lim = useLimits(reg);
  const configOk = attempt(errors, "config", () => {
    out.attention = attentionKind(c);
    out.kappa = kvBytesPerToken(c, KV_DTYPE_BYTES[inp.kv]);
    slidingWindowLayers(c);
  });
  if (configOk) {
    attempt(errors, "weights", () => {
      out.params = paramCount(c);
      out.weight_bytes = weightBytes(c, inp.weights, reg.defaults.awq_group_size);
    });
  }
  attempt(errors, "memory_gib", () => {
    if (inp.memory_gib !== null && inp.memory_gib !== undefined) {
      if (!real(inp.memory_gib) || !(inp.memory_gib > 0 && inp.memory_gib <= lim.memory_gib)) {
        throw new Error(`memory_gib must be a positive number of GiB up to ${commas(lim.memory_gib)}, got ${repr(inp.memory_gib)}`);
      }
      out.total_bytes = inp.memory_gib * GIB;
    } else {
      out.total_bytes = reg.gpus[inp.gpu ?? reg.defaults.gpu].total_bytes;
    }
  });
  const u = inp.utilization;
  if (!(isNum(u) && u > 0 && u <= 1)) errors.utilization = `gpu_memory_utilization must be in (0, 1], got ${repr(u)}`;
  const reserve = inp.reserve_gib;
  if (!(real(reserve) && reserve >= 0 && reserve <= lim.reserve_gib)) {
    errors.reserve_gib = `reserve must be a non-negative number of GiB up to ${commas(lim.reserve_gib)}, got ${repr(reserve)}`;
  }
  let mml = inp.max_model_len;
  if (mml === null || mml === undefined) mml = c.max_position_embeddings ?? null;
  if (mml !== null || !("config" in errors)) attempt(errors, "max_model_len", () => { // no second message for a bad config
    try { whole("max_model_len", mml, lim.max_model_len); } catch (e) {
      throw new Error(e.message + (mml !== null ? "" : " (the config has no max_position_embeddings)"));
    }
  });
  if (Object.keys(errors).length) return out;
  const budget = out.total_bytes * u - out.weight_bytes - reserve * GIB;
  out.budget = budget;
  if (budget <= 0) {
    Object.assign(out, { tokens: 0, concurrency: 0, sequences: 0, starts: false });
    out.reason = "No available memory for the cache blocks: the weights and the reserve take all of "
      + "total × gpu_memory_utilization";
    return out;
  }
  const windowed = slidingWindowLayers(c);
  if (windowed) {
    out.note = `${windowed} of ${c.num_hidden_layers} layers use a sliding window: these counts treat every `
      + "layer as full attention, so the capacity is a lower bound and a refusal may not happen in vLLM, "
      + "which frees the blocks that leave the window";
  }
  const block = reg.defaults.block_size;
  const tokens = kvCapacityTokens(budget, out.kappa, block);
  out.tokens = tokens;
  out.concurrency = tokens ? tokens / mml : 0;
  out.sequences = maxSequences(budget, out.kappa, mml, block);
  const limit = c.max_position_embeddings ?? null;
  if (limit !== null && mml > limit) {
    out.starts = false;
    out.reason = `User-specified max_model_len (${mml}) is greater than the derived max_model_len `
      + `(max_position_embeddings=${limit})`;
  } else if (out.sequences < 1) {
    out.starts = false;
    out.reason = `the KV cache cannot hold one request of max_model_len (${mml}) tokens`;
  } else {
    out.starts = true;
  }
  return out;
}

// roofline_calc. `inp`: {config, gpu, weights, kv, batch, context}.
export function rooflineCalc(inp, reg) {
  const c = inp.config;
  const out = { b: null, ridge: null, ridge_bf16: null, peak_tflops: null, linear_intensity: null,
    attention_intensity: null, linear_s: null, attention_s: null, step_s: null, linear_bound: null,
    attention_bound: null, tokens_per_s: null, bstar: null, errors: {} };
  const errors = out.errors;
  const lim = useLimits(reg);
  attempt(errors, "batch", () => whole("batch", inp.batch, lim.batch));
  attempt(errors, "context", () => whole("context", inp.context, lim.context));
  let b;
  attempt(errors, "config", () => {
    attentionFlopsPerToken(c, 1);
    const checkpoint = weightBytes(c, inp.weights, reg.defaults.awq_group_size); // validates the config first
    const table = c.tie_word_embeddings ? 0 : 2 * c.vocab_size * c.hidden_size;
    b = (checkpoint - table) / matmulParams(c);
  });
  if (Object.keys(errors).length) return out;
  const g = reg.gpus[inp.gpu];
  const peak = inp.weights === "fp8" && g.fp8_dense_tflops !== null ? g.fp8_dense_tflops : null;
  const kvB = KV_DTYPE_BYTES[inp.kv];
  const [linear, attention] = decodeKernelFloors(g, c, inp.context, inp.batch, b, kvB, peak);
  const ridge = ridgePoint(g, peak), ridgeBf16 = ridgePoint(g, null);
  const iLin = 2 * inp.batch / b;
  const iAtt = attentionFlopsPerToken(c, 1) / kvBytesPerToken(c, kvB);
  Object.assign(out, {
    b, ridge, ridge_bf16: ridgeBf16, peak_tflops: peak ?? g.bf16_dense_tflops,
    linear_intensity: iLin, attention_intensity: iAtt, linear_s: linear, attention_s: attention,
    step_s: linear + attention, linear_bound: iLin > ridge ? "compute" : "memory",
    attention_bound: iAtt > ridgeBf16 ? "compute" : "memory",
    tokens_per_s: inp.batch / (linear + attention), bstar: ridgePoint(g, peak) * b / 2,
  });
  return out;
}

// spec_calc. `inp`: {config, gpu, alpha, k, batch, context, draft} (draft: the draft model's config).
export function specCalc(inp, reg) {
  const c = inp.config;
  const out = {
    expected: null, tau: null, tau_d: null, tau_v: null, rho: null, step_s: null, tpot: null, speedup: null, errors: {},
  };
  const errors = out.errors;
  const lim = useLimits(reg);
  attempt(errors, "alpha", () => expectedTokensPerStep(inp.alpha, 1));
  attempt(errors, "k", () => whole("k (draft tokens per step)", inp.k, lim.k));
  attempt(errors, "batch", () => whole("batch", inp.batch, lim.batch));
  attempt(errors, "context", () => whole("context", inp.context, lim.context));
  const g = reg.gpus[inp.gpu];
  let tau, tauV, tauD;
  if (!Object.keys(errors).length) {
    attempt(errors, "config", () => { // spec_step_floors(g, c, c, context, batch, k): the plain and verify steps
      const tokens = inp.batch * (inp.k + 1);
      const [linear] = decodeKernelFloors(g, c, inp.context, tokens);
      const attention = timeFloor(g, tokens * attentionFlopsPerToken(c, inp.context),
        inp.batch * kvBytesPerToken(c, 2) * inp.context, null);
      const [l1, a1] = decodeKernelFloors(g, c, inp.context, inp.batch);
      tau = l1 + a1;
      tauV = linear + attention;
    });
    attempt(errors, "draft", () => { // decode_step_floor(g, draft, context, batch)
      const [l, a] = decodeKernelFloors(g, inp.draft, inp.context, inp.batch);
      tauD = l + a;
    });
  }
  if (Object.keys(errors).length) return out;
  const expected = expectedTokensPerStep(inp.alpha, inp.k);
  const step = inp.k * tauD + tauV;
  Object.assign(out, {
    expected, tau, tau_d: tauD, tau_v: tauV, rho: tauD / tau, step_s: step, tpot: step / expected,
    speedup: expected * tau / (inp.k * tauD + tauV),
  });
  return out;
}

// infercourse.labs.attention_backends: PRIORITY, backend_accepts, predicted_backend (vLLM 0.26.0's rule for a
// model without MLA on a CUDA card; `cap` is [major, minor]; `kv` is "auto" or "fp8"; the default choice only).
const PRIORITY = ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"];
const capAtLeast = (cap, major, minor) => cap[0] > major || (cap[0] === major && cap[1] >= minor);
function backendAccepts(backend, cap, kv) { // backend_accepts
  if (backend === "FLASH_ATTN") return capAtLeast(cap, 8, 0) && (kv === "auto" || cap[0] === 9);
  if (backend === "FLASHINFER") return capAtLeast(cap, 8, 0) && !capAtLeast(cap, 12, 2);
  return true;
}
function predictedBackend(cap, kv) { // predicted_backend
  const order = cap[0] === 10 ? ["FLASHINFER", "FLASH_ATTN", ...PRIORITY.slice(2)] : PRIORITY;
  return order.find((b) => backendAccepts(b, cap, kv));
}

// roofline.attention_kernel_bytes: one head, `s` queries over `s` keys.
function attentionKernelBytes(s, d, b, tile) {
  return { naive: b * (4 * s * d + 4 * s * s), tiled: b * (2 * s * d + 2 * s * d * ceilDiv(s, tile)), once: 4 * s * d * b };
}

// attention_calc. `inp`: {config, gpu, kv, batch, context}.
export function attentionCalc(inp, reg) {
  const c = inp.config;
  const out = {
    score_head: null, score_layer: null, naive: null, tiled: null, once: null, blocks: null, sms: null, busy: null,
    splits: null, backend: null, errors: {},
  };
  const errors = out.errors;
  const lim = useLimits(reg);
  attempt(errors, "batch", () => whole("batch", inp.batch, lim.batch));
  attempt(errors, "context", () => whole("context", inp.context, lim.context));
  let dH;
  attempt(errors, "config", () => {
    attentionFlopsPerToken(c, 1);
    dH = headDim(c);
  });
  if (Object.keys(errors).length) return out;
  const kernel = attentionKernelBytes(inp.context, dH, 2, reg.defaults.attention_tile);
  const blocks = inp.batch * c.num_key_value_heads;
  const g = reg.gpus[inp.gpu];
  Object.assign(out, {
    score_head: inp.context * inp.context * 2,
    score_layer: c.num_attention_heads * inp.context * inp.context * 2,
    naive: kernel.naive, tiled: kernel.tiled, once: kernel.once, blocks, sms: g.sms,
    busy: g.sms === null ? null : Math.min(1.0, blocks / g.sms),
    splits: g.sms === null ? null : ceilDiv(g.sms, blocks),
    backend: g.capability === null ? null : predictedBackend(g.capability, inp.kv === "fp8" ? "fp8" : "auto"),
  });
  return out;
}

// --- roofline.py, lesson 7B: mixture of experts ---
function expectedExpertsTouched(experts, topK, tokens) { // expected_experts_touched
  return experts * (1 - (1 - topK / experts) ** tokens);
}

function moeStepParams(c, touched) { // moe_step_params: [read, multiplied]
  const [, topK] = moeExperts(c);
  const p = moeParamBreakdown(c);
  const head = c.vocab_size * c.hidden_size;
  const always = p.total - p.routed_experts - p.embedding - p.lm_head + head;
  const perLayer = p.moe_layers * p.expert;
  return [always + touched * perLayer, always + topK * perLayer];
}

// calculators.moe_calc. `inp`: {config, gpu, batch}.
export function moeCalc(inp, reg) {
  const c = inp.config;
  const out = {
    experts: null, top_k: null, total: null, active: null, weight_bytes: null, cards: null, touched: null,
    touched_share: null, read_bytes: null, all_bytes: null, linear_s: null, ridge_batch: null, errors: {},
  };
  const errors = out.errors;
  const lim = useLimits(reg);
  attempt(errors, "batch", () => whole("batch", inp.batch, lim.batch));
  let experts, topK, parts;
  attempt(errors, "config", () => {
    [experts, topK] = moeExperts(c);
    parts = moeParamBreakdown(c);
  });
  if (Object.keys(errors).length) return out;
  const g = reg.gpus[inp.gpu];
  const touched = expectedExpertsTouched(experts, topK, inp.batch);
  const [read, multiplied] = moeStepParams(c, touched);
  Object.assign(out, {
    experts, top_k: topK, total: parts.total, active: parts.active, weight_bytes: 2 * parts.total,
    cards: Math.ceil(2 * parts.total / g.total_bytes), touched, touched_share: touched / experts,
    read_bytes: 2 * read, all_bytes: 2 * moeStepParams(c, experts)[0],
    linear_s: timeFloor(g, 2 * multiplied * inp.batch, 2 * read, null),
    ridge_batch: ridgePoint(g, null) * 2 / 2 * experts / topK,
  });
  return out;
}
