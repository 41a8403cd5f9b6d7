"""Running (--check run): each document gets a fresh temporary folder, and its sh blocks run there
in order (later blocks see earlier outputs), each as one `bash -e -o pipefail -x` script (every
command echoed) under a timeout of BLOCK_TIMEOUT seconds. The folder holds symbolic links to the
repository's top-level entries, except hardware/ and results/, whose tracked files are copied
(documented commands write there), and build, build-vgpu, build-cuda and build-gpu: links to
BUILD, which is also first on PATH (so `ptdp` is BUILD/ptdp). Environment: OMP_WAIT_POLICY=PASSIVE
(as scripts/reproduce.sh: spinning OpenMP waits crawl on a busy 2-core machine), Open MPI allowed
to run as root and to oversubscribe, and in gpu and cluster blocks no GPU visible (VGPU_DEVICES=0,
CUDA_VISIBLE_DEVICES empty).
A block whose override is `ctest NAME` (<!-- doctest: run ctest NAME -->) is not run here: ctest
test NAME runs its commands (the same script, once per test run, not twice); the check is that
BUILD registers a test of that name.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from ptdp_tools.doc_test.documents import logical_lines, split_comment, split_env

BLOCK_TIMEOUT = 60

PREAMBLE = r"""
# Helpers of the reduced forms (REDUCED), each in a subshell so that its `set +x` stays there.
doctest_no_gpu() (  # CMD...: exit 0, or exit 2 with a line saying there is no GPU (or no CUDA)
  { set +x; } 2>/dev/null
  rc=0
  "$@" 2>"$DOCTEST_TMP/err" || rc=$?
  cat "$DOCTEST_TMP/err" >&2
  ((rc == 0)) || { ((rc == 2)) && grep -qE 'no GPU|no CUDA' "$DOCTEST_TMP/err"; } ||
    { echo "doc_test: exit $rc, not a refusal for want of a GPU: $*" >&2; exit 1; }
)
doctest_nonempty() (  # CMD...: must succeed and print something
  { set +x; } 2>/dev/null
  out=$("$@") || exit
  [[ -n "$out" ]] || { echo "doc_test: $* printed nothing" >&2; exit 1; }
  echo "$out" | head -n 5
)
doctest_program() (  # NAME...: each a program BUILD made, or one that a CMakeLists.txt defines and
  { set +x; } 2>/dev/null  # this build's configuration leaves out (no CUDA, the virtual GPU)
  for name; do
    [[ -n $(find -L build -maxdepth 3 -name "$name" -type f -perm -u+x -print -quit) ]] && continue
    grep -qw -- "$name" $(git -C "$DOCTEST_ROOT" ls-files '*CMakeLists.txt' | sed "s|^|$DOCTEST_ROOT/|") ||
      { echo "doc_test: $name is neither a program of the build nor defined in a CMakeLists.txt" >&2; exit 1; }
    echo "doc_test: $name is defined but not built in this build ($(readlink -f build))"
  done
)
doctest_benchmark() (  # PROGRAM ARGS...: its benchmarks (ARGS filter them) if built, else doctest_program
  { set +x; } 2>/dev/null
  [[ -x $1 ]] || { doctest_program "$(basename "$1")"; exit; }
  doctest_nonempty "$@" --benchmark_list_tests=true
)
doctest_sbatch() (  # SCRIPT OPTION...: the script parses; each sbatch option is one of its #SBATCH lines
  { set +x; } 2>/dev/null
  script=$1; shift
  bash -n "$script"
  for opt; do
    grep -q "^#SBATCH ${opt%%=*}\b" "$script" || { echo "doc_test: $script has no #SBATCH ${opt%%=*}" >&2; exit 1; }
  done
)
doctest_cmake_options() (  # VAR...: each a cache variable of the build
  { set +x; } 2>/dev/null
  cache=$(cmake -N -LA build)
  for v; do grep -q "^$v:" <<<"$cache" || { echo "doc_test: build has no cache variable $v" >&2; exit 1; }; done
)
"""

PY = r"(?:\S*python[\d.]*\s+)?"


def fewer_iters(cmd):
    """ptdp train with --iters at 2, or one more than a longer --warmup or --lr-warmup-iters."""
    if "--help" in cmd:
        return cmd
    warm = [int(n) for n in re.findall(r"--(?:lr-warmup-iters|warmup)[ =](\d+)", cmd)]
    n = max([2] + [w + 1 for w in warm])
    m = re.search(r"--iters[ =](\d+)", cmd)
    if not m:
        return cmd + f" --iters {n}"
    return cmd if int(m.group(1)) <= n else cmd[:m.start()] + f"--iters {n}" + cmd[m.end():]


def reduce_ptdp(cmd, no_gpu):
    """The reduced forms below, REDUCED."""
    sub = re.match(r"^\S*ptdp\s+(\w+)", cmd).group(1)
    if sub == "reproduce" and "--mode run" in cmd and "--dry-run" not in cmd:
        cmd += " --dry-run"
    elif sub == "train":
        cmd = fewer_iters(cmd)
    return f"doctest_no_gpu {cmd}" if no_gpu else cmd


def reduce_mpirun(cmd, no_gpu):
    m = re.search(r"\S*ptdp\s", cmd)
    return cmd[:m.start()] + reduce_ptdp(cmd[m.start():], no_gpu)


def reduce_sbatch(cmd, no_gpu):
    words = cmd.split()
    k = next(i for i, w in enumerate(words) if i > 0 and not w.startswith("-"))
    check = f"doctest_sbatch {words[k]} {' '.join(words[1:k])}"
    return check + (f" && {reduce_ptdp('build/ptdp ' + ' '.join(words[k + 1:]), no_gpu)}" if words[k + 1:] else "")


def reduce_mpirun_sh(cmd, no_gpu):
    m = re.search(r"--hostfile[ =](\S+)", cmd)
    make = f"{{ [[ -e {m.group(1)} ]] || echo localhost >{m.group(1)}; }} && " if m else ""
    script, rest = cmd.split(None, 1)
    return f"{make}{script} --dry-run {rest}"


def reduce_cmake(cmd, no_gpu):
    if "--build" in cmd:
        return "doctest_program " + re.search(r"--target\s+(.*)$", cmd).group(1)
    return "doctest_cmake_options " + " ".join(re.findall(r"-D(\w+)=", cmd))


# The commands of gpu, cluster and long blocks: (name, pattern, what runs instead). The first
# pattern that matches the command (after its VAR=value prefix, which is kept) applies; a command
# that matches none runs as written.
#   ptdp            train runs 2 iterations (its --iters, or one more than a longer --warmup or
#                   --lr-warmup-iters); reproduce --mode run gets --dry-run (the configurations are
#                   expanded and checked, nothing runs); in gpu and cluster blocks any ptdp command
#                   may instead refuse with exit 2 for want of a GPU (stderr says "no GPU"/"no CUDA")
#   mpirun          mpirun ... ptdp ...: the local Open MPI, the ptdp command reduced as above
#   sbatch          sbatch OPTIONS ptdp.sbatch ARGS: bash -n of the script, each option one of its
#                   #SBATCH lines, and then ptdp ARGS (what the script runs under srun) reduced
#   benchmark       build*/bench_*: --benchmark_list_tests=true without --benchmark_out; must list
#                   one. A benchmark this build's configuration leaves out (the CUDA suites in a
#                   build without CUDA or with the virtual GPU) must be defined in a CMakeLists.txt
#   gtest           build*/.../ptdp_tests: --gtest_list_tests; must list one
#   python --help   scripts/*.py, plots/*.py under any interpreter: python3 SCRIPT ARGS --help
#                   (argparse checks the values before --help and stops there)
#   mpirun.sh       scripts/launch/mpirun.sh --dry-run ARGS: prints the mpirun command (a
#                   --hostfile that does not exist is created holding `localhost`)
#   gpu_session.sh  ARGS --help: it parses ARGS in order, then prints its usage (its dry run is
#                   ctest GpuSession.*, minutes long)
#   bash -n         any other scripts/*.sh (they build, install, or run for minutes)
#   cmake           cmake -S . -B DIR -DVAR=...: each VAR a cache variable of BUILD;
#                   cmake --build DIR --target T...: each T a program BUILD made (or, left out
#                   by BUILD's configuration, one that a CMakeLists.txt defines)
REDUCED = [
    ("ptdp", r"^\S*ptdp\s+\w+", reduce_ptdp),
    ("mpirun", r"^mpirun\s.*ptdp\s", reduce_mpirun),
    ("sbatch", r"^sbatch\s+(-\S+\s+)*\S*ptdp\.sbatch\b", reduce_sbatch),
    ("benchmark", r"^(\S*/)?bench_\w+", lambda c, g: "doctest_benchmark " + re.sub(r"\s--benchmark_out\S*", "", c)),
    ("gtest", r"^\S*ptdp_tests\s", lambda c, g: f"doctest_nonempty {c} --gtest_list_tests"),
    ("python --help", rf"^{PY}(scripts|plots)/\S+\.py", lambda c, g: re.sub(rf"^{PY}", "python3 ", c) + " --help"),
    ("mpirun.sh", r"^(bash\s+)?scripts/launch/mpirun\.sh\s", reduce_mpirun_sh),
    ("gpu_session.sh", r"^(bash\s+)?scripts/gpu_session\.sh\s", lambda c, g: c + " --help"),
    ("bash -n", r"^(bash\s+)?scripts/\S+\.sh\b", lambda c, g: "bash -n " + re.search(r"scripts/\S+\.sh", c).group(0)),
    ("cmake", r"^cmake\s", reduce_cmake),
]


def reduce_block(b):
    """(script, [(rule, command as run)]): what runs for block B."""
    if b.override is not None:
        return b.override, [("override", line) for line in b.override.split("\n")]
    if not b.markers:
        return "\n".join(b.lines), []
    no_gpu = "gpu" in b.markers or "cluster" in b.markers
    script, rules = [], []
    for _, line in logical_lines(b.lines):
        env, cmd = split_env(split_comment(line)[0])
        rule = next((r for r in REDUCED if cmd and re.match(r[1], cmd)), None)
        script.append(env + rule[2](cmd, no_gpu) if rule else line)
        if cmd:
            rules.append((rule[0] if rule else "as written", script[-1]))
    return "\n".join(script), rules


def make_workdir(work, root, build, files):
    for top in sorted({f.split("/")[0] for f in files}):
        if top in ("hardware", "results"):
            for f in files:
                if f.startswith(top + "/"):
                    os.makedirs(os.path.join(work, os.path.dirname(f)), exist_ok=True)
                    shutil.copy2(os.path.join(root, f), os.path.join(work, f))
        else:
            os.symlink(os.path.join(root, top), os.path.join(work, top))
    for name in ("build", "build-vgpu", "build-cuda", "build-gpu"):
        if not os.path.lexists(os.path.join(work, name)):
            os.symlink(os.path.abspath(build), os.path.join(work, name))
    os.makedirs(os.path.join(work, ".doctest"))


def run_block(b, script, work, env):
    """(exit code, output, seconds) of SCRIPT run for block B in WORK."""
    if set(b.markers) & {"gpu", "cluster"}:
        env = dict(env, VGPU_DEVICES="0", CUDA_VISIBLE_DEVICES="")
    t0 = time.time()
    proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-x", "-c", PREAMBLE + script], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output = proc.communicate(timeout=BLOCK_TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output = proc.communicate()[0] + f"\n(killed after {BLOCK_TIMEOUT} s)"
    return proc.returncode, output, time.time() - t0


CTEST_OVERRIDE = re.compile(r"^ctest\s+(\S+)$")


def ctest_registered(build, name):
    """Whether BUILD registers ctest test NAME (exactly that name)."""
    proc = subprocess.run(["ctest", "--test-dir", build, "-N", "-R", f"^{re.escape(name)}$"],
                          capture_output=True, text=True)
    return proc.returncode == 0 and re.search(r"^Total Tests: 1$", proc.stdout, re.M) is not None


def run_doc(doc, root, build, files, verbose):
    errors = []
    with tempfile.TemporaryDirectory(prefix="doc_test.") as work:
        make_workdir(work, root, build, files)
        env = dict(os.environ, PATH=os.path.join(work, "build") + os.pathsep + os.environ.get("PATH", ""),
                   OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", DOCTEST_TMP=os.path.join(work, ".doctest"),
                   DOCTEST_ROOT=root)
        for b in doc.blocks:
            info = " ".join([b.kind] + b.markers)
            if b.kind != "sh":
                if verbose:
                    print(f"{b.where()}: {info}: {'parsed' if b.kind == 'toml' else 'not run'}")
                continue
            by_ctest = CTEST_OVERRIDE.match(b.override or "")
            if by_ctest:
                name = by_ctest.group(1)
                known = ctest_registered(build, name)
                if verbose:
                    print(f"{b.where()}: {info}: run by ctest {name}{'' if known else ' (NOT REGISTERED)'}")
                if not known:
                    errors.append(f"{b.where()}: ctest {name} is not a test of {build} (ctest -N): the block "
                                  "names the test that runs its commands")
                continue
            script, rules = reduce_block(b)
            rc, output, seconds = run_block(b, script, work, env)
            if verbose:
                how = "as written" if not rules else "in its reduced form" if b.override is None else "overridden"
                print(f"{b.where()}: {info}: run {how} ({seconds:.1f} s{', FAILED' if rc else ''})")
                for rule, command in rules:
                    print(f"    {rule + ':':16} {command[:140]}")
            if rc:
                traced = [line[2:] for line in output.split("\n") if line.startswith("+ ")]
                tail = "\n    ".join(output.rstrip().split("\n")[-8:])
                last = (traced or ["?"])[-1][:150]
                errors.append(f"{b.where()}: the block failed (exit {rc}) at `{last}`:\n    {tail}")
    return errors
