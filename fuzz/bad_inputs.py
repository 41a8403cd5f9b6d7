#!/usr/bin/env python3
# Runs a ptdp binary on the bad inputs listed in docs/ROBUSTNESS.md (from the existing tests and
# from fuzzing) and prints the table there: input | exit code | first line of stderr.
#   python3 fuzz/bad_inputs.py build-asan/ptdp > /tmp/table.md   (sanitized: reports are marked)
# Everything it writes goes to a temporary folder (removed at the end); paths print as T/.
import os, re, struct, subprocess, sys, tempfile, shutil
exe = os.path.abspath(sys.argv[1])
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T = tempfile.mkdtemp(prefix="ptdp_bad_")
def w(name, data):
    p = os.path.join(T, name)
    open(p, "wb").write(data if isinstance(data, bytes) else data.encode())
    return p
# a good dataset from ptdp preprocess
w("in.txt", "The quick brown fox jumps over the lazy dog. " * 8)
subprocess.run([exe, "preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/good"], check=True, capture_output=True)
idx = open(f"{T}/good.idx", "rb").read(); bn = open(f"{T}/good.bin", "rb").read()
def ds(name, i, b):
    if i is not None: w(name + ".idx", i)
    if b is not None: w(name + ".bin", b)
    return f"{T}/{name}"
tiny = ["train", "--model", "tiny", "--iters", "2", "--warmup", "0"]
cases = []
def case(label, args): cases.append((label, args))
# train flags
for label, a in [
  ("--heads 5 (hidden 64)", ["--layers","2","--hidden","64","--heads","5","--seq-length","8","--vocab-size","16"]),
  ("--layers 0", ["--model","tiny","--layers","0"]), ("--hidden -4", ["--model","tiny","--hidden","-4"]),
  ("--seq-length 0", ["--model","tiny","--seq-length","0"]), ("--vocab-size 0", ["--model","tiny","--vocab-size","0"]),
  ("--vocab-size 4294967296", ["--model","tiny","--vocab-size","4294967296"]),
  ("--micro-batch 0", ["--model","tiny","--micro-batch","0"]), ("--iters 0", ["--model","tiny","--iters","0"]),
  ("--tp 0", ["--model","tiny","--tp","0"]), ("--model nope", ["--model","nope"]),
  ("sizes without --model", ["--hidden","64","--heads","4","--seq-length","8","--vocab-size","16"]),
  ("--tp 3 (heads 4)", ["--model","tiny","--tp","3"]), ("--pp 3 (layers 4)", ["--model","tiny","--pp","3"]),
  ("--pp 2 --vpp 4 interleaved", ["--model","tiny","--pp","2","--vpp","4","--schedule","interleaved"]),
  ("interleaved, 3 micro-batches, --pp 2", ["--model","tiny","--pp","2","--vpp","2","--schedule","interleaved","--global-batch","3"]),
  ("--vpp 2 without a pipeline", ["--model","tiny","--vpp","2","--schedule","interleaved"]),
  ("--vpp 2 without interleaved", ["--model","tiny","--pp","2","--vpp","2"]),
  ("--dp 2 --micro-batch 3 --global-batch 8", ["--model","tiny","--dp","2","--micro-batch","3","--global-batch","8"]),
  ("--tp 2 --dp 2 --ranks 3", ["--model","tiny","--tp","2","--dp","2","--ranks","3"]),
  ("--comm nccl (cpu)", ["--model","tiny","--comm","nccl"]),
  ("--global-batch 6 --micro-batch 4", ["--model","tiny","--global-batch","6","--micro-batch","4"]),
  ("--schedule foo", ["--model","tiny","--schedule","foo"]), ("--recompute maybe", ["--model","tiny","--recompute","maybe"]),
  ("--precision bf16 (cpu)", ["--model","tiny","--precision","bf16"]), ("--precision f8", ["--model","tiny","--precision","f8"]),
  ("--backend tpu", ["--model","tiny","--backend","tpu"]), ("--backend cuda", ["--model","tiny","--backend","cuda"]),
  ("--comm xyz", ["--model","tiny","--comm","xyz"]),
  ("--warmup 5 --iters 5", ["--model","tiny","--warmup","5","--iters","5"]), ("--lr -1", ["--model","tiny","--lr","-1"]),
  ("--lr inf", ["--model","tiny","--lr","inf"]), ("--lr nan", ["--model","tiny","--lr","nan"]),
  ("--adam-beta1 1.5", ["--model","tiny","--adam-beta1","1.5"]), ("--seed -1", ["--model","tiny","--seed","-1"]),
  ("--seed abc", ["--model","tiny","--seed","abc"]), ("--seed 2^64", ["--model","tiny","--seed","18446744073709551616"]),
  ("--comm-timeout 0", ["--model","tiny","--comm-timeout","0"]), ("--grad-bucket-size 0", ["--model","tiny","--grad-bucket-size","0"]), ("--grad-bucket-size 1", ["--model","tiny","--grad-bucket-size","1"]),
  ("--data '' (empty)", ["--model","tiny","--data",""]),
  ("--layers 99999999", ["--model","tiny","--layers","99999999"]),
  ("--seq-length 1048577", ["--model","tiny","--seq-length","1048577"]),
  ("--heads 65537", ["--model","tiny","--heads","65537"]),
  ("--make-vocab-size-divisible-by 65537", ["--model","tiny","--make-vocab-size-divisible-by","65537"]),
  ("--layers 65536 --hidden 256 (too big for this machine)", ["--model","tiny","--layers","65536","--hidden","256"]),
  ("--hidden 1048576 --heads 1 (above the estimate's limit)", ["--model","tiny","--hidden","1048576","--heads","1"]),
  ("--comm-timeout inf", ["--model","tiny","--comm-timeout","inf"]),
  ("--foo", ["--model","tiny","--foo"]), ("--layers abc", ["--model","tiny","--layers","abc"]),
  ("--tp 99999999999 (not an int)", ["--model","tiny","--tp","99999999999"]),
  ("--csv in a missing directory", ["--model","tiny","--iters","2","--warmup","1","--csv",f"{T}/missing/out.csv"]),
]:
    case("train " + label, ["train"] + a + (["--iters","2","--warmup","0"] if "--iters" not in a and "--warmup" not in a else []))
for label, a in [
  ("--tp 65536 --pp 65536 --heads/--hidden/--layers 65536 --ranks 1", ["--model","tiny","--tp","65536","--pp","65536","--heads","65536","--hidden","65536","--layers","65536","--ranks","1"]),
  ("--dp 65536 --pp 65536 --layers 65536", ["--model","tiny","--dp","65536","--pp","65536","--layers","65536"]),
  ("--hidden 1000000000 --heads 1", ["--model","tiny","--hidden","1000000000","--heads","1"]),
  ("--tp 2 --comm-timeout 1e300", ["--model","tiny","--tp","2","--comm-timeout","1e300"]),
  ("--tp 2 --comm-timeout 1e10", ["--model","tiny","--tp","2","--comm-timeout","1e10"]),
]:
    case("train " + label, ["train"] + a + ["--iters","2","--warmup","0"])
w("foreign.csv", "a,b\n1,2\n")
case("train --csv with a foreign header", tiny + ["--csv", f"{T}/foreign.csv"])
# datasets
def patched(off, val): b = bytearray(idx); b[off:off+len(val)] = val; return bytes(b)
for label, i, b in [
  ("bad magic", patched(0, b"X"), bn), ("version 2", patched(9, b"\x02"), bn), ("dtype 6 (float64)", patched(17, b"\x06"), bn),
  ("dtype 9", patched(17, b"\x09"), bn), ("idx cut at 20 bytes", idx[:20], bn), ("idx cut at 40 bytes", idx[:40], bn),
  ("idx + 1 byte (1 sequence: read as the optional sequence_modes)", idx + b"\0", bn), ("idx + 2 trailing bytes", idx + b"\0\0", bn), ("bin short by 2 bytes", idx, bn[:-2]), ("bin 2 bytes too long", idx, bn + b"\0\0"),
  ("no .idx", None, bn), ("no .bin", idx, None),
  ("huge sequence count", patched(18, struct.pack("<Q", (1 << 64) // 4)), bn),
  ("negative sequence length", patched(34, struct.pack("<i", -1)), bn),
  ("first pointer 2, not 0", patched(38, struct.pack("<q", 2)), bn),
  ("document indices 1.. (not 0)", patched(46, struct.pack("<q", 1)), bn),
  ("last document index 0", patched(54, struct.pack("<q", 0)), bn),
]:
    case("train --data: " + label, tiny + ["--data", ds(re.sub(r"\W", "_", label), i, b)])
case("train --data, --seq-length 1000 (too short)", tiny + ["--data", f"{T}/good", "--seq-length", "1000"])
case("train --data, --vocab-size 100 (tokens outside)", tiny + ["--data", f"{T}/good", "--vocab-size", "100"])
case("train --data a directory", tiny + ["--data", T])
# preprocess
w("empty.txt", "")
case("preprocess missing --input file", ["preprocess", "--input", f"{T}/none.txt", "--output-prefix", f"{T}/o"])
case("preprocess empty input", ["preprocess", "--input", f"{T}/empty.txt", "--output-prefix", f"{T}/o"])
case("preprocess directory input", ["preprocess", "--input", T, "--output-prefix", f"{T}/o"])
case("preprocess --output-prefix in a missing directory", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/no/o"])
case("preprocess without --input", ["preprocess", "--output-prefix", f"{T}/o"])
w("text.model", "not a model\n")
case("preprocess --tokenizer-model missing", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o", "--tokenizer-model", f"{T}/none.model"])
case("preprocess --tokenizer-model a text file", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o", "--tokenizer-model", f"{T}/text.model"])
case("preprocess --append-eod (byte-level)", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o", "--append-eod"])
gpt2 = ["--tokenizer-type", "GPT2BPETokenizer"]
g2v, g2m = f"{src}/core/data/testdata/gpt2_bpe/vocab.json", f"{src}/core/data/testdata/gpt2_bpe/merges.txt"
w("vocab_array.json", '["not", "an object"]')
w("merges3.txt", "#version: 0.2\nthree symbols here\n")
w("latin1.txt", b"caf\xe9 au lait\n")
case("preprocess --tokenizer-type unknown", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o", "--tokenizer-type", "BertWordPieceCase"])
case("preprocess --vocab-file without --tokenizer-type", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o", "--vocab-file", g2v, "--merge-file", g2m])
case("preprocess GPT2BPETokenizer without --merge-file", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o"] + gpt2 + ["--vocab-file", g2v])
case("preprocess GPT2BPETokenizer, vocab.json an array", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o"] + gpt2 + ["--vocab-file", f"{T}/vocab_array.json", "--merge-file", g2m])
case("preprocess GPT2BPETokenizer, a merge of three symbols", ["preprocess", "--input", f"{T}/in.txt", "--output-prefix", f"{T}/o"] + gpt2 + ["--vocab-file", g2v, "--merge-file", f"{T}/merges3.txt"])
case("preprocess GPT2BPETokenizer of Latin-1 text", ["preprocess", "--input", f"{T}/latin1.txt", "--output-prefix", f"{T}/o"] + gpt2 + ["--vocab-file", g2v, "--merge-file", g2m])
case("train --recipe llama, 100 iterations (warm-up 2000)", ["train", "--model", "llama-tiny", "--recipe", "llama", "--iters", "100"])
case("train --recipe gpt3", ["train", "--model", "tiny", "--recipe", "gpt3"])
# hardware profiles (simulate)
sel = open(f"{src}/hardware/a100-selene.toml").read()
sim = ["simulate", "--model", "gpt-1t", "--tp", "8", "--pp", "64", "--global-batch", "512", "--hardware"]
for label, text in [
  ("negative memory bandwidth", sel.replace("bandwidth_gbs = { value = 2039", "bandwidth_gbs = { value = -2039")),
  ("only name", 'name = "x"\n'), ("syntax error", 'name = "x"\n[node\ngpus = 1\n'),
  ("bare number gpus = 8", re.sub(r"\ngpus = \{[^\n]*", "\ngpus = 8", sel)),
  ("number without source", re.sub(r'capacity_gb = \{ value = ([0-9.]+), source = "[^"]*" \}', r"capacity_gb = { value = \1 }", sel)),
  ("max_efficiency 1.5", re.sub(r"max_efficiency = \{ value = [0-9.]+", "max_efficiency = { value = 1.5", sel)),
  ("kind = tpu", sel.replace('kind = "gpu"', 'kind = "tpu"')),
  ("gpus = 1e300", re.sub(r"\ngpus = \{ value = 8", "\ngpus = { value = 1e300", sel)),
  ("gpus = nan", re.sub(r"\ngpus = \{ value = 8", "\ngpus = { value = nan", sel)),
  ("gpus = -3", re.sub(r"\ngpus = \{ value = 8", "\ngpus = { value = -3", sel)),
  ("gpus = 2.5", re.sub(r"\ngpus = \{ value = 8", "\ngpus = { value = 2.5", sel)),
  ("nics_per_node = 8.5", sel.replace("nics_per_node = { value = 8", "nics_per_node = { value = 8.5")),
  ("gemm point n = 1.0241e304", open(f"{src}/hardware/cpu.toml").read().replace("n = 256, k = 256", "n = 10241e300, k = 256", 1)),
  ('kind = "a\\nb" (a line break)', sel.replace('kind = "gpu"', 'kind = "a\\nb"')),
  ("name = f, then a line break (parse error)", "name = f\n"),
  ("empty file", ""), ("binary garbage", "\x00\xff\xfe"),
]:
    case("simulate --hardware: " + label, sim + [w(re.sub(r"\W", "_", label) + ".toml", text)])
case("simulate --hardware no-such-gpu", sim + ["no-such-gpu"])
case("simulate --hardware /nonexistent/x.toml", sim + ["/nonexistent/x.toml"])
case("simulate --gpus 0", ["simulate", "--model", "gpt-1t", "--gpus", "0", "--hardware", "a100-selene"])
case("simulate --gpus 1000 (tp 8 pp 64)", ["simulate", "--model", "gpt-1t", "--tp", "8", "--pp", "64", "--gpus", "1000", "--hardware", "a100-selene"])
case("simulate --precision f16 on cpu", ["simulate", "--model", "small", "--precision", "f16", "--hardware", "cpu"])
case("simulate --tp 65536 --pp 65536 --gpus 1", ["simulate", "--model", "tiny", "--tp", "65536", "--pp", "65536", "--gpus", "1", "--hardware", "cpu"])
cp405 = ["simulate", "--model", "llama3.1-405b", "--tp", "8", "--pp", "9", "--context-parallel-size", "2", "--gpus", "576", "--hardware", "h100-dgx"]
case("simulate --context-parallel-size 2 --stack megatron-2022", cp405 + ["--stack", "megatron-2022"])
case("simulate --context-parallel-size 2 --stack ptdp", cp405 + ["--stack", "ptdp"])
case("simulate --context-parallel-size 2 --cp-comm-type a2a --stack mcore", cp405 + ["--stack", "mcore", "--cp-comm-type", "a2a"])
fp8 = ["simulate", "--model", "llama3-8b", "--gpus", "8", "--fp8-format", "hybrid"]
case("simulate --fp8-format hybrid --stack megatron-2022", fp8 + ["--stack", "megatron-2022", "--hardware", "h100-dgx"])
case("simulate --fp8-format hybrid --stack mcore --hardware a100-selene", fp8 + ["--stack", "mcore", "--hardware", "a100-selene"])
case("simulate --context-parallel-size 3 (s 8192)", ["simulate", "--model", "llama3.1-405b", "--tp", "8", "--pp", "9", "--context-parallel-size", "3", "--gpus", "216", "--stack", "mcore", "--hardware", "h100-dgx"])
case("simulate --gpus 100 (tp 8 pp 9 cp 2)", cp405[:-4] + ["--gpus", "100", "--hardware", "h100-dgx", "--stack", "mcore"])
case("plan --gpus 0", ["plan", "--model", "gpt-1t", "--gpus", "0", "--global-batch", "8", "--hardware", "a100-selene"])
case("plan --gpus 7 --global-batch 512", ["plan", "--model", "gpt-1.7b", "--gpus", "7", "--global-batch", "512", "--hardware", "a100-selene"])
# compare (CSV reader)
subprocess.run([exe, "simulate", "--model", "small", "--micro-batch", "4", "--hardware", "cpu", "--csv", f"{T}/base.csv"], check=True, capture_output=True)
good = f"{T}/base.csv"
res = open(good).read()
lines = res.split("\n")
for label, text in [
  ("empty file", ""), ("missing column backend", "experiment,mode\nx,run\n"),
  ("3 fields on line 2", lines[0] + "\n1,2,3\n"),
  ("unclosed quote", lines[0] + "\n\"x,2\n"),
  ("tflops 'fast'", lines[0] + "\n" + re.sub(r"^((?:[^,]*,){25})[^,]*", r"\1fast", lines[1]) + "\n"),
  ("duplicated column", "experiment,experiment\n1,2\n"),
  ("tflops '+-1'", lines[0] + "\n" + re.sub(r"^((?:[^,]*,){25})[^,]*", r"\1+-1", lines[1]) + "\n"),
  ("tflops 'inf'", lines[0] + "\n" + re.sub(r"^((?:[^,]*,){25})[^,]*", r"\1inf", lines[1]) + "\n"),
]:
    case("compare: current " + label, ["compare", good, w("c_" + re.sub(r"\W", "_", label) + ".csv", text)])
case("compare: baseline with a header only", ["compare", w("b_header_only.csv", lines[0] + "\n"), good])
case("compare: missing file", ["compare", good, f"{T}/nope.csv"])
case("compare: a directory", ["compare", good, T])
case("compare --tolerance -1", ["compare", good, good, "--tolerance", "-1"])
case("compare with one file", ["compare", good])
# accept
case("accept --hardware no-such-machine", ["accept", "--hardware", "no-such-machine"])
case("accept --checks gemm,disk", ["accept", "--hardware", "cpu", "--checks", "gemm,disk"])
case("accept --out in a missing directory", ["accept", "--hardware", "cpu", "--out", f"{T}/no/such/r.json"])
# top level
case("no subcommand", [])
case("unknown subcommand", ["fly"])
case("unknown subcommand with a line break", ["fl\ny"])

env = dict(os.environ, OMP_NUM_THREADS="1")
print("| input | exit | message (first line of stderr) |")
print("|---|---|---|")
bad = 0
for label, args in cases:
    try:
        r = subprocess.run([exe] + args, capture_output=True, text=True, errors="replace", timeout=120, env=env, cwd=T)
        code = r.returncode
        errl = [l for l in r.stderr.splitlines() if l.strip()]
        msg = errl[0] if errl else "(nothing on stderr)"
        if len(errl) > 1: msg += f" ({len(errl)} lines)"
        if any("Sanitizer" in l or "runtime error" in l for l in errl): msg = "SANITIZER: " + next(l for l in errl if "Sanitizer" in l or "runtime error" in l); bad += 1
    except subprocess.TimeoutExpired:
        code, msg = "timeout", "(no answer in 120 s)"
    msg = msg.replace(T, "T").replace("|", "\\|")
    if len(msg) > 230: msg = msg[:227] + "..."
    print(f"| `{label}` | {code} | {msg} |")
shutil.rmtree(T)
sys.stderr.write(f"{len(cases)} cases, {bad} sanitizer reports\n")
