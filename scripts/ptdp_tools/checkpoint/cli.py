"""The `ptdp_checkpoint.py` command: `export-hf CHECKPOINT_DIR OUT_DIR` writes a checkpoint (its
shards gathered into one model) as a Hugging Face model folder (hf_export.py). `ptdp export-hf`
(experiments/cmd_export_hf.cpp) runs it with PTDP_EXPORT_PROG=ptdp: its errors are then ptdp's,
"ptdp: error: ..." and exit code 2."""

from __future__ import annotations

import json
import os
import sys

from ptdp_tools.checkpoint import hf_export
from ptdp_tools.checkpoint.reader import CheckpointError, describe_sharding, read_all_shards
from ptdp_tools.cli import Parser

PROG = "ptdp_checkpoint.py"


def gpt2_special_ids(vocab_file: str) -> dict:
    """bos and eos of GPT-2's vocab.json: both <|endoftext|> (GPT-2's convention)."""
    try:
        with open(vocab_file, encoding="utf-8") as f:
            vocab = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"--vocab-file {vocab_file}: cannot read GPT-2's vocab.json ({e})") from None
    if not isinstance(vocab, dict) or not isinstance(vocab.get("<|endoftext|>"), int):
        raise CheckpointError(f"--vocab-file {vocab_file}: holds no <|endoftext|> id (not GPT-2's vocab.json?)")
    return {"bos_token_id": vocab["<|endoftext|>"], "eos_token_id": vocab["<|endoftext|>"]}


def special_ids(a, p) -> dict:
    """bos_token_id and eos_token_id from the flags (None where unknown)."""
    ids = gpt2_special_ids(a.vocab_file) if a.vocab_file else {}
    for key in ("bos_token_id", "eos_token_id"):
        given = getattr(a, key)
        if given is not None:
            if given < 0:
                p.error(f"--{key.replace('_', '-')} {given} is negative")
            ids[key] = given
    return ids


def parser() -> Parser:
    prog = "ptdp" if os.environ.get("PTDP_EXPORT_PROG") == "ptdp" else PROG
    p = Parser(prog=prog, description="Reads ptdp checkpoints; exports them to other frameworks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    ex = sub.add_parser("export-hf", help="a Hugging Face model folder (config.json, model.safetensors) that "
                        "transformers' AutoModelForCausalLM loads: GPT as GPT2LMHeadModel, LLaMA as LlamaForCausalLM")
    ex.add_argument("checkpoint", help="a ptdp --save directory (any t, p and --zero: the shards are gathered)")
    ex.add_argument("out", help="the model folder to write (created; config.json and model.safetensors replaced)")
    ex.add_argument("--iteration", type=int, help="the iteration to export (default: the latest)")
    ex.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32",
                    help="the stored weights' type (default f32: ptdp's master weights as they are)")
    ex.add_argument("--norm-epsilon", type=float,
                    help="the norm epsilon the model was trained with; only for checkpoints older than format "
                         "version 7, which do not record it (default: ptdp's 1e-5)")
    ex.add_argument("--rope-theta", type=float,
                    help="llama: the rotary base, as --norm-epsilon (default: ptdp's 10000)")
    ex.add_argument("--make-vocab-size-divisible-by", type=int,
                    help="the run's vocabulary padding, as --norm-epsilon; only for checkpoints older than format "
                         "version 9, which do not record it (default: ptdp's 128)")
    ex.add_argument("--vocab-file", help="GPT-2's vocab.json the dataset was made with: config.json's bos_token_id "
                    "and eos_token_id are its <|endoftext|>")
    ex.add_argument("--bos-token-id", type=int, help="config.json's bos_token_id (default: from --vocab-file, "
                    "else null)")
    ex.add_argument("--eos-token-id", type=int, help="config.json's eos_token_id (default: from --vocab-file, "
                    "else null)")
    ex.add_argument("--no-verify", action="store_true", help="skip the shard's checksum (pure Python: ~1 s per 5 MB)")
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    if a.iteration is not None and a.iteration < 0:
        p.error(f"--iteration {a.iteration} is negative")
    if a.make_vocab_size_divisible_by is not None and a.make_vocab_size_divisible_by <= 0:
        p.error(f"--make-vocab-size-divisible-by {a.make_vocab_size_divisible_by} must be positive")
    try:
        ids = special_ids(a, p)
        shards = read_all_shards(a.checkpoint, a.iteration, verify=not a.no_verify)
        config = hf_export.export(shards, a.out, a.dtype, a.norm_epsilon, a.rope_theta,
                                  a.make_vocab_size_divisible_by, ids)
    except (CheckpointError, OSError) as e:
        if p.prog == "ptdp":
            print(f"ptdp: error: {e}", file=sys.stderr)
            return 2
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    s = shards[0]
    gathered = f", gathered from {len(shards)} shards saved as {describe_sharding(s)}" if len(shards) > 1 else ""
    print(f"wrote {a.out}: {config['architectures'][0]} of iteration {s.iteration} "
          f"({s.layers} layers, hidden {s.hidden}, vocabulary {s.vocab_size}, {a.dtype}) from {a.checkpoint}{gathered}")
    return 0
