#!/usr/bin/env python3
"""Checks the structure of a page tools/telemetry_page.py rendered.

    check_telemetry_page.py PAGE.html --csv RUN.csv [--report REPORT.txt]
                            [--title NAME]

  - the loss series (<polyline id="loss">) exists, its data-points equals
    the CSV's number of steps, and its points attribute holds that many
    points;
  - where the CSV has a seconds column, so does the steps/s series; the
    same for the scale, lr and fp8_saturated columns and their series;
  - where it has a skipped column, the loss and scale curves mark every
    skipped step;
  - with --report: every arena of the report's "Memory (bytes)" table is
    listed in the page's memory table (and the bar's arenas are among them);
  - with --title: the title names the model;
  - the page refers to nothing outside itself: no http:/https: anywhere,
    no <script>, no src= or external href=, no <link>, no @import or url().

Exits 0 when all hold, 1 with one line per failure otherwise.
"""

import argparse
import csv
import re
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.by_id = {}
        self.tags = []  # (tag, attrs)
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            self.by_id[a["id"]] = (tag, a)

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def report_arenas(path):
    lines = open(path).read().splitlines()
    start = next(i for i, l in enumerate(lines)
                 if l.startswith("Memory (bytes)"))
    names = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        m = re.match(r"^  (\S.*?)\s+\d+\s+\d+\s+\S+\s*$", line)
        if m:  # two-space indent: an arena (its parts have four)
            names.append(m.group(1))
    return names


def main():
    p = argparse.ArgumentParser()
    p.add_argument("page")
    p.add_argument("--csv", required=True)
    p.add_argument("--report")
    p.add_argument("--title")
    args = p.parse_args()

    source = open(args.page, encoding="utf-8").read()
    page = Page()
    page.feed(source)
    page.close()
    with open(args.csv, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header, steps = rows[0], rows[1:]
    failures = []

    def check_series(sid, expected):
        if sid not in page.by_id:
            failures.append(f"no element with id '{sid}'")
            return
        tag, a = page.by_id[sid]
        if tag != "polyline":
            failures.append(f"'{sid}' is a <{tag}>, not a <polyline>")
        declared = a.get("data-points")
        points = a.get("points", "").split()
        if declared != str(expected):
            failures.append(f"'{sid}' data-points={declared}, the CSV has "
                            f"{expected} steps")
        if len(points) != expected:
            failures.append(f"'{sid}' polyline has {len(points)} points, "
                            f"the CSV has {expected} steps")
        bad = [pt for pt in points if not re.fullmatch(
            r"-?[\d.]+,-?[\d.]+", pt)]
        if bad:
            failures.append(f"'{sid}' has malformed points, e.g. {bad[0]}")

    check_series("loss", len(steps))
    if "seconds" in header:
        check_series("steps-per-second", len(steps))
    for column, sid in (("scale", "scale"), ("lr", "lr"),
                        ("fp8_saturated", "fp8-saturated")):
        if column in header:
            check_series(sid, len(steps))
    if "skipped" in header:
        at = header.index("skipped")
        skipped = sum(1 for row in steps if row[at].strip() == "1")
        for sid in ("loss-skipped", "scale-skipped"):
            if not skipped:
                continue
            marks = page.by_id.get(sid)
            if not marks:
                failures.append(f"{skipped} skipped steps but no '{sid}'")
            elif marks[1].get("data-points") != str(skipped):
                failures.append(f"'{sid}' marks {marks[1].get('data-points')} "
                                f"steps, the CSV skipped {skipped}")
        print(f"{skipped} skipped steps marked")

    if args.title:
        title = page.by_id.get("title")
        text = "".join(page.text)
        if not title or args.title not in text:
            failures.append(f"the title does not name '{args.title}'")

    if args.report:
        arenas = report_arenas(args.report)
        listed = [a.get("data-name") for t, a in page.tags
                  if t == "tr" and a.get("class") == "arena-row"]
        in_bar = [a.get("data-name") for t, a in page.tags
                  if t == "rect" and a.get("class") == "arena"]
        if "memory" not in page.by_id:
            failures.append("no memory section (id 'memory')")
        for name in arenas:
            if name not in listed:
                failures.append(f"memory table does not list arena '{name}'")
        if not in_bar:
            failures.append("the memory bar has no arenas")
        for name in in_bar:
            if name not in arenas:
                failures.append(f"memory bar shows '{name}', not an arena "
                                "of the report")
        if not arenas:
            failures.append("the report has no memory arenas")

    lowered = source.lower()
    for needle in ("http:", "https:", "<script", "<link", "@import",
                   "url(", "<iframe", "<img"):
        if needle in lowered:
            failures.append(f"the page contains '{needle}'")
    for tag, a in page.tags:
        if "src" in a:
            failures.append(f"<{tag}> has src={a['src']}")
        href = a.get("href") or a.get("xlink:href")
        if href and not href.startswith("#"):
            failures.append(f"<{tag}> refers to {href}")

    for f in failures:
        print(f"check_telemetry_page: {f}", file=sys.stderr)
    if not failures:
        print(f"ok: {len(steps)} steps in the loss series"
              + (f", {len(report_arenas(args.report))} arenas"
                 if args.report else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
