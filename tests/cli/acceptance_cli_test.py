#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""rdma-validate --mode acceptance as a pod runs it, on a machine without GPUs (CTest):
  - a fleet of one on loopback: the report is a kuberdma-acceptance JSON that fails (no CUDA
    device), exit 1, a baseline file that does not exist yet is noted, and rank 0 POSTs its gauges to a Pushgateway stand-in through the
    rdma-validate-push module beside the binary;
  - a fleet of two where the other pod never comes: rank 0 reports it after --join-timeout (a
    node that never joined fails the fleet, exit 1); a pod whose rank 0 never comes gives up with
    exit 3, naming the coordinator it tried.
  - the acceptance Job's own arguments (deploy/acceptance/20-job.yaml) are ones rdma-validate
    takes: run with them and the Job's environment, it reports (exit 1), never a usage error (2).
Usage: acceptance_cli_test.py <rdma-validate>
"""
import http.server
import json
import socket
import subprocess
import sys
import os
import threading

import yaml

failures = []


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


def free_port():
    """A port whose next one (the coordinator's) is free too, when asked."""
    while True:
        with socket.socket() as s, socket.socket() as t:
            s.bind(("127.0.0.1", 0))
            try:
                t.bind(("127.0.0.1", s.getsockname()[1] + 1))
            except OSError:
                continue
            return s.getsockname()[1]


class Gateway(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        Gateway.received.append((self.command, self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, *args):
        pass


def fleet_of_one(exe):
    gw = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=gw.serve_forever, daemon=True).start()
    r = subprocess.run([exe, "--mode", "acceptance", "--transport", "socket", "--expect", "lo",
                        "--rank", "0", "--world-size", "1", "--comm-id", f"127.0.0.1:{free_port()}",
                        "--node-name", "node-a", "--push-gateway", f"http://127.0.0.1:{gw.server_port}",
                        "--baseline", "/nonexistent/baseline.json", "--json", "-"], capture_output=True, text=True, timeout=120)
    gw.shutdown()
    check(r.returncode == 1, f"a fleet whose only node has no GPU fails with exit 1 (got {r.returncode}: {r.stderr[-400:]})")
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = {}
    check(report.get("kind") == "kuberdma-acceptance" and report.get("verdict") == "fail",
          "the report is a failing kuberdma-acceptance document")
    check([n.get("name") for n in report.get("nodes", [])] == ["node-a"], "the report names the node")
    check("no baseline at /nonexistent/baseline.json yet" in r.stderr,
          "a baseline not saved yet (the Job's optional ConfigMap) is noted, not an error")
    check(len(Gateway.received) == 1, f"rank 0 pushed once ({len(Gateway.received)} requests)")
    if Gateway.received:
        method, path, body = Gateway.received[0]
        check(path == "/metrics/job/kuberdma-acceptance", f"the push goes to the job's group ({method} {path})")
        check('kuberdma_acceptance_node_pass{node="node-a"} 0' in body, "the pushed gauges say the node failed")
        check("kuberdma_acceptance_pass 0" in body, "and that the fleet failed")


def run(exe, rank, port, *extra):
    return subprocess.run([exe, "--mode", "acceptance", "--transport", "socket", "--expect", "lo",
                           "--rank", str(rank), "--world-size", "2", "--comm-id", f"127.0.0.1:{port}",
                           "--node-name", f"node-{rank}", "--join-timeout", "2", "--timeout", "2", *extra],
                          capture_output=True, text=True, timeout=120)


def missing_pods(exe):
    r = run(exe, 0, free_port(), "--json", "-")
    check(r.returncode == 1, f"rank 0 alone reports a failing fleet, exit 1 (got {r.returncode})")
    try:
        nodes = {n["rank"]: n for n in json.loads(r.stdout).get("nodes", [])}
    except (json.JSONDecodeError, KeyError):
        nodes = {}
    problems = " ".join(nodes.get(1, {}).get("problems", []))
    check("never reached the coordinator" in problems and nodes.get(1, {}).get("verdict") == "fail",
          f"rank 1 is in the report as a node that never joined: {problems!r}")
    port = free_port()
    r = run(exe, 1, port)
    check(r.returncode == 3, f"a pod whose rank 0 never comes gives up with exit 3 (got {r.returncode})")
    check(f"127.0.0.1:{port + 1}" in r.stderr, f"naming the coordinator it tried: {r.stderr.strip()[-300:]}")


def job_arguments(exe):
    job = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "acceptance", "20-job.yaml")
    c = yaml.safe_load(open(job))["spec"]["template"]["spec"]["containers"][0]
    env = {"PATH": "/usr/bin:/bin", "WORLD_SIZE": "1", "JOB_COMPLETION_INDEX": "0", "NODE_NAME": "node-a",
           "NCCL_COMM_ID": f"127.0.0.1:{free_port()}"}
    env.update({e["name"]: e["value"] for e in c["env"] if "value" in e and e["name"] not in ("WORLD_SIZE", "NCCL_COMM_ID")})
    r = subprocess.run([exe] + c["args"], capture_output=True, text=True, timeout=120, env=env)
    check(r.returncode == 1 and '"kind": "kuberdma-acceptance"' in r.stdout,
          f"the Job's arguments {c['args']} run a fleet of one here (exit {r.returncode}: {r.stderr.strip()[-300:]})")


if __name__ == "__main__":
    fleet_of_one(sys.argv[1])
    missing_pods(sys.argv[1])
    job_arguments(sys.argv[1])
    print(f"{len(failures)} failed" if failures else "all acceptance CLI checks passed")
    sys.exit(1 if failures else 0)
