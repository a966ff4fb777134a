#!/usr/bin/env python3
"""The node agent's own cost: a stub Faultline (answers every batch 200 and counts the signals and
the occurrences they stand for) and kernel logs in /dev/kmsg's record format, read from a file.

    cargo build --release -p faultline-agent
    python3 docs/bench/agent.py --agent target/release/faultline-agent

Scenarios: idle (an empty log followed for 30 s); 1,000,000 records with 1 % XIDs read at once;
100,000 XID 13 lines read at once; a storm of 100,000 XID 13 lines per minute appended for two
minutes while the agent follows the log. CPU from /proc/PID/stat, RSS from /proc/PID/status.
"""
import argparse, gzip, http.server, json, os, shutil, subprocess, tempfile, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--agent", default="target/release/faultline-agent")
ap.add_argument("--idle-seconds", type=float, default=30)
ap.add_argument("--storm-seconds", type=float, default=120)
ap.add_argument("--storm-per-minute", type=int, default=100_000)
args = ap.parse_args()
TICK = os.sysconf("SC_CLK_TCK")


class Stub(http.server.BaseHTTPRequestHandler):
    signals = 0
    occurrences = 0
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        items = json.loads(body)
        items = items["events"] if isinstance(items, dict) else items
        with Stub.lock:
            Stub.signals += len(items)
            Stub.occurrences += sum(i.get("repeat_count") or 1 for i in items)
        out = json.dumps({"accepted": len(items), "duplicates": 0, "rejected": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{server.server_port}"


def xid(seq, ts_us, code=13, bus=0x3B):
    return (f"4,{seq},{ts_us},-;NVRM: Xid (PCI:0000:{bus:02x}:00): {code}, pid={4000 + seq % 8}, name=python, "
            "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address\n")


def noise(seq, ts_us):
    return f"6,{seq},{ts_us},-;EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none.\n"


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def agent(work, extra):
    os.makedirs(f"{work}/state", exist_ok=True)
    with open(f"{work}/boot_id", "w") as f:
        f.write("bench-boot\n")
    cmd = [args.agent, "--server", URL, "--token", "t", "--cluster", "c1", "--node", "n1",
           "--state-dir", f"{work}/state", "--kmsg-file", f"{work}/kmsg", "--boot-id-file", f"{work}/boot_id",
           "--gpu-interval", "0", "--sel-interval", "0"] + extra
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(f"{work}/agent.log", "a"))


def reset():
    Stub.signals = Stub.occurrences = 0


def status(work):
    try:
        with open(f"{work}/state/status.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def read_at_once(name, n, xids, lines):
    """Writes the log, then runs the agent until every record is read and the server has every
    XID (the last storm window closes a minute after it opened). CPU and peak RSS (VmHWM) are read
    from /proc before it stops, so they are the agent's alone."""
    work = tempfile.mkdtemp(prefix="fl-agent-bench-")
    with open(f"{work}/kmsg", "w") as f:
        f.writelines(lines)
    reset()
    p = agent(work, [])
    while True:
        s = status(work)
        if s.get("counters", {}).get("kmsg_records") == n and Stub.occurrences == xids:
            break
        time.sleep(0.1)
    cpu, peak = cpu_seconds(p.pid), rss_kib(p.pid, "VmHWM")
    p.terminate()
    p.wait()
    print(f"{name}: {cpu:.2f} s of CPU ({n / cpu / 1e6:.2f} M records per CPU second); peak RSS "
          f"{peak / 1024:.1f} MB; {Stub.signals} signals sent standing for {Stub.occurrences:,}")
    shutil.rmtree(work)


def idle():
    work = tempfile.mkdtemp(prefix="fl-agent-bench-")
    open(f"{work}/kmsg", "w").close()
    p = agent(work, ["--metrics-addr", "127.0.0.1:0"])
    time.sleep(2)
    c0 = cpu_seconds(p.pid)
    time.sleep(args.idle_seconds)
    c = cpu_seconds(p.pid) - c0
    print(f"idle {args.idle_seconds:.0f} s: {c:.2f} s of CPU ({100 * c / args.idle_seconds:.2f} % of a core), "
          f"RSS {rss_kib(p.pid) / 1024:.1f} MB")
    p.terminate()
    p.wait()
    shutil.rmtree(work)


def storm():
    work = tempfile.mkdtemp(prefix="fl-agent-bench-")
    open(f"{work}/kmsg", "w").close()
    reset()
    p = agent(work, [])
    time.sleep(1)
    c0 = cpu_seconds(p.pid)
    per_tick = args.storm_per_minute // 600  # every 100 ms
    seq, start, peak = 0, time.time(), 0
    with open(f"{work}/kmsg", "a") as f:
        while time.time() - start < args.storm_seconds:
            t = time.time() - start
            f.writelines(xid(seq + i, int((5 + t) * 1e6) + i) for i in range(per_tick))
            f.flush()
            seq += per_tick
            peak = max(peak, rss_kib(p.pid))
            time.sleep(max(0.0, start + (seq // per_tick) * 0.1 - time.time()))
    time.sleep(65)  # the last minute's run closes
    c = cpu_seconds(p.pid) - c0
    elapsed = time.time() - start
    print(f"storm of {args.storm_per_minute:,} XID lines a minute for {args.storm_seconds:.0f} s ({seq:,} lines): "
          f"{c:.2f} s of CPU over {elapsed:.0f} s ({100 * c / elapsed:.1f} % of a core), RSS peak "
          f"{peak / 1024:.1f} MB; {Stub.signals} signals sent standing for {Stub.occurrences:,} lines")
    p.terminate()
    p.wait()
    shutil.rmtree(work)


print(f"binary: {os.path.getsize(args.agent) / 1e6:.1f} MB")
idle()
read_at_once("1,000,000 records, 1 % XIDs", 1_000_000, 10_000,
             (xid(s, 1_000_000 + s * 100, 79, s % 256) if s % 100 == 0 else noise(s, 1_000_000 + s * 100)
              for s in range(1_000_000)))
read_at_once("100,000 XID 13 lines at once", 100_000, 100_000, (xid(s, 5_000_000 + s * 600) for s in range(100_000)))
storm()
