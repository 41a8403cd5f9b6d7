"""fatbin.py on a library nvcc builds for sm_80 and sm_90: the entries listed, the cut to sm_90 zeroing
only the other architecture's payloads, a missing architecture refused in one line."""
import contextlib
import io
import os
import shutil
import subprocess
import tempfile
import unittest

from ptdp_tools import fatbin

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
KERNEL = "__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n" \
         "extern \"C\" void launch(float* x) { twice<<<1, 32>>>(x); }\n"


@unittest.skipIf(NVCC is None, "no nvcc here: the test builds a two-architecture library with it")
class Fatbin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        src = os.path.join(cls.dir, "k.cu")
        with open(src, "w") as f:
            f.write(KERNEL)
        cls.lib = os.path.join(cls.dir, "libk.so")
        subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80",
                        "-gencode", "arch=compute_90,code=sm_90", "-o", cls.lib, src], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_the_entries_are_each_architectures_cubin(self):
        _, found = fatbin.read(self.lib)
        cubins = sorted({e.sm for e in found if e.kind == 2})
        self.assertEqual(cubins, [80, 90])

    def test_prune_zeroes_only_the_other_architectures_payloads(self):
        before, found = fatbin.read(self.lib)
        out = os.path.join(self.dir, "pruned.so")
        with contextlib.redirect_stdout(io.StringIO()) as said:
            self.assertEqual(fatbin.main(["prune", self.lib, out, "--sm", "90"]), 0)
        self.assertIn("sm_90 cubins kept", said.getvalue())
        with open(out, "rb") as f:
            after = f.read()
        self.assertEqual(len(after), len(before))
        zeroed = [e for e in found if not (e.kind == 2 and e.sm == 90)]
        self.assertTrue(zeroed)
        for e in found:
            got = after[e.payload:e.payload + e.size]
            if e in zeroed:
                self.assertEqual(got, bytes(e.size), f"sm_{e.sm} kind {e.kind} not zeroed")
            else:
                self.assertEqual(got, bytes(before[e.payload:e.payload + e.size]))
                self.assertNotEqual(got, bytes(e.size))
        outside = bytearray(before)
        for e in zeroed:
            outside[e.payload:e.payload + e.size] = bytes(e.size)
        self.assertEqual(bytes(outside), after, "bytes outside the zeroed payloads changed")
        _, again = fatbin.read(out)  # still a readable library with the same entries
        self.assertEqual([(e.kind, e.sm, e.size) for e in again], [(e.kind, e.sm, e.size) for e in found])

    def test_an_architecture_the_library_lacks_is_refused_in_one_line(self):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(fatbin.main(["prune", self.lib, os.path.join(self.dir, "x.so"), "--sm", "75"]), 2)
        self.assertEqual(err.getvalue(), "fatbin: error: no cubin for sm_75\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.so")))

    def test_a_library_without_device_code_is_refused(self):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(fatbin.main(["list", "/bin/sh"]), 2)
        self.assertIn("no CUDA device code", err.getvalue())


if __name__ == "__main__":
    unittest.main()
