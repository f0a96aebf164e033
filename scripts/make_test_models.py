"""Build the labs' test models offline, deterministically (no model hub needed).

Run with the lab environment's Python (it has torch, transformers and tokenizers):

    .venv-labs/bin/python scripts/make_test_models.py [--out .cache/models]

Makes five folders under ``--out``:

``tiny-qwen2``
    A randomly initialised Qwen2 (2 layers, hidden 256, 4 heads of size 64, 2 KV heads,
    intermediate 512, bf16, ``max_position_embeddings`` 8192) with a 512-token byte-level BPE
    tokenizer trained here on Python's own standard-library sources. CI runs every lab on a
    real vLLM CPU engine against it. Head size 64 because the CPU attention refuses 16.

``tiny-qwen2-awq``
    The tiny Qwen2 as a 4-bit AWQ checkpoint (lab 3A): its linear layers' weights replaced by random
    packed 4-bit values (``qweight``, int32 [in, out / 8]), zero points (``qzeros``, int32
    [in / 128, out / 8]) and fp16 scales ([in / 128, out]), group size 128; everything else is the
    tiny model's, in fp16. Random, not a quantisation of the tiny weights: what it checks is bytes.

``tiny-qwen3-moe``
    A randomly initialised Qwen3-MoE (lab 7B): the tiny Qwen2's sizes (2 layers, hidden 256, 4 heads of
    size 64, 2 KV heads, the same tokenizer), each MLP replaced by 16 experts of width 128 with 2 routed per
    token (E / k = 8, as OLMoE-1B-7B's 64 / 8), bf16. ``config.json`` spells the expert count
    ``num_experts``, as the public Qwen3-MoE files do (transformers 5 writes ``num_local_experts``).

``qwen2.5-7b-instruct-config``
    The exact ``config.json`` of ``Qwen/Qwen2.5-7B-Instruct`` (values from the project's
    registry, other fields as in the public file) and a STAND-IN tokenizer (the tiny one above,
    vocabulary 512, not Qwen's 151,646-token tokenizer). No weights: run it with
    ``--load-format dummy`` on a GPU box without hub access; the architecture, shapes and hence
    timings are the real model's, the weights are random.

``olmoe-1b-7b-0924-instruct-config``
    The same for lab 7B's model, ``allenai/OLMoE-1B-7B-0924-Instruct`` (64 experts, 8 per token).

Determinism: torch and Python RNGs are seeded, the training corpus is a fixed, sorted list of
stdlib files, and the tokenizer trainer runs single-threaded. ``manifest.json`` in each folder
records the corpus's SHA-256 and every file's SHA-256, so two builds can be compared. (A
different Python 3.11 patch release ships slightly different stdlib text and so may train a
different tokenizer; the manifest shows it.)

Exit status 1 with a one-line message on bad input (unwritable folder, missing package).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the registry: the 7B config's values live there once

TINY = "tiny-qwen2"
TINY_AWQ = "tiny-qwen2-awq"
TINY_MOE = "tiny-qwen3-moe"
AWQ_GROUP = 128
AWQ_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
CONFIG_ONLY = ("Qwen/Qwen2.5-7B-Instruct", "allenai/OLMoE-1B-7B-0924-Instruct", "Qwen/Qwen2.5-0.5B-Instruct")
"""Registry models written as config-only folders (``registry.config_only_folder``): the course's, lab 7B's and
lab 8A's."""
SEED = 0
VOCAB = 512
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Fixed list of stdlib modules whose source trains the tokenizer (about 1 MB of Python text).
CORPUS_FILES = [
    "argparse.py",
    "ast.py",
    "calendar.py",
    "collections/__init__.py",
    "csv.py",
    "dataclasses.py",
    "datetime.py",
    "difflib.py",
    "enum.py",
    "functools.py",
    "inspect.py",
    "json/decoder.py",
    "json/encoder.py",
    "logging/__init__.py",
    "pathlib.py",
    "pprint.py",
    "random.py",
    "shutil.py",
    "statistics.py",
    "string.py",
    "textwrap.py",
    "typing.py",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Fields of the public Qwen/Qwen2.5-7B-Instruct config.json that the registry does not hold
# (the registry holds the ones the course's arithmetic reads; those win).
QWEN25_7B_OTHER_FIELDS = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "max_window_layers": 28,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "sliding_window": 131072,
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
}
QWEN25_05B_OTHER_FIELDS = {  # Qwen/Qwen2.5-0.5B-Instruct: the 7B's, but these (public copies of its config.json)
    **QWEN25_7B_OTHER_FIELDS,
    "max_window_layers": 21,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
}
OLMOE_OTHER_FIELDS = {  # allenai/OLMoE-1B-7B-0924-Instruct, as public copies of its config.json show them
    "architectures": ["OlmoeForCausalLM"],
    "attention_bias": False,
    "clip_qkv": None,
    "hidden_act": "silu",
    "norm_topk_prob": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "bos_token_id": None,
    "eos_token_id": 50279,
    "pad_token_id": 1,
    "torch_dtype": "bfloat16",
}


def _die(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def corpus() -> tuple[list[str], str]:
    """The training texts (one per stdlib file, in a fixed order) and their combined SHA-256."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts, digest = [], hashlib.sha256()
    for name in CORPUS_FILES:
        path = stdlib / name
        if not path.is_file():
            _die(f"stdlib file {path} not found; run with a CPython 3.11 that ships its sources")
        text = path.read_text(encoding="utf-8")
        texts.append(text)
        digest.update(text.encode())
    return texts, digest.hexdigest()


def train_tokenizer(texts: list[str]):
    """A byte-level BPE tokenizer with VOCAB ids (256 byte symbols, 3 specials, merges), as transformers' fast
    tokenizer."""
    os.environ["RAYON_NUM_THREADS"] = "1"  # the trainer's merge order must not depend on threads
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if tok.get_vocab_size() != VOCAB:
        _die(f"tokenizer trained to {tok.get_vocab_size()} ids, wanted {VOCAB}; the corpus is too small")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],  # so all_special_ids lists every special token
        unk_token=None,
        model_max_length=32768,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _save_random(out: Path, tokenizer, config_class: str, model_class: str, **sizes) -> None:
    """Initialise transformers' ``model_class`` with the tiny models' common sizes (vocabulary 512, 2 layers,
    hidden 256, 4 heads, 2 KV heads: head size 64, as the CPU attention refuses 16) and ``sizes``, from the seeded
    RNGs, in bf16, and save it with its tokenizer into ``out``."""
    import torch
    import transformers

    random.seed(SEED)
    torch.manual_seed(SEED)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    config = getattr(transformers, config_class)(
        vocab_size=VOCAB,
        hidden_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        **ids,
        **sizes,
    )
    config.dtype = torch.bfloat16  # written to config.json as "dtype"
    model = getattr(transformers, model_class)(config).to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(**ids, do_sample=False)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def save_tiny(out: Path, tokenizer) -> None:
    """Randomly initialise the tiny Qwen2 (seeded) and save it with its tokenizer into ``out``."""
    _save_random(out, tokenizer, "Qwen2Config", "Qwen2ForCausalLM", intermediate_size=512, rope_theta=1_000_000.0)


def save_tiny_awq(out: Path, tokenizer) -> None:
    """Write the tiny Qwen2 (already saved beside ``out``) as an AWQ checkpoint with random 4-bit weights (seeded)."""
    import torch
    from safetensors.torch import load_file, save_file

    tiny = out.parent / TINY
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((tiny / "config.json").read_text())
    config["dtype"] = "float16"  # vLLM's AWQ kernels take fp16 activations
    config["quantization_config"] = {
        "quant_method": "awq",
        "bits": 4,
        "group_size": AWQ_GROUP,
        "zero_point": True,
        "version": "gemm",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text((tiny / "generation_config.json").read_text())
    generator = torch.Generator().manual_seed(SEED)
    tensors = {}
    for name, tensor in sorted(load_file(tiny / "model.safetensors").items()):
        base = name.removesuffix(".weight")
        if name.endswith(".weight") and base.rsplit(".", 1)[-1] in AWQ_LINEARS:
            n_out, n_in = tensor.shape  # torch's Linear stores [out, in]; AWQ packs 8 values per int32 along out
            packed = (n_in, n_out // 8)
            tensors[base + ".qweight"] = torch.randint(
                -(2**31), 2**31 - 1, packed, dtype=torch.int32, generator=generator
            )
            tensors[base + ".qzeros"] = torch.randint(
                -(2**31), 2**31 - 1, (n_in // AWQ_GROUP, n_out // 8), dtype=torch.int32, generator=generator
            )
            tensors[base + ".scales"] = (torch.rand((n_in // AWQ_GROUP, n_out), generator=generator) * 0.01).half()
        else:
            tensors[name] = tensor.half()
    save_file(tensors, out / "model.safetensors")
    tokenizer.save_pretrained(out)


def save_tiny_moe(out: Path, tokenizer) -> None:
    """Randomly initialise the tiny Qwen3-MoE (seeded) and save it with its tokenizer into ``out``."""
    _save_random(
        out,
        tokenizer,
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        intermediate_size=512,
        moe_intermediate_size=128,
        num_experts=16,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        norm_topk_prob=True,
        head_dim=64,
    )
    written = json.loads((out / "config.json").read_text())
    if "num_local_experts" in written:  # the public spelling, which every vLLM and transformers version reads
        written["num_experts"] = written.pop("num_local_experts")
    (out / "config.json").write_text(json.dumps(dict(sorted(written.items())), indent=2) + "\n")


OTHER_FIELDS = {  # the public config.json's fields the registry does not keep (the formulas do not read them)
    "Qwen/Qwen2.5-7B-Instruct": QWEN25_7B_OTHER_FIELDS,
    "allenai/OLMoE-1B-7B-0924-Instruct": OLMOE_OTHER_FIELDS,
    "Qwen/Qwen2.5-0.5B-Instruct": QWEN25_05B_OTHER_FIELDS,
}
GENERATION_EOS = {"Qwen/Qwen2.5-7B-Instruct": [151645, 151643], "Qwen/Qwen2.5-0.5B-Instruct": [151645, 151643]}
"""End-of-sequence ids of a public generation_config.json where they differ from its config.json's."""


def save_config_only(out: Path, tokenizer, name: str) -> None:
    """Write registry model ``name``'s config.json (no weights) and the stand-in tokenizer into ``out``."""
    from infercourse.registry import model

    config = dict(OTHER_FIELDS[name])
    config.update(model(name).config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(dict(sorted(config.items())), indent=2) + "\n")
    eos = GENERATION_EOS.get(name, config["eos_token_id"])
    ids = {"bos_token_id": config["bos_token_id"], "eos_token_id": eos, "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(ids, indent=2) + "\n")
    tokenizer.save_pretrained(out)
    (out / "README.md").write_text(
        f"# {name}: config only\n\n"
        "`config.json` is the public model's. The tokenizer is a STAND-IN (a 512-token byte-level BPE\n"
        "trained locally), not the model's. There are no weights: use `--load-format dummy`.\n"
    )


def write_manifest(out: Path, extra: dict) -> None:
    """Record the SHA-256 of every file in ``out`` (and ``extra``) in ``out/manifest.json``."""
    files = {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    (out / "manifest.json").write_text(json.dumps({**extra, "files": files}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "models", help="parent folder of the models")
    args = parser.parse_args(argv)
    try:
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        _die(
            f"{exc.name} is not installed; run this with the lab environment: "
            f"make labenv, then .venv-labs/bin/python {sys.argv[0]}"
        )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _die(f"cannot create {args.out}: {exc.strerror}")
    texts, corpus_sha = corpus()
    tokenizer = train_tokenizer(texts)
    info = {"seed": SEED, "corpus_files": CORPUS_FILES, "corpus_sha256": corpus_sha, "python": sys.version.split()[0]}
    from infercourse.registry import config_only_folder

    saves = [(TINY, save_tiny), (TINY_AWQ, save_tiny_awq), (TINY_MOE, save_tiny_moe)]
    saves += [(config_only_folder(m), lambda out, tok, m=m: save_config_only(out, tok, m)) for m in CONFIG_ONLY]
    for name, save in saves:
        out = args.out / name
        save(out, tokenizer)
        write_manifest(out, info)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
