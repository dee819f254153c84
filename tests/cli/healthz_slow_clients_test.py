#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The real rdma-device-plugin's /healthz under hostile clients on its port (CTest): 200 idle
connections (half with an unfinished request line) and 100 slowlorises writing a header byte every
100 ms stay open while /healthz is asked five times; each answer must come within the DaemonSet's
liveness probe timeout (1 s). 120 such clients starved the thread-per-connection server it had
before. Then /metrics still answers, and a connection held past 2 s has been closed by the server.
Usage: healthz_slow_clients_test.py <rdma-device-plugin> <sysfs fixture>
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

failures = []


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=5.0):
    """(status line, body, seconds) of one GET."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body.decode(), time.monotonic() - t0


def main(plugin, fixture):
    tmp = tempfile.mkdtemp(prefix="kuberdma-healthz-")
    os.makedirs(f"{tmp}/plugins")
    with open(f"{tmp}/config.json", "w") as f:
        json.dump({"configList": [{"resourceName": "hca", "rdmaHcaMax": 1, "policy": "per-hca"}]}, f)
    port = free_port()
    proc = subprocess.Popen([plugin, "--config", f"{tmp}/config.json", "--device-plugin-dir",
                             f"{tmp}/plugins", "--sysfs-root", fixture, "--metrics-address",
                             "127.0.0.1", "--metrics-port", str(port), "--allocations-dir",
                             f"{tmp}/allocations", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held, stop = [], threading.Event()
    try:
        for _ in range(100):
            try:
                if get(port, "/healthz", 1)[0].endswith("200 OK"):
                    break
            except OSError:
                pass
            time.sleep(0.05)
        for i in range(200):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 2 == 0:
                s.sendall(b"GET / HTTP/1.1\r\n")
            held.append(s)
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        for s in slow:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX-a: ")
        held += slow

        def drip():
            while not stop.wait(0.1):
                for s in slow:
                    try:
                        s.send(b"b")
                    except OSError:
                        pass  # closed by the server: its deadline passed
        threading.Thread(target=drip, daemon=True).start()
        time.sleep(0.3)
        worst = 0.0
        for _ in range(5):
            try:
                status, body, secs = get(port, "/healthz")
            except OSError as e:  # the probe's connection refused or timed out: starved
                status, body, secs = f"no answer ({e})", "", 5.0
            worst = max(worst, secs)
            check(status.endswith("200 OK") and body == "ok\n", f"/healthz with 300 held open: {status!r} in {secs * 1000:.1f} ms")
        check(worst < 1.0, f"every /healthz within the liveness probe's 1 s (worst {worst * 1000:.1f} ms)")
        status, body, secs = get(port, "/metrics")
        check(status.endswith("200 OK") and "kuberdma_registered" in body, f"/metrics answers too ({secs * 1000:.1f} ms)")
        time.sleep(2.3)
        held[1].settimeout(2)
        try:
            closed = held[1].recv(16) == b""
        except OSError:
            closed = True
        check(closed, "an idle connection is closed 2 s after it was accepted")
    finally:
        stop.set()
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=10)
        subprocess.run(["rm", "-rf", tmp], check=False)
    print(f"{len(failures)} failed" if failures else "all slow-client checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
