#!/usr/bin/env python3
"""An HTTP proxy in front of an S3 server that injects faults
(tests/e2e/tests/s3.rs): every request is delayed a little, and a share of
them gets a 503 SlowDown, a 500 InternalError, a connection closed without an
answer, or (GETs) a body cut short after its headers promised all of it.

  s3faults.py LISTEN_PORT UPSTREAM_PORT SHARE_FILE [DELAY_MS]

SHARE_FILE holds the share of requests to fail (0 to 1), read at every
request, so that a test can format with no faults and then turn them on.
DELAY_MS delays every request by exactly that many milliseconds instead
(bench/inline/s3: a store as far away as a real S3 service; with a share
of 0, a latency proxy and nothing else).

LISTEN_PORT 0 binds a free port. Prints "ready PORT" once listening; counts of what it did go to stderr on exit.
"""
import http.client
import http.server
import random
import socket
import sys
import threading
import time

listen_port, upstream_port, share_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
fixed_delay = float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else None
rng = random.Random(29)
rng_lock = threading.Lock()
counts = {}


def count(what):
    with rng_lock:
        counts[what] = counts.get(what, 0) + 1


def draw():
    with rng_lock:
        return rng.random(), rng.random()


SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b'<Message>Please reduce your request rate.</Message></Error>')
INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
            b'<Message>We encountered an internal error. Please try again.</Message></Error>')


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        time.sleep(fixed_delay if fixed_delay is not None else 0.002 + 0.02 * draw()[0])
        roll, pick = draw()
        with open(share_file) as f:
            share = float(f.read().strip() or 0)
        fault = None
        if roll < share:
            fault = ["slowdown", "internal", "reset", "truncate"][int(pick * 4)]
            if fault == "truncate" and self.command != "GET":
                fault = "reset"
        if fault == "slowdown":
            count(fault)
            return self.answer(503, SLOW_DOWN)
        if fault == "internal":
            count(fault)
            return self.answer(500, INTERNAL)
        if fault == "reset" and self.command != "GET":
            # the request is not passed on: the store never saw it
            count(fault)
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return
        upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "expect")}
        upstream.request(self.command, self.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        upstream.close()
        if fault == "reset":
            count(fault)
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            return
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "truncate" and len(data) > 1:
            count(fault)
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        count("passed")
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen_port), Proxy)
    server.daemon_threads = True
    print("ready", server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        print(counts, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
