#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fleet report page in a real browser (Debian's chromium, headless, no network):
  - rdma-validate --html-report turns a real fleet report (tests/fixtures/acceptance) and a
    baseline into one HTML file that names nothing outside itself;
  - chromium loads it with every network path closed, its inline script runs (body data-ready),
    and in the DOM exactly the culprit's cell (node-4, rail 3) is marked, with its evidence and its
    change against the baseline; every other cell is not;
  - a screenshot is taken (the docs' picture is one such);
  - a file that is not a fleet report is refused with exit 2 and a message.
Usage: fleet_report_page_test.py <rdma-validate> <fixtures/acceptance> [screenshot.png]
"""
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


class Cells(html.parser.HTMLParser):
    """Every heatmap cell's attributes, and the body's."""

    def __init__(self):
        super().__init__()
        self.cells, self.body, self.external = [], {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "td" and "cell" in a.get("class", "").split():
            self.cells.append(a)
        for k in ("src", "href"):
            if a.get(k) and not a[k].startswith("#"):
                self.external.append(f"{tag} {k}={a[k]}")
        if tag == "link":
            self.external.append("link")


def chromium(args, profile):
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           # no network at all: every name unresolvable, every connection to a closed port
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def main(validate, fixtures, shot=None):
    if shutil.which("chromium") is None:
        print("SKIP: no chromium (apt-get install chromium)")
        return 77
    tmp = tempfile.mkdtemp(prefix="kuberdma-page-")
    try:
        page = os.path.join(tmp, "fleet.html")
        r = subprocess.run([validate, "--html-report", os.path.join(fixtures, "fleet-6x3-half.json"),
                            "--baseline", os.path.join(fixtures, "fleet-6x3-baseline.json"), "--html", page],
                           capture_output=True, text=True)
        check(r.returncode == 0 and os.path.getsize(page) > 0, f"--html-report writes the page (exit {r.returncode} {r.stderr.strip()})")
        static = Cells()
        static.feed(open(page).read())
        check(not static.external, f"the page names nothing outside itself ({static.external})")

        profile = os.path.join(tmp, "profile")
        os.mkdir(profile)
        r = chromium(["--dump-dom", "file://" + page], profile)
        dom = Cells()
        dom.feed(r.stdout)
        check(r.returncode == 0 and dom.body.get("data-ready") == "1",
              "chromium loads it with no network and its inline script runs")
        check(len(dom.cells) == 18, f"6 nodes x 3 rails of cells ({len(dom.cells)})")
        marked = [(c.get("data-node"), c.get("data-rail")) for c in dom.cells if "culprit" in c.get("class", "").split()]
        check(marked == [("node-4", "3")], f"exactly the culprit's cell is marked: node-4 rail 3 ({marked})")
        check(dom.body.get("data-culprit-cells") == "1", "the page's own count of marked cells is 1")
        cell = next((c for c in dom.cells if (c.get("data-node"), c.get("data-rail")) == ("node-4", "3")), {})
        check("0.07 GB/s with node-3 (round 1)" in cell.get("data-evidence", "")
              and cell.get("data-hca") == "net3" and float(cell.get("data-ratio", "9")) < 0.5,
              f"the culprit cell carries its evidence, HCA and ratio ({cell.get('data-evidence')})")
        check(re.search(r'data-node="node-4" data-rail="3".*?<span class="delta down">-6\d% vs baseline', r.stdout, re.S)
              is not None, "the culprit cell shows its drop against the baseline")
        healthy = [c for c in dom.cells if c not in [cell]]
        check(all(float(c.get("data-ratio", "0")) > 0.8 for c in healthy), "every other cell is near the median")

        png = os.path.join(tmp, "fleet.png")
        r = chromium([f"--screenshot={png}", "--window-size=1100,820", "file://" + page], profile)
        ok = os.path.isfile(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        check(ok, "a screenshot is taken")
        if ok and shot:
            shutil.copy(png, shot)

        bad = os.path.join(tmp, "bad.json")
        open(bad, "w").write('{"verdict": "pass"}')
        r = subprocess.run([validate, "--html-report", bad, "--html", page], capture_output=True, text=True)
        check(r.returncode == 2 and "not a kuberdma-acceptance report" in r.stderr,
              f"a file that is not a fleet report: exit 2 and why ({r.returncode}: {r.stderr.strip()})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failed" if failures else "all page checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
