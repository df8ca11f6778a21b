#!/usr/bin/env python3
"""pty_run.py OUT COMMAND...: runs COMMAND with stdin, stdout and stderr on a
fresh pseudo-terminal, so the programs under test take their terminal code
paths; every byte they write to it goes to OUT. Exits with COMMAND's code."""
import os
import pty
import sys

out_path, argv = sys.argv[1], sys.argv[2:]
pid, master = pty.fork()
if pid == 0:
    os.execvp(argv[0], argv)
with open(out_path, "wb") as out:
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every holder of the terminal's other end is gone
            break
        if not data:
            break
        out.write(data)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
