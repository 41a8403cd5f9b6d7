"""The `ptdp_checkpoint.py` command: `export-hf CHECKPOINT_DIR OUT_DIR` writes a checkpoint (its
shards gathered into one model) as a Hugging Face model folder (hf_export.py)."""

from __future__ import annotations

import sys

from ptdp_tools.checkpoint import hf_export
from ptdp_tools.checkpoint.reader import CheckpointError, describe_sharding, read_all_shards
from ptdp_tools.cli import Parser

PROG = "ptdp_checkpoint.py"


def parser() -> Parser:
    p = Parser(prog=PROG, description="Reads ptdp checkpoints; exports them to other frameworks.")
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
        shards = read_all_shards(a.checkpoint, a.iteration, verify=not a.no_verify)
        config = hf_export.export(shards, a.out, a.dtype, a.norm_epsilon, a.rope_theta,
                                  a.make_vocab_size_divisible_by)
    except (CheckpointError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    s = shards[0]
    gathered = f", gathered from {len(shards)} shards saved as {describe_sharding(s)}" if len(shards) > 1 else ""
    print(f"wrote {a.out}: {config['architectures'][0]} of iteration {s.iteration} "
          f"({s.layers} layers, hidden {s.hidden}, vocabulary {s.vocab_size}, {a.dtype}) from {a.checkpoint}{gathered}")
    return 0
