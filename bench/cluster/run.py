#!/usr/bin/env python3
"""bench/cluster: flashscan on 1, 2 and 4 hosts (issue 17), TPC-H Q1, Q6, Q3.

Every host is a `flashscan worker` in its own network namespace made here (fsc-nN-hI, one
veth each onto a bridge made here; the coordinator sits in its own namespace too, so all
query traffic stays on links this script made), limited by a cgroup (cpu.cfs_quota_us) to
the same CPU share: --host-cpus (default 0.5 core), so N hosts have N x that share, as N
machines would. Each host holds its own database, loaded with `flashscan load --host I/N`.

Runs are interleaved: round r runs the query on N=1, N=2, N=4 in turn, --rounds times,
after one untimed warm-up each; medians. Reported per N and query: elapsed (flashscan's own
`elapsed_s`), GB/s scanned (bytes the hosts read / elapsed), bytes per host (from the
per-task figures of EXPLAIN ANALYZE), bytes over the network (the veths' counters around the
timed runs, divided by the rounds), and the coordinator's CPU seconds.

    sudo python3 bench/cluster/run.py --sf 1 --rounds 5            # the documented run
    sudo python3 bench/cluster/run.py --sf 0.1 --rounds 1 --hosts 1,2   # quick look

Needs root (namespaces, cgroup v1 cpu controller), a release flashscan with the cluster
feature (--bin, or built here into $CARGO_TARGET_DIR). Removes what it made on exit.
"""
import argparse, json, os, re, shutil, signal, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
QUERY_DIR = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
TABLES = ["customer", "orders", "lineitem"]
BRIDGE = "fsc-br0"
SUBNET = "10.77.0"
CGROUP = "/sys/fs/cgroup/cpu"
PERIOD_US = 100_000
PORT = 7070


def sh(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, **kw)


def query_text(n):
    with open(os.path.join(QUERY_DIR, f"q{n:02}.sql")) as f:
        return f.read()


class Lab:
    """Namespaces, veths, the bridge and cgroups this run made; all removed by close()."""

    def __init__(self):
        self.netns, self.links, self.cgroups, self.procs = [], [], [], []
        self.next_ip = 10

    def setup_bridge(self):
        sh(["ip", "link", "add", BRIDGE, "type", "bridge"])
        self.links.append(BRIDGE)
        sh(["ip", "link", "set", BRIDGE, "up"])

    def namespace(self, name, cpus):
        """A namespace on the bridge with one address, and a cgroup of `cpus` cores."""
        ip = f"{SUBNET}.{self.next_ip}"
        veth, peer = f"v{self.next_ip}-{name}"[:15], f"p{self.next_ip}"
        self.next_ip += 1
        sh(["ip", "netns", "add", name])
        self.netns.append(name)
        sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", peer])
        self.links.append(veth)
        sh(["ip", "link", "set", peer, "netns", name])
        sh(["ip", "link", "set", veth, "master", BRIDGE])
        sh(["ip", "link", "set", veth, "up"])
        sh(["ip", "netns", "exec", name, "ip", "addr", "add", f"{ip}/24", "dev", peer])
        sh(["ip", "netns", "exec", name, "ip", "link", "set", peer, "up"])
        sh(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"])
        cg = os.path.join(CGROUP, f"fsc-{name}")
        os.makedirs(cg, exist_ok=True)
        self.cgroups.append(cg)
        with open(os.path.join(cg, "cpu.cfs_period_us"), "w") as f:
            f.write(str(PERIOD_US))
        with open(os.path.join(cg, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(PERIOD_US * cpus)))
        return ip, veth, cg

    def run_in(self, name, cg, argv, **kw):
        """`argv` in namespace `name`, inside cgroup `cg` (joined before exec)."""
        wrapped = ["ip", "netns", "exec", name, "sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$@"', "sh"] + argv
        return wrapped

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for n in self.netns:
            sh(["ip", "netns", "del", n], check=False)
        for l in reversed(self.links):
            sh(["ip", "link", "del", l], check=False, stderr=subprocess.DEVNULL)
        for cg in self.cgroups:
            try:
                os.rmdir(cg)
            except OSError:
                pass


def link_bytes(veth):
    s = open(f"/sys/class/net/{veth}/statistics/rx_bytes").read(), open(f"/sys/class/net/{veth}/statistics/tx_bytes").read()
    return int(s[0]) + int(s[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--hosts", default="1,2,4")
    ap.add_argument("--queries", default="1,6,3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--host-cpus", type=float, default=0.5)
    ap.add_argument("--work", default="/root/flashscan-bench/cluster")
    ap.add_argument("--bin", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    hosts = [int(x) for x in args.hosts.split(",")]
    queries = [int(x) for x in args.queries.split(",")]
    fs = args.bin or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "flashscan")
    if not args.bin:
        sh(["cargo", "build", "--release", "-q", "-p", "flashscan-cli", "--features", "cluster"], cwd=ROOT)
    os.makedirs(args.work, exist_ok=True)

    # Databases: host I of N at WORK/sfS-nN/hI, loaded once and reused.
    dbs = {}
    for n in hosts:
        for i in range(n):
            db = os.path.join(args.work, f"sf{args.sf}-p{args.partitions}-n{n}", f"h{i}")
            if not os.path.exists(os.path.join(db, "catalog.json")):
                t = time.perf_counter()
                sh([fs, "load", db, "--sf", str(args.sf), "--tables", ",".join(TABLES), "--partitions", str(args.partitions), "--host", f"{i}/{n}"], stdout=subprocess.DEVNULL)
                print(f"load host {i}/{n}: {time.perf_counter() - t:.1f} s", flush=True)
            dbs[(n, i)] = db

    lab = Lab()
    try:
        lab.setup_bridge()
        clusters = {}
        for n in hosts:
            entries, veths = [], []
            for i in range(n):
                name = f"fsc-n{n}-h{i}"
                ip, veth, cg = lab.namespace(name, args.host_cpus)
                veths.append(veth)
                argv = lab.run_in(name, cg, [fs, "worker", dbs[(n, i)], "--listen", f"{ip}:{PORT}"])
                lab.procs.append(subprocess.Popen(argv, stderr=subprocess.DEVNULL))
                entries.append(f"{ip}:{PORT}={dbs[(n, i)]}")
            coord = f"fsc-n{n}-c"
            _, cveth, ccg = lab.namespace(coord, args.host_cpus)
            cfile = os.path.join(args.work, f"cluster-n{n}.json")
            if os.path.exists(cfile):
                os.remove(cfile)
            sh([fs, "cluster", "make", cfile] + sum([["--host", e] for e in entries], []), stdout=subprocess.DEVNULL)
            clusters[n] = (coord, ccg, cfile, veths)
        time.sleep(1.0)

        def run(n, q, explain=False):
            coord, ccg, cfile, _ = clusters[n]
            text = query_text(q)
            if explain:
                text = "EXPLAIN ANALYZE " + text
            argv = lab.run_in(coord, ccg, [fs, "sql", "--cluster", cfile, "--json", text])
            t0 = os.times()
            out = sh(argv, capture_output=True, text=True)
            t1 = os.times()
            cpu = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
            return out.stdout, cpu

        # Bytes per host: EXPLAIN ANALYZE's per-task table, once per N and query.
        per_host = {}
        for n in hosts:
            for q in queries:
                text, _ = run(n, q, explain=True)
                bytes_by_host = {}
                for line in text.splitlines():
                    cells = [c.strip() for c in line.strip().strip("|").split("|")]
                    if len(cells) == 8 and cells[1].isdigit():
                        bytes_by_host[int(cells[1])] = bytes_by_host.get(int(cells[1]), 0) + int(cells[7])
                per_host[(n, q)] = bytes_by_host
                run(n, q)  # warm-up
        elapsed = {(n, q): [] for n in hosts for q in queries}
        cpu_s = {(n, q): [] for n in hosts for q in queries}
        net = {(n, q): 0 for n in hosts for q in queries}
        for r in range(args.rounds):
            for q in queries:
                for n in hosts:
                    veths = clusters[n][3]
                    before = sum(link_bytes(v) for v in veths)
                    out, cpu = run(n, q)
                    net[(n, q)] += sum(link_bytes(v) for v in veths) - before
                    elapsed[(n, q)].append(json.loads(out.splitlines()[0])["elapsed_s"] if out.startswith("{") else json.loads(out)["elapsed_s"])
                    cpu_s[(n, q)].append(cpu)
            print(f"round {r + 1}/{args.rounds} done", flush=True)

        lines = [
            f"TPC-H SF {args.sf}, {args.partitions} partitions, {args.host_cpus} core per host (cgroup), medians of {args.rounds} interleaved rounds",
            "",
            "| query | hosts | elapsed s | GB/s scanned | bytes per host (MB) | network MB per run | coordinator CPU s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for q in queries:
            for n in hosts:
                e = statistics.median(elapsed[(n, q)])
                b = per_host[(n, q)]
                total = sum(b.values())
                mb = ", ".join(f"{b.get(i, 0) / 1e6:.0f}" for i in range(n))
                lines.append(f"| Q{q} | {n} | {e:.3f} | {total / e / 1e9:.2f} | {mb} | {net[(n, q)] / args.rounds / 1e6:.2f} | {statistics.median(cpu_s[(n, q)]):.2f} |")
        report = "\n".join(lines) + "\n"
        print(report)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(report)
    finally:
        lab.close()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("bench/cluster needs root: network namespaces and cgroups")
    main()
