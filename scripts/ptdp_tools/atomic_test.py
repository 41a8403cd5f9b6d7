"""ctest Scripts.AtomicWritesLeaveTheOldFileOrTheNew: atomic.write and atomic.replacing leave the old
file or the new one, never a part, and no temporary file beside it.

    python3 -m unittest ptdp_tools.atomic_test     (in scripts/)
"""

import os
import stat
import tempfile
import unittest

from ptdp_tools import atomic


class AtomicWrite(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "out.csv")
        self.umask = os.umask(0o022)

    def tearDown(self):
        os.umask(self.umask)
        self.dir.cleanup()

    def content(self, mode="r"):
        with open(self.path, mode) as f:
            return f.read()

    def test_writes_text_as_given_and_leaves_nothing_beside_it(self):
        atomic.write(self.path, "a,b\r\n1,é\n")
        self.assertEqual(self.content("rb"), "a,b\r\n1,é\n".encode("utf-8"))
        self.assertEqual(os.listdir(self.dir.name), ["out.csv"])

    def test_writes_bytes_and_parts_in_order(self):
        atomic.write(self.path, b"\x00\x01")
        self.assertEqual(self.content("rb"), b"\x00\x01")
        atomic.write(self.path, [b"head", memoryview(b"-"), b"body"])
        self.assertEqual(self.content("rb"), b"head-body")

    def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(self):
        atomic.write(self.path, "old\n")
        with self.assertRaises(RuntimeError):
            with atomic.replacing(self.path) as tmp:
                with open(tmp, "w") as f:
                    f.write("half of the new")
                raise RuntimeError("the writer failed")
        self.assertEqual(self.content(), "old\n")
        self.assertEqual(os.listdir(self.dir.name), ["out.csv"])

    def test_the_temporary_path_ends_with_the_files_name(self):
        with atomic.replacing(os.path.join(self.dir.name, "plot.png")) as tmp:
            self.assertTrue(tmp.endswith("plot.png"), tmp)
            self.assertEqual(os.path.dirname(tmp), self.dir.name)
            open(tmp, "wb").close()
        self.assertEqual(os.listdir(self.dir.name), ["plot.png"])

    def test_the_file_gets_the_permissions_of_a_plain_open(self):
        for umask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
            os.umask(umask)
            atomic.write(self.path, "x")
            self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), mode, f"umask {umask:o}")

    def test_a_users_symlink_is_written_through_and_a_plain_file_replaced(self):
        target = os.path.join(self.dir.name, "target.html")
        link = os.path.join(self.dir.name, "link.html")
        atomic.write(target, "old")
        os.symlink(target, link)
        with atomic.user_file(link) as tmp:
            with open(tmp, "w") as f:
                f.write("new")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(open(target).read(), "new")
        with atomic.user_file(self.path) as tmp:
            self.assertEqual(os.path.dirname(tmp), self.dir.name)
            open(tmp, "w").close()
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["link.html", "out.csv", "target.html"])


if __name__ == "__main__":
    unittest.main()
