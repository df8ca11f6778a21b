# Run inside the sandbox by `git mullet shell JOB -- python3 -c ...`: tries
# TIOCSTI ("type" a command into the terminal's input) on stdin, stdout,
# stderr and /dev/tty, and tells what each descriptor is (st_dev, st_rdev),
# one line each: "FD name dev rdev injected|denied:<why>".
import fcntl
import os
import termios

fds = [("0", 0), ("1", 1), ("2", 2)]
try:
    fds.append(("tty", os.open("/dev/tty", os.O_RDWR)))
except OSError as error:
    print("FD tty - - open-denied:" + error.strerror)
for name, fd in fds:
    info = os.fstat(fd)
    result = "injected"
    try:
        for byte in b"touch /tmp/pwned-by-tiocsti\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
    except OSError as error:
        result = "denied:" + error.strerror
    print("FD %s %d %d %s" % (name, info.st_dev, info.st_rdev, result), flush=True)
print("INNER-DONE", flush=True)
