#!/usr/bin/env python3
"""bench/checkpoint: seed 003's experiment — does a checkpoint starve a concurrent scan?

A cold scan (TPC-H lineitem, heap, O_DIRECT) runs alone, then beside a checkpoint of
>= 1 GB of committed rows, at --max-async-io 1, 8, 32, 255, with the checkpoint's pacing
off and on. Per setting (medians over rounds): scan MB/s alone and during the checkpoint
(over the checkpoint's own window), the share kept, checkpoint time and MB/s, write count,
average write size, most writes outstanding. The driver is `flashscan bench checkpoint`
(crates/bench/src/checkpoint.rs); this script builds, prepares the data, runs it and
writes results/summary.md, results/report.json and results/chart.svg.

    python3 bench/checkpoint/run.py                 # the documented run (5 rounds)
    python3 bench/checkpoint/run.py --rounds 1 --dirty 256M   # quick look

Needs root to drop the page cache between trials (else --no-drop-caches: the scans read
with O_DIRECT either way). Target (issue 11): at the default cap (32) the scan keeps
>= 80 % of its speed alone.
"""
import argparse, json, os, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def flashscan_bin(skip_build):
    if not skip_build:
        sh(["cargo", "build", "--release", "-q", "-p", "flashscan-cli"], cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "flashscan")


def chart_svg(report, path):
    rows = report["summary"]
    caps = sorted({r["max_async_io"] for r in rows})
    paces = sorted({r["pace"] for r in rows})
    colours = {False: "#c0392b", True: "#2471a3"}
    W, H, pad = 460, 300, 50
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * 2}" height="{H}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>']

    def panel(ox, title, key, scale_max, fmt, line80=False):
        svg.append(f'<text x="{ox + pad}" y="16" font-weight="bold">{title}</text>')
        x0, y0, y1 = ox + pad, H - 40, 30
        svg.append(f'<line x1="{x0}" y1="{y0}" x2="{ox + W - 10}" y2="{y0}" stroke="#999"/>')
        svg.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#999"/>')
        svg.append(f'<text x="{ox + 4}" y="{y1 + 4}">{fmt(scale_max)}</text><text x="{ox + 4}" y="{y0}">0</text>')
        if line80:
            y = y0 - (y0 - y1) * 0.8 / scale_max
            svg.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{ox + W - 10}" y2="{y:.1f}" stroke="#27ae60" stroke-dasharray="4 3"/>')
            svg.append(f'<text x="{ox + W - 70}" y="{y - 4:.1f}" fill="#27ae60">target 80 %</text>')
        group = (W - pad - 20) / len(caps)
        bar = group / (len(paces) + 1)
        for i, cap in enumerate(caps):
            gx = x0 + 10 + i * group
            svg.append(f'<text x="{gx + bar * len(paces) / 2 - 10:.1f}" y="{y0 + 14}">cap {cap}</text>')
            for j, pace in enumerate(paces):
                r = next((r for r in rows if r["max_async_io"] == cap and r["pace"] == pace), None)
                if r is None:
                    continue
                v = r[key]
                h = (y0 - y1) * min(v, scale_max) / scale_max
                x = gx + j * bar
                svg.append(f'<rect x="{x:.1f}" y="{y0 - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" fill="{colours[pace]}"/>')
                svg.append(f'<text x="{x:.1f}" y="{y0 - h - 3:.1f}" font-size="9">{fmt(v)}</text>')
        for j, pace in enumerate(paces):
            svg.append(f'<rect x="{ox + W - 120}" y="{y1 + 12 * j}" width="10" height="10" fill="{colours[pace]}"/>')
            svg.append(f'<text x="{ox + W - 106}" y="{y1 + 9 + 12 * j}">pacing {"on" if pace else "off"}</text>')

    kept_max = max(1.0, max(r["scan_kept_ratio"] for r in rows) * 1.1)
    panel(0, "scan MB/s during the checkpoint, share of alone", "scan_kept_ratio", kept_max, lambda v: f"{v * 100:.0f}%", line80=True)
    mbs_max = max(r["checkpoint_mb_per_s"] for r in rows) * 1.15 or 1
    panel(W, "checkpoint write MB/s (1 GB of pages)", "checkpoint_mb_per_s", mbs_max, lambda v: f"{v:.0f}")
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg))


def summary_md(report, command):
    lines = [f"Command: `{command}`", "",
             f"Scan: {report['scan_table']} `{report['scan_query']}`, cold (O_DIRECT), {report['scan_threads']} threads x depth "
             f"{report['scan_depth']} x {report['scan_io_size_bytes'] >> 10} KiB; {report['dirty_bytes'] / 1e6:.0f} MB of committed rows "
             f"per checkpoint; page cache dropped before each trial: {report['caches_dropped']}. Medians over rounds.", "",
             "| max async io | pacing | rounds | scan alone MB/s | scan during MB/s | kept | checkpoint s | checkpoint MB/s | writes | avg write KB | max outstanding |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in report["summary"]:
        lines.append(f"| {s['max_async_io']} | {'on' if s['pace'] else 'off'} | {s['rounds']} | {s['scan_solo_mb_per_s']:.0f} | "
                     f"{s['scan_during_mb_per_s']:.0f} | {s['scan_kept_ratio'] * 100:.0f} % | {s['checkpoint_s']:.2f} | "
                     f"{s['checkpoint_mb_per_s']:.0f} | {s['writes']:.0f} | {s['avg_write_bytes'] / 1024:.0f} | {s['max_outstanding_writes']:.0f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/work/bench-data/checkpoint")
    ap.add_argument("--sf", default="1", help="TPC-H scale factor of the scanned lineitem")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dirty", default="1G")
    ap.add_argument("--caps", default="1,8,32,255")
    ap.add_argument("--pace", default="off,on")
    ap.add_argument("--no-drop-caches", action="store_true")
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--bin", help="a flashscan binary to run (no build)")
    ap.add_argument("--report", help="only write the table and chart from this saved report.json")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    command = "python3 bench/checkpoint/run.py " + " ".join(sys.argv[1:])
    if a.report:
        with open(a.report) as f:
            report = json.load(f)
        md = summary_md(report, command.strip())
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write(md)
        chart_svg(report, os.path.join(a.out, "chart.svg"))
        print(md)
        return
    fs = a.bin or flashscan_bin(a.skip_build)
    os.makedirs(a.work, exist_ok=True)
    scan_db = os.path.join(a.work, f"scan-sf{a.sf}")
    if not os.path.exists(os.path.join(scan_db, "catalog.json")):
        sh([fs, "load", scan_db, "--sf", a.sf, "--tables", "lineitem"])
    db = os.path.join(a.work, "db")
    cmd = [fs, "bench", "checkpoint", db, "--scan-db", scan_db, "--dirty", a.dirty, "--max-async-io", a.caps,
           "--pace", a.pace, "--rounds", str(a.rounds), "--json"]
    if a.no_drop_caches:
        cmd.append("--no-drop-caches")
    started = time.time()
    out = sh(cmd, stdout=subprocess.PIPE).stdout
    report = json.loads(out)
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    md = summary_md(report, command.strip())
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(md)
    chart_svg(report, os.path.join(a.out, "chart.svg"))
    print(md)
    print(f"({time.time() - started:.0f} s; results in {a.out})")


if __name__ == "__main__":
    main()
