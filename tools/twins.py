#!/usr/bin/env python3
"""The twins: functions written once for khttpd and once for ktcp-httpd.

Each pair names the kernel functions (kernel/khttpd, khttpd_*) and the
user functions (user/httpd) that do the same job; a pair may hold more
than one function on a side when one engine splits a job in two. The tool
counts the lines of each function, from its signature to its closing brace
(a definition starts at column 0, ends at the first "}" line at column 0),
and prints each pair and the totals: the figure that says how much of the
two engines is still written twice.

    tools/twins.py            the table
    tools/twins.py --json     the same, as JSON

A pair both engines no longer write, its job now core's, moves to FOLDED
with the core function that does it: it prints as 0 lines on each side,
so the table keeps its rows from one count to the next.

A listed function that is not found is an error (exit status 1), so the
list stays true when a function is renamed or moved (tests/test_twins.py).
"""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KCACHE = "kernel/khttpd/cache.c"
UCACHE = ("user/httpd/httpd-cache.c", "user/httpd/httpd-cache-gz.c")

# (what, kernel files, kernel functions, user files, user functions)
PAIRS = [
    ("object free (RCU)", [KCACHE], ["khttpd_obj_free_rcu"],
     UCACHE, ["obj_free_rcu"]),
    ("entry free (RCU)", [KCACHE], ["khttpd_entry_free"],
     UCACHE, ["file_free_rcu", "entry_free"]),
    # the rest is core's (http_cache_put)
    ("entry put", [KCACHE], ["khttpd_cache_put"], UCACHE, ["httpd_cache_put"]),
    # the rest is core's (http_cache_unpublish_locked, _left_locked)
    ("unpublish", [KCACHE], ["khttpd_remove"],
     UCACHE, ["remove_node", "leave_locked"]),
    ("file identity", [KCACHE], ["khttpd_file_id"], UCACHE, ["file_id"]),
    ("object is", [KCACHE], ["khttpd_obj_is"], UCACHE, ["httpd_obj_is"]),
    ("entry is", [KCACHE], ["khttpd_entry_is"], UCACHE, ["match"]),
    # the engine's lookup (its RCU table) and core's http_cache_get
    ("cache get", [KCACHE], ["khttpd_find", "khttpd_cache_get"],
     UCACHE, ["find", "httpd_cache_get"]),
    # the rest is core's (http_cache_gz_build)
    ("gzip build", [KCACHE],
     ["khttpd_gzip_work", "khttpd_gzip_build", "khttpd_gzip_stopping"],
     UCACHE, ["build_run"]),
    ("gzip copy", [KCACHE],
     ["khttpd_gzip_queue", "khttpd_gzip_now", "khttpd_cache_gzip"],
     UCACHE, ["queue", "httpd_cache_gzip"]),
    # the primitives core's paths call (struct http_cache_ops): the path
    # table's lock and entries, the engine's memory
    ("cache ops", [KCACHE],
     ["khttpd_cache_lock_table", "khttpd_cache_unlock_table",
      "khttpd_evicted", "khttpd_insert", "khttpd_entry_new",
      "khttpd_alloc", "khttpd_free"],
     UCACHE, ["lock_table", "unlock_table", "evicted", "insert",
              "entry_new"]),
    # an object's memory (the object table is core's: http_cache_obj_add)
    ("object ops", [KCACHE], ["khttpd_obj_new", "khttpd_obj_free"],
     UCACHE, ["obj_new", "obj_free"]),
    # the file system's
    ("file ops", [KCACHE],
     ["khttpd_path_of", "khttpd_stat", "khttpd_read", "khttpd_close"],
     UCACHE, ["stat_file", "read_file", "close_file"]),
    ("usage", [KCACHE], ["khttpd_cache_usage"], UCACHE, ["httpd_cache_usage"]),
    ("cache init", [KCACHE], ["khttpd_cache_init"], UCACHE, ["httpd_cache_init"]),
    ("body drain", ["kernel/khttpd/conn.c"], ["khttpd_drain_body"],
     ["user/httpd/httpd-conn.c"], ["drain_body"]),
]

# (what, the core function that does it now)
FOLDED = [
    ("published bytes", "http_cache_acct_published"),
    ("request buffer room", "http_reqbuf_make_room"),
    ("put gone list", "http_cache_put_gone"),
    ("evict", "http_cache_evict_locked"),
    ("evict if over", "http_cache_evict_if_over"),
    ("hold", "http_cache_hold"),
    ("touch", "http_cache_touch_locked"),
    ("gzip publish", "http_cache_gz_built"),
    ("charge an object", "http_cache_names_publish"),
    ("object put", "http_cache_obj_put"),
    ("object get", "http_cache_obj_get"),
    ("load", "http_cache_load"),
    ("still fresh", "http_cache_fresh"),
    ("listing names grow", "http_names_get"),
    ("object table", "http_cache_obj_add"),
]


def function_lines(lines, name):
    """Lines of name's definition (signature to closing brace), or None."""
    start = re.compile(r"^[A-Za-z_].*[^A-Za-z0-9_]%s\(" % re.escape(name))
    for i, line in enumerate(lines):
        if not start.match(line):
            continue
        j = i  # a prototype ends in ";" before any "{"
        while j < len(lines) and "{" not in lines[j] and ";" not in lines[j]:
            j += 1
        if j == len(lines) or ";" in lines[j].split("{")[0]:
            continue
        for k in range(j, len(lines)):
            if lines[k].rstrip() == "}":
                return k - i + 1
    return None


def count(root=ROOT):
    """[(what, kernel lines, user lines)]; raises LookupError on a miss."""
    text = {}

    def side(files, names):
        total = 0
        for name in names:
            found = None
            for f in files:
                if f not in text:
                    with open(os.path.join(root, f)) as fh:
                        text[f] = fh.read().split("\n")
                found = function_lines(text[f], name)
                if found:
                    break
            if not found:
                raise LookupError(f"{name} not found in {', '.join(files)}")
            total += found
        return total

    core = sorted(f for f in os.listdir(os.path.join(root, "core"))
                  if f.endswith(".c"))
    rows = [(what, side(kf, kn), side(uf, un))
            for what, kf, kn, uf, un in PAIRS]
    for what, fn in FOLDED:
        side([f"core/{f}" for f in core], [fn])
        rows.append((what, 0, 0))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--root", default=ROOT, help="the tree to count")
    args = ap.parse_args()
    try:
        rows = count(args.root)
    except LookupError as e:
        print(f"twins: {e}", file=sys.stderr)
        return 1
    kt = sum(r[1] for r in rows)
    ut = sum(r[2] for r in rows)
    if args.json:
        print(json.dumps({"pairs": [{"what": w, "kernel": k, "user": u}
                                    for w, k, u in rows],
                          "kernel": kt, "user": ut}))
        return 0
    print(f"{'pair':<22} {'kernel':>6} {'user':>6}")
    for w, k, u in rows:
        print(f"{w:<22} {k:>6} {u:>6}")
    print(f"{'total':<22} {kt:>6} {ut:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
