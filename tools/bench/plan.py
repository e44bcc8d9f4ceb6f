"""What each profile measures: workloads, concurrencies, durations, counts,
rounds.

A run is a dict: suite (http | https | https-memory | echo | lat | memory), workload, engine name,
concurrency, and what the runner needs. Every run is bounded: HTTP runs by
duration (plus one request timeout for what is in flight), echo runs by
clients x rounds, lat runs by count and duration, the memory check by a
connection count and a time budget; the runner adds a hard subprocess
timeout to each.

Rounds: each HTTP and echo point runs `rounds` times (full and quick: 3),
the engines alternating within a round and the order rotating by one from
round to round (round 1: peer first, round 2: the second engine first, ...),
so no engine always runs first or last after a given one. An engine's figure
is the median of its rounds, its ratio the median over the peer's median at
the same point (tools/bench/report.py). lat and memory points run once."""

SMALL_BODY = b"Hello, ktcp!\n"  # 13 bytes
BIG_SIZE = 1 << 20
LISTING_ENTRIES = 100

# workload -> (URL path, keep-alive, file size in bytes or None, extra headers, label)
HTTP_WORKLOADS = {
    "small-keepalive": ("/small.txt", True, len(SMALL_BODY), [], "13-byte file, keep-alive"),
    "small-close": ("/small.txt", False, len(SMALL_BODY), [],
                    "13-byte file, connection per request (HTTP/1.0)"),
    "1mib": ("/big.bin", True, BIG_SIZE, [], "1 MiB file, keep-alive"),
    "listing": ("/dir/", True, None, [], f"directory listing ({LISTING_ENTRIES} entries), keep-alive"),
    "gzip": ("/page.html", True, None, ["Accept-Encoding: gzip"],
             "gzip: 64 KiB HTML, Accept-Encoding: gzip, keep-alive"),
}

# HTTPS workload -> (URL path, keep-alive, file size, TLS version, label).
# Keep-alive and 1 MiB run TLS 1.2: the version whose keys Debian 12's
# OpenSSL 3.0 moves into the kernel both ways (a TLS 1.3 session gets kTLS
# TX only), so in the guests every kTLS engine reads and writes its records
# in the kernel; it is also the ceiling of khttpd's agent ktcp-tlsd. New
# connections run TLS 1.3, a full handshake each (htstress keeps no session)
# over X25519; khttpd's agent is measured at its TLS 1.2 (HTTPS_TLS_MAX).
HTTPS_WORKLOADS = {
    "https-small-keepalive": ("/small.txt", True, len(SMALL_BODY), "1.2",
                              "HTTPS 13-byte file, keep-alive, TLS 1.2"),
    "https-1mib": ("/big.bin", True, BIG_SIZE, "1.2", "HTTPS 1 MiB file, keep-alive, TLS 1.2"),
    "https-handshake": ("/small.txt", False, len(SMALL_BODY), "1.3",
                        "HTTPS new connection per request: TLS 1.3 full handshake (X25519), "
                        "one 13-byte GET"),
}
# engine -> the highest TLS version it speaks, where below the workload's
HTTPS_TLS_MAX = {"khttpd-unbound-tls": "1.2", "khttpd-bound-tls": "1.2",
                 "khttpd-kthread-tls": "1.2"}

# HTTPS points a profile may run longer than its duration (a guest's few
# responses a round): the plan's key and the table head's name for each
HTTPS_LONGER = {"c1": ("https_c1_duration", "1 conn."),
                "handshake": ("https_handshake_duration", "new connections"),
                "1mib": ("https_1mib_duration", "1 MiB")}


def https_point_kind(workload, concurrency):
    """Which HTTPS_LONGER entry a point falls under, or None."""
    if concurrency == 1:
        return "c1"
    return {"https-handshake": "handshake", "https-1mib": "1mib"}.get(workload)

# Each profile, per environment. "engines" None = every available engine.
PROFILES = {
    # Host: 11 HTTP points x 5 engines (lwan given) x 3 rounds x 1.5 s, 250 s
    # of runs, ~350 s with the rest and the overheads. VM: fewer points (TCG loads a module per run and
    # drops TIME-WAIT after it), so the guest's three rounds fit the boot
    # and the ~400 s the host phase leaves.
    "full": {
        "host": {
            "rounds": 3,
            "sweep": [1, 10, 100, 1000], "single_c": 10, "duration": 1.5, "timeout_ms": 5000,
            "echo_clients": [1, 10, 100, 1000], "echo_total": 60000,
            "lat_count": 20000, "lat_duration": 2.0,
            "memory_conns": 10000, "engines": None, "budget_s": 400,
            "https_sweep": [1, 100], "https_single_c": 10, "https_close_c": 10,
        },
        "vm": {
            "rounds": 3,
            "sweep": [1, 100, 1000], "close_sweep": [100, 1000], "single_c": 10,
            "duration": 1.0, "timeout_ms": 10000,
            "echo_clients": [1, 100, 1000], "echo_total": 300,
            "lat_count": 1000, "lat_duration": 1.5,
            "memory_conns": 10000, "engines": None,
            "https_sweep": [1, 100], "https_single_c": 10, "https_close_c": 10,
        },
        "total_budget_s": 900,
    },
    # <= 3 min with make's own start: the VM boot alone takes 40-95 s under
    # emulation on a loaded host, so the guest gets one point per suite.
    # Three rounds fit by short runs (0.3 s host, 1 s guest) and by leaving
    # the 1 MiB, listing and gzip workloads to the full profile: the host
    # phase took 27 s with lwan, at load average 5-7.
    "quick": {
        "host": {
            "rounds": 3,
            "sweep": [10, 100], "close_sweep": [10], "single_c": None, "duration": 0.3,
            "timeout_ms": 5000, "echo_clients": [100], "echo_total": 5000,
            "lat_count": 5000, "lat_duration": 1.0,
            "memory_conns": 10000, "engines": None, "budget_s": 50,
        },
        "vm": {
            "rounds": 3,
            "sweep": [10], "single_c": None, "duration": 1.0, "timeout_ms": 10000,
            "workloads": ["small-keepalive"],
            "echo_clients": [100], "echo_total": 200, "lat_count": 300, "lat_duration": 1.0,
            "lat_modes": ["tcp-loopback"], "memory_conns": 0,
            "engines": ["nginx", "ktcp-httpd-epoll", "khttpd-unbound", "ktcp-echo",
                        "kecho-unbound", "lwan"],
        },
        "total_budget_s": 165,
    },
    # The memory check alone, on the host and in the VM: 10,000 idle
    # connections per server, the guest's slab and the servers' RSS.
    "memory": {
        "host": {
            "sweep": [], "close_sweep": [], "single_c": None, "duration": 0, "timeout_ms": 0,
            "workloads": [], "echo_clients": [], "echo_total": 0, "lat_count": 0,
            "lat_duration": 0, "memory_conns": 10000, "engines": None, "budget_s": 120,
        },
        "vm": {
            "sweep": [], "close_sweep": [], "single_c": None, "duration": 0, "timeout_ms": 0,
            "workloads": [], "echo_clients": [], "echo_total": 0, "lat_count": 0,
            "lat_duration": 0, "memory_conns": 10000, "engines": None,
        },
        "total_budget_s": 900,
    },
    # The kernel engines' accept path beside nginx, in the VM only:
    # connection per request at 100 and 1000 connections, three rounds.
    "accept": {
        "vm": {
            "rounds": 3,
            "sweep": [], "close_sweep": [100, 1000], "single_c": None, "duration": 2.0,
            "timeout_ms": 10000, "workloads": ["small-close"],
            "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
            "memory_conns": 0, "engines": ["nginx", "khttpd-unbound", "khttpd-bound"],
        },
        "total_budget_s": 600,
    },
    # The HTTPS points alone (make bench-https): keep-alive at 1 and 100
    # connections, 1 MiB, new TLS 1.3 connections, on the host (records by
    # OpenSSL, three rounds) and in the guest (kTLS, five: emulation spreads
    # them wider).
    "https": {
        "host": {
            "rounds": 3, "duration": 1.5, "timeout_ms": 5000, "budget_s": 400,
            "https_sweep": [1, 100], "https_single_c": 10, "https_close_c": 10,
            "https_memory_conns": 10000,
            "sweep": [], "close_sweep": [], "single_c": None, "workloads": [],
            "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
            "memory_conns": 0, "engines": None,
        },
        "vm": {
            "rounds": 5, "duration": 1.0, "timeout_ms": 10000,
            "https_sweep": [1, 100], "https_single_c": 10, "https_close_c": 10,
            # one connection under emulation: about 900 requests a second,
            # and 1 s rounds spread ±7-22 %; three times as long
            "https_c1_duration": 3.0,
            # a full handshake costs the server and the client about 10 and
            # 15 ms of emulated CPU: some 60 a 1 s round, spread ±7-31 %
            "https_handshake_duration": 3.0,
            # 1 MiB at 10 connections: some 12-15 responses a 1 s round
            "https_1mib_duration": 3.0,
            # a full handshake each, under emulation: 10,000 would take
            # minutes per server
            "https_memory_conns": 2000,
            "sweep": [], "close_sweep": [], "single_c": None, "workloads": [],
            "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
            "memory_conns": 0, "engines": None,
        },
        "total_budget_s": 900,
    },
    # For tests/test_bench.py: host only, one engine beside nginx, two
    # rounds, seconds.
    "smoke": {
        "host": {
            "rounds": 2,
            "sweep": [10], "close_sweep": [], "single_c": None, "duration": 0.5,
            "timeout_ms": 2000, "workloads": ["small-keepalive"],
            "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
            "memory_conns": 200, "engines": ["nginx", "ktcp-httpd-epoll"], "budget_s": 30,
        },
        "total_budget_s": 60,
    },
    # For tests/test_bench.py: the HTTPS points, host only, ktcp-httpd-epoll
    # beside nginx over TLS, keep-alive and new connections, two rounds.
    "smoke-https": {
        "host": {
            "rounds": 2, "duration": 0.3, "timeout_ms": 2000, "budget_s": 30,
            "https_sweep": [4], "https_single_c": None, "https_close_c": 4,
            "https_memory_conns": 100,
            "sweep": [], "close_sweep": [], "single_c": None, "workloads": [],
            "echo_clients": [], "echo_total": 0, "lat_count": 0, "lat_duration": 0,
            "memory_conns": 0, "engines": ["nginx-tls", "ktcp-httpd-epoll-tls"],
        },
        "total_budget_s": 60,
    },
}

PEERS = {"http": "nginx", "https": "nginx-tls", "https-memory": "nginx-tls", "memory": "nginx",
         "echo": "ktcp-echo", "lat": "tcp-loopback"}
# The HTTPS points' second reference: nginx handing its records to kTLS
HTTPS_KTLS_PEER = "nginx-ktls"
# The second reference of the HTTP points: the floor server (tools/floor.c),
# which runs only the workloads it serves.
FLOOR = "floor"
FLOOR_WORKLOADS = ("small-keepalive", "small-close", "1mib")


def serves(name, wl):
    """Does engine name run HTTP workload wl (the floor only its own)?"""
    return name != FLOOR or wl in FLOOR_WORKLOADS


def rotated(names, k):
    """The engine order of round k (0-based): names rotated left by k, so
    round 0 runs the peer (first in names) first."""
    if not names:
        return []
    k %= len(names)
    return names[k:] + names[:k]


def build(profile, env, http_names, echo_names, https_names=()):
    """The ordered run list. At each point the engines run back to back,
    alternating round by round (rotated()), so a ratio compares figures
    taken seconds apart on this noisy machine, not minutes, and each
    engine's median comes from rounds interleaved with the peer's. Every
    HTTP and echo run carries its round (1-based) and the point's rounds."""
    p = PROFILES[profile][env]
    wanted = p.get("engines")
    nrounds = p.get("rounds", 1)

    def keep(names):
        return [n for n in names if wanted is None or n in wanted]

    http_names, echo_names = keep(http_names), keep(echo_names)
    https_names = keep(list(https_names))
    runs = []
    if p["memory_conns"] and env == "vm":
        # First, on a fresh guest: kernel and user servers side by side, the
        # guest's slab growth (sockets, the modules' connections) plus the
        # processes' RSS.
        n = p["memory_conns"]
        for name, echo in (("nginx", False), ("ktcp-httpd-epoll", False),
                           ("khttpd-unbound", False), ("kecho-unbound", True)):
            if name in (echo_names if echo else http_names):
                runs.append({"suite": "memory", "workload": "idle", "engine": name,
                             "concurrency": n, "echo": echo,
                             "label": f"{n} idle " + ("echo connections (one message each)"
                                                      if echo else "keep-alive connections"),
                             "planned_s": 5.0 + n / 1000})
    workloads = p.get("workloads", list(HTTP_WORKLOADS))
    for wl in workloads:
        path, ka, size, headers, label = HTTP_WORKLOADS[wl]
        if wl == "small-keepalive":
            levels = p["sweep"]
        elif wl == "small-close":
            levels = p.get("close_sweep", p["sweep"])
        else:
            levels = [p["single_c"]] if p["single_c"] else []
        for c in levels:
            names = [n for n in http_names if serves(n, wl)]
            for k in range(nrounds):
                for name in rotated(names, k):
                    runs.append({"suite": "http", "workload": wl, "engine": name,
                                 "concurrency": c, "keep_alive": ka, "path": path,
                                 "file_size": size, "headers": headers, "label": label,
                                 "duration": p["duration"], "timeout_ms": p["timeout_ms"],
                                 "planned_s": p["duration"], "round": k + 1,
                                 "rounds_planned": nrounds})
    for wl, (path, ka, size, version, label) in HTTPS_WORKLOADS.items():
        if wl == "https-small-keepalive":
            levels = p.get("https_sweep", [])
        elif wl == "https-1mib":
            levels = [p["https_single_c"]] if p.get("https_single_c") else []
        else:
            levels = [p["https_close_c"]] if p.get("https_close_c") else []
        for c in levels:
            kind = https_point_kind(wl, c)
            d = p.get(HTTPS_LONGER[kind][0], p["duration"]) if kind else p["duration"]
            for k in range(nrounds):
                for name in rotated(https_names, k):
                    runs.append({"suite": "https", "workload": wl, "engine": name,
                                 "concurrency": c, "keep_alive": ka, "path": path,
                                 "file_size": size, "headers": [], "label": label,
                                 "tls_version": min(version, HTTPS_TLS_MAX.get(name, version)),
                                 "duration": d, "timeout_ms": p["timeout_ms"],
                                 "planned_s": d, "round": k + 1,
                                 "rounds_planned": nrounds})
    if p.get("https_memory_conns"):
        # idle TLS sessions (TLS 1.2: both directions in kTLS in the guest),
        # each engine once on a fresh instance: its RSS and the kernel's
        # slab growth per connection; in the guest beside nginx with kTLS
        n = p["https_memory_conns"]
        for name in [x for x in https_names if env == "host" or x != "nginx-tls"]:
            runs.append({"suite": "https-memory", "workload": "idle-tls", "engine": name,
                         "concurrency": n, "tls_version": "1.2",
                         "label": f"{n} idle TLS 1.2 keep-alive connections",
                         "planned_s": 5.0 + n / (200 if env == "host" else 40)})
    for c in p["echo_clients"]:
        rounds = max(1, p["echo_total"] // c)
        for k in range(nrounds):
            for name in rotated(echo_names, k):
                runs.append({"suite": "echo", "workload": "echo", "engine": name,
                             "concurrency": c, "rounds": rounds, "min_len": 1, "max_len": 1024,
                             "label": f"echo, {c} clients x {rounds} rounds, 1..1024 B",
                             "planned_s": 2.0 if env == "host" else 4.0, "round": k + 1,
                             "rounds_planned": nrounds})
    if p["lat_count"]:
        for name, mode, pin in (("tcp-loopback", "tcp", True), ("pipe", "pipe", True),
                                ("unix", "unix", True), ("tcp-unpinned", "tcp", False)):
            if name not in p.get("lat_modes", [name]):
                continue
            runs.append({"suite": "lat", "workload": "lat", "engine": name, "concurrency": 1,
                         "mode": mode, "same_core": pin, "count": p["lat_count"],
                         "duration": p["lat_duration"],
                         "label": f"lat {mode}, 1 B, " + ("both ends on one core" if pin
                                                          else "unpinned"),
                         "planned_s": p["lat_duration"]})
        for name in echo_names:
            runs.append({"suite": "lat", "workload": "lat", "engine": f"echo:{name}",
                         "server": name, "concurrency": 1, "mode": "echo",
                         "count": p["lat_count"], "duration": p["lat_duration"],
                         "label": f"lat echo against {name}, 1 B, unpinned",
                         "planned_s": p["lat_duration"]})
    if p["memory_conns"] and env != "vm":
        for name in http_names:
            if name in ("nginx", "ktcp-httpd-epoll", "ktcp-httpd-mn"):
                runs.append({"suite": "memory", "workload": "idle-keepalive", "engine": name,
                             "concurrency": p["memory_conns"],
                             "label": f"{p['memory_conns']} idle keep-alive connections",
                             "planned_s": 3.0 + p["memory_conns"] / 5000})
    return runs


def client_note(c):
    """How the published conditions name the client's scheduling: runs from
    before htstress --sched-batch have no client_sched."""
    return "htstress under SCHED_BATCH" if c.get("client_sched") == "SCHED_BATCH" else "htstress"
