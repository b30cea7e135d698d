#!/usr/bin/env python3
"""Lists every skipped test of a `make test` run, with its reason, and fails CI on the wrong ones.

A skipped test is a hidden failure: scripts/install-deps.sh installs every tool the tests need,
so under CI=true the only acceptable reason is missing (or present) GPU hardware, which a test
says by starting its skip message with "GPU hardware:". Reads the XML that GoogleTest writes per
binary (GTEST_OUTPUT=xml:DIR/) and the JUnit file of ctest (--output-junit), for tests that skip
as a whole (SKIP_RETURN_CODE, printing "SKIP: <reason>").

  scripts/list-skips.py DIR        exit 1 when CI=true and a skip has another reason
"""

import os
import sys
import xml.etree.ElementTree as ET

ALLOWED_PREFIX = "GPU hardware:"


def gtest_skips(path):
    for case in ET.parse(path).getroot().iter("testcase"):
        skipped = case.find("skipped")
        if skipped is None and case.get("result") != "skipped":
            continue
        reason = (skipped.get("message") if skipped is not None else "") or ""
        # GoogleTest prefixes the message with the file and line of the GTEST_SKIP().
        reason = reason.split("\n", 1)[-1].strip() if "\n" in reason else reason.strip()
        yield f"{case.get('classname')}.{case.get('name')}", reason


def ctest_skips(path):
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.find("skipped") is None and case.get("status") not in ("notrun", "skipped"):
            continue
        out = case.findtext("system-out") or ""
        lines = [l for l in out.splitlines() if l.startswith("SKIP:")]
        yield case.get("name"), lines[-1][len("SKIP:"):].strip() if lines else "(no reason given)"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    skips = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        path = os.path.join(root, name)
        if not name.endswith(".xml"):
            continue
        try:
            skips += ctest_skips(path) if name == "ctest.xml" else gtest_skips(path)
        except ET.ParseError as e:
            # A binary that crashed mid-run leaves half a file; ctest already failed it.
            print(f"list-skips: {name}: {e}", file=sys.stderr)
    if not skips:
        print("Skipped tests: none")
        return 0
    print(f"Skipped tests ({len(skips)}):")
    wrong = 0
    for name, reason in skips:
        allowed = reason.startswith(ALLOWED_PREFIX)
        wrong += not allowed
        print(f"  {name}: {reason}")
    if os.environ.get("CI") == "true" and wrong:
        print(f"list-skips: {wrong} skipped for a reason other than GPU hardware; under CI=true "
              "that is a failure (scripts/install-deps.sh installs what the tests need)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
