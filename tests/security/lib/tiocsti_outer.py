#!/usr/bin/env python3
"""tiocsti_outer.py REPORT COMMAND...: runs COMMAND as a user's terminal would:
a fresh pseudo-terminal that is its controlling terminal and its stdin,
stdout and stderr. Once COMMAND has exited, this plays the user's shell: it
writes an end marker into the terminal's input (as if typed) and reads the
terminal's input up to that marker. Whatever comes before the marker was
pushed into the user's input while COMMAND ran (TIOCSTI) - keystrokes the
user's shell would have run. REPORT gets JSON: COMMAND's exit code, what
reached the terminal, what was injected, and the terminal's device (st_dev,
st_rdev), to compare with the descriptors the sandbox was given. Every wait
is for an event (output, exit, the marker), bounded only as a failure
guard. With OUTER_INPUT in the environment, that text is typed into the
terminal at the start (the terminal keeps it until it is read). With
OUTER_SIZE=ROWSxCOLS the terminal has that window size from the start; with
OUTER_RESIZE=TEXT:ROWSxCOLS it is given that size once TEXT has appeared in
the output (the kernel then sends SIGWINCH to COMMAND)."""
import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios

report_path, argv = sys.argv[1], sys.argv[2:]
master, slave = os.openpty()
info = os.fstat(slave)


def set_size(spec):
    rows, cols = (int(n) for n in spec.split("x"))
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


if os.environ.get("OUTER_SIZE"):
    set_size(os.environ["OUTER_SIZE"])
resize = os.environ.get("OUTER_RESIZE", "")
resize_text, _, resize_size = resize.rpartition(":")


def controlling_terminal():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_terminal)
if os.environ.get("OUTER_INPUT"):
    os.write(master, os.environ["OUTER_INPUT"].encode())
output = b""
while True:
    ready, _, _ = select.select([master], [], [], 0.2)
    if ready:
        output += os.read(master, 65536)
        if resize_text and resize_text.encode() in output:
            set_size(resize_size)
            resize_text = ""
    elif proc.poll() is not None:
        break
code = proc.wait()
# What was still on its way out.
while select.select([master], [], [], 0)[0]:
    output += os.read(master, 65536)

# The user's shell reads its terminal after the command: the marker, typed.
marker = b"USER-SHELL-MARKER-END"
os.write(master, marker + b"\n")
seen = b""
guard = 30
while marker not in seen:
    ready, _, _ = select.select([slave], [], [], guard)
    if not ready:
        break
    seen += os.read(slave, 65536)
injected = seen.split(marker)[0] if marker in seen else seen
with open(report_path, "w") as report:
    json.dump(
        {
            "code": code,
            "output": output.decode("utf-8", "replace"),
            "injected": injected.decode("utf-8", "replace"),
            "marker_seen": marker in seen,
            "tty": [info.st_dev, info.st_rdev],
            "tty_name": os.ttyname(slave),
        },
        report,
    )
