"""ptdp checkpoints in Python: reader (shards, and every shard of a save), layout (the flat
parameter buffer of a rank's model chunk), gather (a sharded save as one model), hf_export (a
Hugging Face model folder) and cli (the `ptdp_checkpoint.py` command, `ptdp export-hf`'s)."""
