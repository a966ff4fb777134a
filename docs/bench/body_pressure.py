#!/usr/bin/env python3
"""64 clients each POST a ~16 MiB /v1/events body (10,000 events) to a running `faultline serve`
and retry on 503 after Retry-After; the server's RSS (from /proc/PID/status) is sampled every
100 ms: idle before, peak during, and 10 s after the run. Usage:

    python3 docs/bench/body_pressure.py --server http://127.0.0.1:8080 --token TOKEN --pid PID
"""
import argparse, http.client, json, threading, time, urllib.parse, uuid

ap = argparse.ArgumentParser()
ap.add_argument("--server", default="http://127.0.0.1:8080")
ap.add_argument("--token", required=True)
ap.add_argument("--pid", type=int, required=True)
ap.add_argument("--clients", type=int, default=64)
ap.add_argument("--events", type=int, default=10_000)
ap.add_argument("--body-bytes", type=int, default=16_000_000)
args = ap.parse_args()

def rss_mb():
    with open(f"/proc/{args.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0

def body(client):
    pad = max(1, args.body_bytes // args.events - 260)
    text = ("x" * pad)
    events = [{"id": str(uuid.uuid4()), "occurred_at": "2026-11-02T10:%02d:%02dZ" % (i // 60 % 60, i % 60),
               "cluster": "c1", "node": "n%05d" % (client * 97 + i % 50), "kind": "xid", "code": 79,
               "message": text} for i in range(args.events)]
    return json.dumps({"events": events}).encode()

u = urllib.parse.urlparse(args.server)
statuses, lock, peak = {}, threading.Lock(), [0.0]
stop = threading.Event()

def sampler():
    while not stop.is_set():
        peak[0] = max(peak[0], rss_mb())
        time.sleep(0.1)

def client(c):
    data = body(c)
    for _ in range(200):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        t = time.time()
        try:
            conn.request("POST", "/v1/events", body=data, headers={
                "Authorization": "Bearer " + args.token, "Content-Type": "application/json"})
            r = conn.getresponse(); r.read()
            st, ra = r.status, r.getheader("Retry-After")
        except Exception as e:  # the server may reset a connection it refused early
            st, ra = "error", None
        finally:
            conn.close()
        with lock:
            statuses[st] = statuses.get(st, 0) + 1
        if st == 200:
            return
        time.sleep(float(ra or 1))

idle = rss_mb()
threading.Thread(target=sampler, daemon=True).start()
t0 = time.time()
threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.time() - t0
time.sleep(10)
stop.set()
print(f"{args.clients} clients x {args.body_bytes/2**20:.1f} MiB: {elapsed:.1f} s, answers {statuses}")
print(f"RSS idle {idle:.0f} MB, peak {peak[0]:.0f} MB, 10 s after {rss_mb():.0f} MB")
