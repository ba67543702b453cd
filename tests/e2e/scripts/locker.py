#!/usr/bin/env python3
"""A process that holds a file and takes locks, writes and fsyncs as the tests
tell it, one command per line on stdin, one answer per line on stdout
(tests/e2e/src/locker.rs):

  open PATH                  -> ok
  flock sh|ex|un [nb]        -> ok | busy | interrupted | deadlock | error ERRNO
  lock rd|wr|un START LEN [nb]   (fcntl F_SETLK / F_SETLKW)  -> same answers
  ofd rd|wr|un START LEN [nb]    (fcntl F_OFD_SETLK / F_OFD_SETLKW) -> same answers
  getlk rd|wr START LEN      -> unlocked | TYPE START LEN PID
  alarm SECS                 -> ok (the next blocking call is interrupted after SECS)
  pid                        -> this process's pid
  write TEXT                 -> ok | error ERRNO (at the file's offset)
  fsync                      -> ok | error ERRNO
  ino                        -> the file's inode number
  burst DIR NAME PID         -> stopped: creates DIR/NAME-pre0..2 (closed), then
                                holds DIR/NAME, writes "written by a" to it and
                                stops process PID (SIGSTOP), all at once
  close                      -> ok | error ERRNO
"""
import errno
import fcntl
import os
import signal
import struct
import sys

FLOCK = {"sh": fcntl.LOCK_SH, "ex": fcntl.LOCK_EX, "un": fcntl.LOCK_UN}
TYPE = {"rd": fcntl.F_RDLCK, "wr": fcntl.F_WRLCK, "un": fcntl.F_UNLCK}
NAME = {fcntl.F_RDLCK: "rd", fcntl.F_WRLCK: "wr"}
# struct flock on Linux x86_64: l_type, l_whence, l_start, l_len, l_pid
FLOCK_STRUCT = "hhqqi4x"


class Interrupted(Exception):
    pass


def on_alarm(signum, frame):
    raise Interrupted()


signal.signal(signal.SIGALRM, on_alarm)
fd = None


def attempt(fn):
    try:
        fn()
        return "ok"
    except Interrupted:
        return "interrupted"
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return "busy"
        if e.errno == errno.EDEADLK:
            return "deadlock"
        if e.errno == errno.EINTR:
            return "interrupted"
        return f"error {e.errno}"


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    cmd = words[0]
    if cmd == "open":
        fd = os.open(words[1], os.O_RDWR | os.O_CREAT, 0o644)
        answer = "ok"
    elif cmd == "flock":
        op = FLOCK[words[1]] | (fcntl.LOCK_NB if "nb" in words[2:] else 0)
        answer = attempt(lambda: fcntl.flock(fd, op))
    elif cmd == "lock":
        typ, start, length = TYPE[words[1]], int(words[2]), int(words[3])
        op = fcntl.F_SETLK if "nb" in words[4:] else fcntl.F_SETLKW
        arg = struct.pack(FLOCK_STRUCT, typ, os.SEEK_SET, start, length, 0)
        answer = attempt(lambda: fcntl.fcntl(fd, op, arg))
    elif cmd == "ofd":
        typ, start, length = TYPE[words[1]], int(words[2]), int(words[3])
        op = fcntl.F_OFD_SETLK if "nb" in words[4:] else fcntl.F_OFD_SETLKW
        arg = struct.pack(FLOCK_STRUCT, typ, os.SEEK_SET, start, length, 0)
        answer = attempt(lambda: fcntl.fcntl(fd, op, arg))
    elif cmd == "getlk":
        typ, start, length = TYPE[words[1]], int(words[2]), int(words[3])
        arg = struct.pack(FLOCK_STRUCT, typ, os.SEEK_SET, start, length, 0)
        got = struct.unpack(FLOCK_STRUCT, fcntl.fcntl(fd, fcntl.F_GETLK, arg))
        if got[0] == fcntl.F_UNLCK:
            answer = "unlocked"
        else:
            answer = f"{NAME[got[0]]} {got[2]} {got[3]} {got[4]}"
    elif cmd == "alarm":
        signal.alarm(int(words[1]))
        answer = "ok"
    elif cmd == "pid":
        answer = str(os.getpid())
    elif cmd == "write":
        data = line.split(maxsplit=1)[1].rstrip("\n").encode()
        answer = attempt(lambda: os.write(fd, data))
    elif cmd == "fsync":
        answer = attempt(lambda: os.fsync(fd))
    elif cmd == "burst":
        where, name, pid = words[1], words[2], int(words[3])
        for i in range(3):
            os.close(os.open(f"{where}/{name}-pre{i}", os.O_WRONLY | os.O_CREAT, 0o644))
        fd = os.open(f"{where}/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"written by a")
        os.kill(pid, signal.SIGSTOP)
        answer = "stopped"
    elif cmd == "ino":
        answer = str(os.fstat(fd).st_ino)
    elif cmd == "close":
        closing, fd = fd, None
        answer = attempt(lambda: os.close(closing))
    else:
        answer = f"unknown command {cmd}"
    signal.alarm(0) if cmd != "alarm" else None
    print(answer, flush=True)
