#!/usr/bin/python3
"""Writes a tar of a root file system made of this machine's installed Debian packages.

Usage: host_packages_rootfs.py OUT.tar PACKAGE...

The packages and everything they depend on (as dpkg has them installed here), less their
documentation, under the merged /usr layout (bin, lib, lib64 and sbin are links into usr), with
an empty /tmp. The tests use it to build an image that holds Debian's own Jupyter without
downloading anything (tests/integration/image_session_test.cc).
"""

import os
import subprocess
import sys

SKIP = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/locale/", "/usr/share/info/")


def installed_packages():
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Status}\t${Depends}, ${Pre-Depends}\n"],
        check=True, capture_output=True, text=True).stdout
    packages = {}
    for line in out.splitlines():
        name, status, depends = line.split("\t")
        if status.endswith(" installed"):
            packages[name] = depends
    return packages


def closure(roots, packages):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in packages:
            sys.exit(f"{name} is not installed here")
        seen.add(name)
        for clause in packages[name].split(","):
            for alternative in clause.split("|"):
                words = alternative.split()
                dep = words[0].split(":")[0] if words else ""
                if dep in packages:
                    todo.append(dep)
                    break
    return seen


def files_of(package):
    for suffix in ("", ":amd64", ":all"):
        path = f"/var/lib/dpkg/info/{package}{suffix}.list"
        if os.path.exists(path):
            with open(path) as f:
                return [line.rstrip("\n") for line in f if line.strip()]
    return []


def main():
    out, roots = sys.argv[1], sys.argv[2:]
    packages = installed_packages()
    paths = set()
    for package in closure(roots, packages):
        for path in files_of(package):
            if path.startswith(SKIP) or os.path.isdir(path) and not os.path.islink(path):
                continue
            if not os.path.lexists(path):
                continue
            # /lib is a link to usr/lib here: name each file where it really is.
            real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
            paths.add(real.lstrip("/"))
    listing = out + ".list"
    with open(listing, "w") as f:
        f.write("\n".join(sorted(paths)) + "\n")
    subprocess.run(["tar", "-C", "/", "-cf", out, "--no-recursion", "-T", listing], check=True)
    os.unlink(listing)


if __name__ == "__main__":
    main()
