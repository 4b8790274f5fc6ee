#!/usr/bin/env python3
"""Renders a training run's telemetry as one self-contained HTML page.

    python3 tools/telemetry_page.py RUN.csv [--report REPORT.txt]
                                    [--title NAME] [-o PAGE.html]

RUN.csv is the per-step log the example apps write with --csv=FILE. Its
header names the columns; `step` and `loss` are required, the rest are drawn
when present and left out otherwise:

  seconds     wall-clock seconds since training began (cumulative); drawn as
              steps/s over a sliding window
  scale       the loss scale; drawn on a log2 axis
  skipped     1 where the step was skipped (non-finite gradients); marked
              on the loss curve (and the scale curve)
  grad_norm   the gradient norm (empty cells: not computed that step)
  lr          the learning rate
  fp8_saturated  FP8 elements clipped to the format's largest value in the
              step (delayed scaling: values that outgrew the amax history)

REPORT.txt is the text of `mpc compile --report` for the same model; its
"Memory (bytes)" table becomes a memory breakdown bar and table.

The page is HTML with inline SVG: no scripts, no styles or fonts from
elsewhere. Every series is an SVG element with a stable id, class "series"
and data-points (its number of points), e.g.
  <polyline id="loss" class="series" data-points="2000" points="...">
so that tests can check the page's structure. Memory arenas are
<rect class="arena" data-name=... data-bytes=...> in the bar and
<tr class="arena-row" ...> in the table.

Errors in the input (a missing file, an empty CSV, no step or loss column, a
value that is not a number) print one line to stderr and exit with 1.
"""

import argparse
import csv
import html
import math
import os
import re
import sys


class InputError(Exception):
    pass


# Optional columns, by the names they may go by.
ALIASES = {
    "seconds": ("seconds", "time", "elapsed"),
    "scale": ("scale", "loss_scale"),
    "skipped": ("skipped", "skip"),
    "grad_norm": ("grad_norm", "gradnorm", "grad-norm", "gradient_norm"),
    "lr": ("lr", "learning_rate"),
    "fp8_saturated": ("fp8_saturated",),
}


def parse_number(text, path, line, column, allow_empty):
    text = text.strip()
    if text == "":
        if allow_empty:
            return None
        raise InputError(f"{path}:{line}: empty value in column '{column}'")
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{path}:{line}: value '{text}' in column "
                         f"'{column}' is not a number") from None


def read_csv(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: not a readable CSV file ({e})") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"{path}: empty CSV (no header, no steps)")
    header = [h.strip().lower() for h in rows[0]]
    for required in ("step", "loss"):
        if required not in header:
            raise InputError(f"{path}: no '{required}' column in the header "
                             f"({','.join(rows[0])})")
    if len(rows) == 1:
        raise InputError(f"{path}: no steps (only the header line)")
    columns = {"step": header.index("step"), "loss": header.index("loss")}
    for key, names in ALIASES.items():
        for name in names:
            if name in header:
                columns[key] = header.index(name)
                break
    data = {key: [] for key in columns}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) < len(header):
            raise InputError(f"{path}:{number}: {len(row)} values, the header "
                             f"has {len(header)}")
        for key, index in columns.items():
            required = key in ("step", "loss")
            value = parse_number(row[index], path, number, header[index],
                                 allow_empty=not required)
            if key == "step" and not math.isfinite(value):
                raise InputError(f"{path}:{number}: step '{row[index]}' is "
                                 "not a finite number")
            data[key].append(value)
    return data


def read_memory(path):
    """The rows of the report's "Memory (bytes)" table: a list of
    (name, bytes, level) with level 0 for arenas, 1 for their parts, and
    the label of the column the bytes come from."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None
    start = next((i for i, l in enumerate(lines)
                  if l.startswith("Memory (bytes)")), None)
    if start is None:
        raise InputError(f"{path}: no 'Memory (bytes)' table (is it the "
                         "output of mpc compile --report?)")
    m = re.match(r"Memory \(bytes\), (.*) beside (\S+):", lines[start])
    label = m.group(1) if m else "bytes"
    rows = []
    row_re = re.compile(r"^(\s+)(\S.*?)\s+(\d+)\s+(\d+)\s+(\S+)\s*$")
    for line in lines[start + 2:]:
        if not line.strip():
            break
        r = row_re.match(line)
        if not r:
            raise InputError(f"{path}: unexpected line in the memory table: "
                             f"'{line.strip()}'")
        level = 0 if len(r.group(1)) <= 2 else 1
        rows.append((r.group(2), int(r.group(4)), level))
    if not rows:
        raise InputError(f"{path}: the 'Memory (bytes)' table has no rows")
    return rows, label


# ---------------------------------------------------------------- drawing

W, H = 1100, 250
LEFT, RIGHT, TOP, BOTTOM = 80, 20, 14, 36
COLORS = {"loss": "#1f5fbf", "steps-per-second": "#2a8a3a",
          "scale": "#8a3ab9", "grad-norm": "#c0611a", "lr": "#5a5a5a",
          "fp8-saturated": "#b8860b"}


def fmt(v):
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def tick_label(t, ticks):
    """`t` with as many decimals as the ticks' spacing needs."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 0
    if step == 0 or abs(t) >= 1e5 or (t and abs(t) < 1e-3 and step < 1e-3):
        return fmt(t)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if step * 10 ** decimals % 1 > 1e-6:
        decimals += 1
    return f"{t:.{decimals}f}"


def nice_ticks(lo, hi, count=6):
    if hi <= lo:
        hi = lo + (abs(lo) if lo else 1.0)
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    n = int(round((last - first) / step))
    return [first + i * step for i in range(n + 1)]


def log2_ticks(lo, hi):
    a, b = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    if b == a:
        b = a + 1
    stride = max(1, math.ceil((b - a) / 8))
    return [2.0 ** e for e in range(a, b + 1, stride)]


def chart(sid, title, xs, ys, log=False, marks=(), note=""):
    """One chart: axes, tick labels, a polyline of (xs, ys) with id `sid`,
    and red markers at the x values in `marks`. Points without a finite
    value (None, nan, inf, or <= 0 on a log axis) are left out of the
    polyline; data-points counts the ones drawn."""
    pts = [(x, y) for x, y in zip(xs, ys)
           if y is not None and math.isfinite(y) and (y > 0 or not log)]
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    out = [f'<section class="chart" id="{sid}-chart">',
           f'<h2>{html.escape(title)}</h2>']
    if note:
        out.append(f'<p class="note">{note}</p>')
    out.append(f'<svg width="{W}" '
               f'height="{H}" viewBox="0 0 {W} {H}" role="img" '
               f'aria-label="{html.escape(title)}">')
    xlo, xhi = min(xs), max(xs)
    if xhi == xlo:
        xhi = xlo + 1
    xt = nice_ticks(xlo, xhi)
    xt = [t for t in xt if xlo <= t <= xhi] or [xlo, xhi]
    if pts:
        vals = [y for _, y in pts]
        if log:
            yt = log2_ticks(min(vals), max(vals))
            ylo, yhi = math.log2(yt[0]), math.log2(yt[-1])
        else:
            lo, hi = min(vals), max(vals)
            if hi - lo <= 1e-9 * max(abs(hi), abs(lo)):  # constant
                lo = hi = (hi + lo) / 2
            pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
            yt = nice_ticks(lo - pad, hi + pad)
            ylo, yhi = yt[0], yt[-1]
    else:
        yt, ylo, yhi = [], 0.0, 1.0

    def px(x):
        return LEFT + (x - xlo) / (xhi - xlo) * pw

    def py(y):
        v = math.log2(y) if log else y
        return TOP + ph - (v - ylo) / ((yhi - ylo) or 1) * ph

    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" '
               'fill="#fbfbfb" stroke="#999"/>')
    out.append('<g class="y-axis" font-size="11" text-anchor="end">')
    for t in yt:
        y = py(t)
        label = f"2^{round(math.log2(t))}" if log else tick_label(t, yt)
        out.append(f'<line x1="{LEFT - 4}" x2="{LEFT + pw}" y1="{y:.1f}" '
                   f'y2="{y:.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{LEFT - 7}" y="{y + 4:.1f}">{label}</text>')
    out.append('</g><g class="x-axis" font-size="11" text-anchor="middle">')
    for t in xt:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP + ph}" '
                   f'y2="{TOP + ph + 4}" stroke="#999"/>'
                   f'<text x="{x:.1f}" y="{TOP + ph + 17}">{fmt(t)}</text>')
    out.append(f'</g><text x="{LEFT + pw / 2}" y="{H - 3}" font-size="11" '
               'text-anchor="middle">step</text>')
    coords = " ".join(f"{px(x):.2f},{py(y):.3f}" for x, y in pts)
    out.append(f'<polyline id="{sid}" class="series" '
               f'data-points="{len(pts)}" fill="none" '
               f'stroke="{COLORS.get(sid, "#333")}" stroke-width="1.2" '
               f'points="{coords}"/>')
    if marks:
        out.append(f'<g id="{sid}-skipped" class="skipped-steps" '
                   f'data-points="{len(marks)}" fill="#d02020">')
        for x in marks:
            out.append(f'<line x1="{px(x):.2f}" x2="{px(x):.2f}" '
                       f'y1="{TOP}" y2="{TOP + ph}" stroke="#d02020" '
                       'stroke-opacity="0.35"/>'
                       f'<circle cx="{px(x):.2f}" cy="{TOP + 5}" r="2.5"/>')
        out.append('</g>')
    out.append('</svg></section>')
    return "\n".join(out)


def throughput(steps, seconds):
    """steps/s at each step over a sliding window of about 2% of the run."""
    n = len(steps)
    window = max(1, n // 50)
    rates = []
    for i in range(n):
        j = max(0, i - window)
        t0 = seconds[j] if j < i else 0.0
        s0 = steps[j] if j < i else steps[0] - 1
        dt = (seconds[i] or 0.0) - (t0 or 0.0)
        rates.append((steps[i] - s0) / dt if dt and dt > 0 else None)
    return rates


def memory_section(rows, label):
    arenas = [(n, b) for n, b, lvl in rows
              if lvl == 0 and n != "total" and "eval" not in n]
    total = next((b for n, b, _ in rows if n == "total"),
                 sum(b for _, b in arenas))
    palette = ["#1f5fbf", "#c0611a", "#2a8a3a", "#8a3ab9", "#b0a020",
               "#5a5a5a"]
    bw, bh = W - LEFT - RIGHT, 34
    out = ['<section id="memory"><h2>Memory (bytes), '
           f'{html.escape(label)}: {total:,} in all</h2>',
           f'<svg width="{W}" '
           f'height="{bh + 30}" viewBox="0 0 {W} {bh + 30}">',
           f'<g id="memory-bar" data-points="{len(arenas)}">']
    x = LEFT
    denom = sum(b for _, b in arenas) or 1
    for i, (name, b) in enumerate(arenas):
        w = b / denom * bw
        color = palette[i % len(palette)]
        out.append(f'<rect class="arena" data-name="{html.escape(name)}" '
                   f'data-bytes="{b}" x="{x:.1f}" y="4" width="{w:.1f}" '
                   f'height="{bh}" fill="{color}"><title>'
                   f'{html.escape(name)}: {b:,} bytes</title></rect>')
        if w > 90:
            out.append(f'<text x="{x + w / 2:.1f}" y="{bh / 2 + 8}" '
                       'font-size="11" fill="#fff" text-anchor="middle">'
                       f'{100 * b / denom:.0f}%</text>')
        x += w
    out.append('</g>')
    lx = LEFT
    for i, (name, b) in enumerate(arenas):
        out.append(f'<rect x="{lx}" y="{bh + 14}" width="10" height="10" '
                   f'fill="{palette[i % len(palette)]}"/>'
                   f'<text x="{lx + 14}" y="{bh + 23}" font-size="11">'
                   f'{html.escape(name)}</text>')
        lx += 30 + 6.2 * len(name)
    out.append('</svg>')
    out.append('<table class="memory"><tr><th>arena</th><th>bytes</th>'
               '<th>of total</th></tr>')
    for name, b, lvl in rows:
        cls = "arena-row" if lvl == 0 else "part-row"
        share = f"{100 * b / total:.1f}%" if total else "-"
        pad = "&#160;" * 4 * lvl
        out.append(f'<tr class="{cls}" data-name="{html.escape(name)}" '
                   f'data-bytes="{b}"><td>{pad}{html.escape(name)}</td>'
                   f'<td class="num">{b:,}</td><td class="num">{share}</td>'
                   '</tr>')
    out.append('</table></section>')
    return "\n".join(out)


STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 15px; margin: 18px 0 4px; }
.summary { font-size: 13px; color: #444; }
.note { font-size: 12px; color: #555; margin: 0 0 4px; }
table.memory { border-collapse: collapse; font-size: 12px; }
table.memory td, table.memory th { padding: 2px 10px; text-align: left; }
table.memory td.num { text-align: right; font-family: monospace; }
tr.arena-row { font-weight: bold; }
"""


def render(data, title, memory):
    steps, loss = data["step"], data["loss"]
    n = len(steps)
    finite = [(s, l) for s, l in zip(steps, loss) if math.isfinite(l)]
    skipped = [s for s, k in zip(steps, data.get("skipped", []))
               if k is not None and k != 0]
    parts = []
    summary = [f"{n} steps ({fmt(steps[0])} to {fmt(steps[-1])})"]
    if finite:
        smin, lmin = min(finite, key=lambda p: p[1])
        summary.append(f"loss first {loss[0]:.4f}, min {lmin:.4f} at step "
                       f"{fmt(smin)}, final {loss[-1]:.4f}")
    if "seconds" in data and data["seconds"][-1] is not None:
        total = data["seconds"][-1]
        summary.append(f"{total:.2f} s in all, {n / total:.1f} steps/s"
                       if total > 0 else f"{total:.2f} s in all")
    if "skipped" in data:
        summary.append(f"{len(skipped)} skipped step(s)")
    parts.append(f'<p class="summary" id="summary">{"; ".join(summary)}'
                 "</p>")
    loss_note = (f'min <span id="loss-min">{lmin:.4f}</span>, final '
                 f'<span id="loss-final">{loss[-1]:.4f}</span>'
                 if finite else "no finite loss")
    if "skipped" in data:
        loss_note += "; red lines: skipped steps"
    parts.append(chart("loss", "Loss", steps, loss, marks=skipped,
                       note=loss_note))
    if "seconds" in data:
        parts.append(chart("steps-per-second", "Throughput (steps/s)", steps,
                           throughput(steps, data["seconds"]),
                           note="over a sliding window of "
                                f"{max(1, n // 50)} step(s)"))
    if "scale" in data:
        parts.append(chart("scale", "Loss scale (log2 axis)", steps,
                           data["scale"], log=True, marks=skipped))
    if "grad_norm" in data:
        parts.append(chart("grad-norm", "Gradient norm", steps,
                           data["grad_norm"],
                           note="steps where it was not computed are left "
                                "out"))
    if "lr" in data:
        parts.append(chart("lr", "Learning rate", steps, data["lr"]))
    if "fp8_saturated" in data:
        clipped = sum(v for v in data["fp8_saturated"] if v is not None)
        parts.append(chart("fp8-saturated", "FP8 saturations (elements "
                           "clipped a step)", steps, data["fp8_saturated"],
                           note=f"{fmt(clipped)} in all; delayed scaling "
                                "clips what outgrew its amax history"))
    if memory:
        parts.append(memory_section(*memory))
    body = "\n".join(parts)
    t = html.escape(title)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>{t}: training telemetry</title><style>{STYLE}</style>'
            f'</head><body>\n<h1 id="title">{t}: training telemetry</h1>\n'
            f'{body}\n</body></html>\n')


def main(argv):
    p = argparse.ArgumentParser(
        description="Render a training telemetry CSV as one HTML page.")
    p.add_argument("csv", help="per-step CSV written with --csv=FILE")
    p.add_argument("--report", help="text of `mpc compile --report` for "
                   "the same model (for the memory breakdown)")
    p.add_argument("--title", help="model name for the title (default: "
                   "the CSV's file name)")
    p.add_argument("-o", "--output", help="the HTML file to write "
                   "(default: the CSV's name with .html)")
    args = p.parse_args(argv)
    try:
        data = read_csv(args.csv)
        memory = read_memory(args.report) if args.report else None
        title = args.title or os.path.splitext(os.path.basename(args.csv))[0]
        page = render(data, title, memory)
        output = args.output or os.path.splitext(args.csv)[0] + ".html"
        try:
            with open(output, "w") as f:
                f.write(page)
        except OSError as e:
            raise InputError(f"cannot write {output}: {e.strerror}") from None
    except InputError as e:
        print(f"telemetry_page: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {output}: {len(data['step'])} steps"
          + (", memory breakdown" if memory else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
