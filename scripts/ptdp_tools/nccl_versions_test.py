"""nccl_versions.py reads the toolkit's NCCL as its header says, and names a file it cannot load."""
import contextlib
import io
import os
import re
import unittest

from ptdp_tools import nccl_versions

LIB = "/usr/local/cuda/lib64/libnccl.so.2"
HEADER = "/usr/local/cuda/include/nccl.h"


class NcclVersions(unittest.TestCase):
    @unittest.skipUnless(os.path.exists(LIB) and os.path.exists(HEADER), "no CUDA toolkit NCCL here")
    def test_the_toolkits_library_has_its_headers_version(self):
        header = open(HEADER).read()
        want = ".".join(re.search(rf"#define NCCL_{k} (\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH"))
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(nccl_versions.main([LIB, LIB]), 0)
        self.assertEqual(out.getvalue(), f"{want} {LIB}\n")  # once, though given twice

    def test_a_file_that_is_no_library_is_named(self):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(nccl_versions.main(["/nonexistent/libnccl.so.2"]), 0)
        self.assertTrue(out.getvalue().startswith("unloadable /nonexistent/libnccl.so.2: "), out.getvalue())


if __name__ == "__main__":
    unittest.main()
