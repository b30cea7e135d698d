#!/usr/bin/env python3
"""scripts/list-skips.py on made-up result files: it lists each skip with its reason, and under
CI=true fails exactly when a skip is not for GPU hardware."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "list-skips.py")

GTEST = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="S">
  <testcase name="Runs" classname="S" result="completed"/>
  <testcase name="Skips" classname="S" result="skipped">
    <skipped message="a_test.cc:12&#x0A;{reason}"><![CDATA[a_test.cc:12
{reason}]]></skipped>
  </testcase>
</testsuite></testsuites>
"""

CTEST = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="ctest">
  <testcase name="py_test" classname="py_test" status="notrun">
    <skipped message="Skipped"/>
    <system-out>SKIP: not root</system-out>
  </testcase>
  <testcase name="ok_test" classname="ok_test" status="run"/>
</testsuite>
"""


class ListSkipsTest(unittest.TestCase):
    def run_on(self, files, ci):
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            env = dict(os.environ, CI="true" if ci else "false")
            return subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True,
                                  env=env)

    def test_a_gpu_skip_is_listed_and_allowed(self):
        files = {"a.xml": GTEST.format(reason="GPU hardware: no libcuda.so.1 here")}
        r = self.run_on(files, ci=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("S.Skips: GPU hardware: no libcuda.so.1 here", r.stdout)
        self.assertNotIn("S.Runs", r.stdout)

    def test_another_skip_fails_only_under_ci(self):
        files = {"a.xml": GTEST.format(reason="slapd is not installed"), "ctest.xml": CTEST}
        r = self.run_on(files, ci=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Skipped tests (2):", r.stdout)
        self.assertIn("S.Skips: slapd is not installed", r.stdout)
        self.assertIn("py_test: not root", r.stdout)
        r = self.run_on(files, ci=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("2 skipped for a reason other than GPU hardware", r.stderr)

    def test_nothing_skipped_says_so(self):
        r = self.run_on({"ctest.xml": CTEST.replace('status="notrun"', 'status="run"')
                         .replace('<skipped message="Skipped"/>', "")}, ci=True)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "Skipped tests: none"))


if __name__ == "__main__":
    unittest.main()
