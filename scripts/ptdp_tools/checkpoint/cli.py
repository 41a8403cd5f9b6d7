"""The `ptdp_checkpoint.py` command: `export-hf CHECKPOINT_DIR OUT_DIR` writes a whole-model
checkpoint as a Hugging Face model folder (hf_export.py)."""

from __future__ import annotations

import sys

from ptdp_tools.checkpoint import hf_export
from ptdp_tools.checkpoint.reader import CheckpointError, read_checkpoint
from ptdp_tools.cli import Parser

PROG = "ptdp_checkpoint.py"


def main(argv=None) -> int:
    p = Parser(prog=PROG, description="Reads ptdp checkpoints; exports them to other frameworks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    ex = sub.add_parser("export-hf", help="a Hugging Face model folder (config.json, model.safetensors) that "
                        "transformers' AutoModelForCausalLM loads: GPT as GPT2LMHeadModel, LLaMA as LlamaForCausalLM")
    ex.add_argument("checkpoint", help="a ptdp --save directory of a whole-model run (t=1, p=1, --zero 0)")
    ex.add_argument("out", help="the model folder to write (created; config.json and model.safetensors replaced)")
    ex.add_argument("--iteration", type=int, help="the iteration to export (default: the latest)")
    ex.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32",
                    help="the stored weights' type (default f32: ptdp's master weights as they are)")
    ex.add_argument("--norm-epsilon", type=float,
                    help="the norm epsilon the model was trained with; only for checkpoints older than format "
                         "version 7, which do not record it (default: ptdp's 1e-5)")
    ex.add_argument("--rope-theta", type=float,
                    help="llama: the rotary base, as --norm-epsilon (default: ptdp's 10000)")
    ex.add_argument("--no-verify", action="store_true", help="skip the shard's checksum (pure Python: ~1 s per 5 MB)")
    a = p.parse_args(argv)
    if a.iteration is not None and a.iteration < 0:
        p.error(f"--iteration {a.iteration} is negative")
    try:
        shard = read_checkpoint(a.checkpoint, a.iteration, verify=not a.no_verify)
        config = hf_export.export(shard, a.out, a.dtype, a.norm_epsilon, a.rope_theta)
    except (CheckpointError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}: {config['architectures'][0]} of iteration {shard.iteration} "
          f"({shard.layers} layers, hidden {shard.hidden}, vocabulary {shard.vocab_size}, {a.dtype}) from {shard.path}")
    return 0
