#!/usr/bin/env python3
"""bench/cluster: flashscan on 1, 2 and 4 hosts (issue 17), TPC-H Q1, Q6, Q3.

Every host is a `flashscan worker` in its own network namespace made here (fsc-nN-hI, one
veth each onto a bridge made here; the coordinator sits in a namespace of its own too, so all
query traffic crosses links this script made and counts). Each host and the coordinator is
limited to the same CPU share by a cgroup of its own: cgroup v1 `cpu.cfs_quota_us` (or v2
`cpu.max` where v1 is absent), --host-cpus cores each (default 0.4: 4 hosts + coordinator
= 2 cores, this machine), so N hosts have N x that share, as N machines would. CPU seconds
per host come from the same cgroups (v1 cpuacct.usage / v2 cpu.stat). Each host holds its
own database, loaded with `flashscan load --host I/N`.

A `single` row runs plain `flashscan sql` (no cluster) over the N=1 host's database, with
one host's CPU share: what one machine does without the distributed engine.

Runs are interleaved: round r runs each query on single, N=1, N=2, N=4 in turn, --rounds
times, after one untimed warm-up each; medians. Reported per N and query:
- elapsed: flashscan's own `elapsed_s` (planning + execution on the coordinator; not the
  process start nor reading cluster.json);
- GB/s scanned: bytes the hosts read / elapsed;
- bytes per host: the per-task figures of EXPLAIN ANALYZE (host, partitions, bytes);
- network MB: bytes sent by every namespace of the cluster (rx of the bridge-side veths:
  each byte counted once, host-host shuffles included), per run;
- CPU s: the hosts' cgroups together, and the coordinator's, per run (medians).

--loop-mb M: the run where the table is larger than any one host's file system: each host's
database lives on an ext4 file system of M MB of its own (a loop mount made here), and the
script first shows that the whole table does not fit in one such file system (a single
machine load into one fails with the disk full).

    sudo python3 bench/cluster/run.py --sf 1 --rounds 5                   # the documented run
    sudo python3 bench/cluster/run.py --sf 0.1 --rounds 1 --hosts 1,2     # quick look
    sudo python3 bench/cluster/run.py --sf 1 --hosts 4 --loop-mb 400 --rounds 3

Needs root (namespaces, cgroups, loop mounts), `ip` (iproute2), a flashscan built with the
cluster feature (--bin, or built here: `cargo build --release -p flashscan-cli --features
cluster`). Removes what it made on exit (namespaces, links, cgroups, mounts; not the
databases under --work).
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
QUERY_DIR = os.path.join(ROOT, "crates", "sql", "tests", "tpch")
TABLES = ["customer", "orders", "lineitem"]
BRIDGE = "fsc-br0"
SUBNET = "10.77.0"
PERIOD_US = 100_000
PORT = 7070
V1_CPU, V1_ACCT, V2 = "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"


def sh(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, **kw)


def query_text(n):
    with open(os.path.join(QUERY_DIR, f"q{n:02}.sql")) as f:
        return f.read()


class CpuGroup:
    """A cgroup limited to `cpus` cores whose CPU time can be read."""

    def __init__(self, name, cpus):
        self.v1 = os.path.exists(os.path.join(V1_CPU, "cpu.cfs_quota_us"))
        if self.v1:
            self.cpu = os.path.join(V1_CPU, f"fsc-{name}")
            self.acct = os.path.join(V1_ACCT, f"fsc-{name}") if os.path.isdir(V1_ACCT) else None
            os.makedirs(self.cpu, exist_ok=True)
            with open(os.path.join(self.cpu, "cpu.cfs_period_us"), "w") as f:
                f.write(str(PERIOD_US))
            with open(os.path.join(self.cpu, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(int(PERIOD_US * cpus)))
            if self.acct:
                os.makedirs(self.acct, exist_ok=True)
        else:
            self.cpu = os.path.join(V2, f"fsc-{name}")
            self.acct = None
            os.makedirs(self.cpu, exist_ok=True)
            with open(os.path.join(self.cpu, "cpu.max"), "w") as f:
                f.write(f"{int(PERIOD_US * cpus)} {PERIOD_US}")

    def join_command(self):
        """Shell that moves itself into this group (then execs the real command)."""
        dirs = [self.cpu] + ([self.acct] if self.acct else [])
        return " && ".join(f"echo $$ > {d}/cgroup.procs" for d in dirs)

    def cpu_s(self):
        if self.v1:
            if not self.acct:
                return 0.0
            with open(os.path.join(self.acct, "cpuacct.usage")) as f:
                return int(f.read()) / 1e9
        with open(os.path.join(self.cpu, "cpu.stat")) as f:
            for line in f:
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
        return 0.0

    def remove(self):
        for d in [self.cpu, self.acct]:
            if d:
                try:
                    os.rmdir(d)
                except OSError:
                    pass


class Lab:
    """Namespaces, veths, the bridge, cgroups and mounts this run made; close() removes them."""

    def __init__(self):
        self.netns, self.links, self.groups, self.procs, self.mounts = [], [], [], [], []
        self.next_ip = 10

    def setup_bridge(self):
        sh(["ip", "link", "add", BRIDGE, "type", "bridge"])
        self.links.append(BRIDGE)
        sh(["ip", "link", "set", BRIDGE, "up"])

    def namespace(self, name, cpus):
        """A namespace on the bridge with one address, and a cgroup of `cpus` cores."""
        ip = f"{SUBNET}.{self.next_ip}"
        veth, peer = f"fv{self.next_ip}", f"fp{self.next_ip}"
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
        group = CpuGroup(name, cpus)
        self.groups.append(group)
        return ip, veth, group

    @staticmethod
    def wrap(name, group, argv):
        """`argv` in namespace `name`, inside `group`: the shell joins the group, then execs
        `ip netns exec` (which remounts /sys, so the group must be joined outside it)."""
        return ["sh", "-c", f'{group.join_command()} && exec "$@"', "sh", "ip", "netns", "exec", name] + argv

    def loop_mount(self, image, mountpoint, size_mb):
        if os.path.exists(image):
            os.remove(image)
        with open(image, "wb") as f:
            f.truncate(size_mb << 20)
        sh(["mkfs.ext4", "-q", "-F", "-m", "0", image], stdout=subprocess.DEVNULL)
        os.makedirs(mountpoint, exist_ok=True)
        sh(["mount", "-o", "loop", image, mountpoint])
        self.mounts.append((mountpoint, image))

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
        time.sleep(0.2)
        for g in self.groups:
            g.remove()
        for mountpoint, image in self.mounts:
            sh(["umount", mountpoint], check=False)
            try:
                os.remove(image)
            except OSError:
                pass


def sent_bytes(veth):
    """Bytes the namespace behind `veth` sent (the bridge side's receive counter)."""
    with open(f"/sys/class/net/{veth}/statistics/rx_bytes") as f:
        return int(f.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--hosts", default="1,2,4")
    ap.add_argument("--queries", default="1,6,3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--host-cpus", type=float, default=0.4)
    ap.add_argument("--work", default="/work/bench-data/cluster2")
    ap.add_argument("--bin", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--loop-mb", type=int, default=0)
    ap.add_argument("--no-single", action="store_true")
    args = ap.parse_args()
    hosts = [int(x) for x in args.hosts.split(",")]
    queries = [int(x) for x in args.queries.split(",")]
    fs = args.bin or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "flashscan")
    if not args.bin:
        sh(["cargo", "build", "--release", "-q", "-p", "flashscan-cli", "--features", "cluster"], cwd=ROOT)
    os.makedirs(args.work, exist_ok=True)

    lab = Lab()
    try:
        # Databases: host I of N at WORK/sfS-pP-nN/hI (or on its own loop mount), loaded once.
        dbs = {}
        tag = f"sf{args.sf}-p{args.partitions}"
        if args.loop_mb:
            tag += f"-loop{args.loop_mb}"
            # The whole table in one host-sized file system: must not fit.
            mnt = os.path.join(args.work, f"{tag}-one")
            lab.loop_mount(os.path.join(args.work, f"{tag}-one.img"), mnt, args.loop_mb)
            one = sh([fs, "load", os.path.join(mnt, "db"), "--sf", str(args.sf), "--tables", ",".join(TABLES), "--partitions", str(args.partitions)], check=False, capture_output=True, text=True)
            print(f"single machine load into a {args.loop_mb} MB file system: exit {one.returncode}: {one.stderr.strip()[:300]}", flush=True)
        for n in hosts:
            for i in range(n):
                base = os.path.join(args.work, f"{tag}-n{n}")
                if args.loop_mb:
                    base = os.path.join(args.work, f"{tag}-n{n}-h{i}-mnt")
                    lab.loop_mount(os.path.join(args.work, f"{tag}-n{n}-h{i}.img"), base, args.loop_mb)
                db = os.path.join(base, f"h{i}")
                if not os.path.exists(os.path.join(db, "catalog.json")):
                    t = time.perf_counter()
                    sh([fs, "load", db, "--sf", str(args.sf), "--tables", ",".join(TABLES), "--partitions", str(args.partitions), "--host", f"{i}/{n}"], stdout=subprocess.DEVNULL)
                    print(f"load host {i}/{n}: {time.perf_counter() - t:.1f} s, {sh(['du', '-sm', db], capture_output=True, text=True).stdout.split()[0]} MB", flush=True)
                dbs[(n, i)] = db

        lab.setup_bridge()
        clusters = {}
        env = dict(os.environ)
        for n in hosts:
            entries, veths, groups = [], [], []
            for i in range(n):
                name = f"fsc-n{n}-h{i}"
                ip, veth, group = lab.namespace(name, args.host_cpus)
                veths.append(veth)
                groups.append(group)
                argv = Lab.wrap(name, group, [fs, "worker", dbs[(n, i)], "--listen", f"{ip}:{PORT}"])
                lab.procs.append(subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=env))
                entries.append(f"{ip}:{PORT}={dbs[(n, i)]}")
            coord = f"fsc-n{n}-c"
            _, cveth, cgroup = lab.namespace(coord, args.host_cpus)
            veths.append(cveth)
            cfile = os.path.join(args.work, f"cluster-{tag}-n{n}.json")
            if os.path.exists(cfile):
                os.remove(cfile)
            sh([fs, "cluster", "make", cfile] + sum([["--host", e] for e in entries], []), stdout=subprocess.DEVNULL)
            clusters[n] = (coord, cgroup, cfile, veths, groups)
        single = None
        if not args.no_single and 1 in hosts:
            _, _, sgroup = lab.namespace("fsc-single", args.host_cpus)
            single = ("fsc-single", sgroup, dbs[(1, 0)])
        time.sleep(1.5)

        def run(n, q, explain=False):
            text = query_text(q)
            if explain:
                text = "EXPLAIN ANALYZE " + text
            if n == "single":
                name, group, db = single
                argv = Lab.wrap(name, group, [fs, "sql", db, "--json", "--", text])
            else:
                coord, group, cfile, _, _ = clusters[n]
                argv = Lab.wrap(coord, group, [fs, "sql", "--cluster", cfile, "--json", "--", text])
            out = sh(argv, capture_output=True, text=True, check=False, env=env)
            if out.returncode != 0:
                raise SystemExit(f"{n} hosts, Q{q}: exit {out.returncode}: {out.stderr.strip()}")
            return out.stdout

        setups = (["single"] if single else []) + hosts
        per_host = {}
        for n in hosts:
            for q in queries:
                text = run(n, q, explain=True)
                bytes_by_host = {}
                for line in text.splitlines():
                    cells = [c.strip() for c in line.strip().strip("|").split("|")]
                    if len(cells) == 8 and cells[1].isdigit() and cells[7].isdigit():
                        bytes_by_host[int(cells[1])] = bytes_by_host.get(int(cells[1]), 0) + int(cells[7])
                per_host[(n, q)] = bytes_by_host
        for n in setups:
            for q in queries:
                run(n, q)  # warm-up
        keys = [(n, q) for n in setups for q in queries]
        elapsed = {k: [] for k in keys}
        scanned = {k: [] for k in keys}
        host_cpu = {k: [] for k in keys}
        coord_cpu = {k: [] for k in keys}
        net = {k: [] for k in keys}
        for r in range(args.rounds):
            for q in queries:
                for n in setups:
                    if n == "single":
                        veths, groups, cg = [], [], single[1]
                    else:
                        _, cg, _, veths, groups = clusters[n]
                    b0, h0, c0 = sum(sent_bytes(v) for v in veths), sum(g.cpu_s() for g in groups), cg.cpu_s()
                    out = json.loads(run(n, q))
                    net[(n, q)].append(sum(sent_bytes(v) for v in veths) - b0)
                    host_cpu[(n, q)].append(sum(g.cpu_s() for g in groups) - h0)
                    coord_cpu[(n, q)].append(cg.cpu_s() - c0)
                    elapsed[(n, q)].append(out["elapsed_s"])
                    scanned[(n, q)].append(out["scan"].get("bytes_read", 0))
            print(f"round {r + 1}/{args.rounds} done", flush=True)

        med = statistics.median
        lines = [
            f"TPC-H SF {args.sf} ({', '.join(TABLES)}), {args.partitions} partitions, {args.host_cpus} core per host and per coordinator (cgroup "
            f"{'v1 cpu.cfs_quota_us' if clusters[hosts[0]][1].v1 else 'v2 cpu.max'}), default threads (each process sees its CPU quota: 1), medians of {args.rounds} interleaved rounds"
            + (f", each host on its own {args.loop_mb} MB ext4 loop mount" if args.loop_mb else ""),
            "",
            "| query | hosts | elapsed s | GB/s scanned | MB scanned | MB per host (EXPLAIN ANALYZE) | network MB per run | hosts' CPU s | coordinator CPU s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for q in queries:
            for n in setups:
                e = med(elapsed[(n, q)])
                total = med(scanned[(n, q)])
                if n == "single":
                    mb = "-"
                else:
                    b = per_host[(n, q)]
                    mb = ", ".join(f"{b.get(i, 0) / 1e6:.0f}" for i in range(n))
                hc = f"{med(host_cpu[(n, q)]):.2f}" if n != "single" else "-"
                lines.append(
                    f"| Q{q} | {n} | {e:.3f} | {total / e / 1e9:.2f} | {total / 1e6:.0f} | {mb} | {med(net[(n, q)]) / 1e6:.2f} | {hc} | {med(coord_cpu[(n, q)]):.2f} |"
                )
        report = "\n".join(lines) + "\n"
        print(report)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(report)
    finally:
        lab.close()


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("bench/cluster needs root: network namespaces, cgroups and loop mounts")
    if shutil.which("ip") is None:
        sys.exit("bench/cluster needs `ip` (apt-get install iproute2)")
    main()
