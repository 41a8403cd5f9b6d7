"""ptdp checkpoints in Python: reader (shards), layout (the flat parameter buffer), hf_export
(a Hugging Face model folder) and cli (the `ptdp_checkpoint.py` command)."""
