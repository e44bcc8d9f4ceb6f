#!/bin/sh
# Check htstress against wrk: both drive the same private nginx with the same
# keep-alive workload (a small static file, CONNECTIONS connections, THREADS
# threads, DURATION seconds each, ROUNDS alternating rounds), and the two
# request rates must agree within TOLERANCE percent.
#
# usage: tools/check-htstress-vs-wrk.sh      (run from anywhere; builds nothing)
# environment: CONNECTIONS (100) THREADS (2) DURATION (10) ROUNDS (4)
#              TOLERANCE (10) NGINX_WORKERS (1)
# exit: 0 agree, 1 differ by more than TOLERANCE %, 3 set-up failed
set -eu

CONNECTIONS=${CONNECTIONS:-100}
THREADS=${THREADS:-2}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-4}
TOLERANCE=${TOLERANCE:-10}
NGINX_WORKERS=${NGINX_WORKERS:-1}

here=$(cd "$(dirname "$0")/.." && pwd)
htstress=$here/build/htstress
die() { echo "check-htstress-vs-wrk: $*" >&2; exit 3; }
[ -x "$htstress" ] || die "$htstress not built (run make)"
command -v wrk >/dev/null || die "wrk not installed (scripts/deps installs it)"
command -v nginx >/dev/null || die "nginx not installed (scripts/deps installs it)"

tmp=$(mktemp -d /tmp/check-htstress-XXXXXX)
nginx_pid=
cleanup() {
    if [ -n "$nginx_pid" ]; then
        kill -QUIT "$nginx_pid" 2>/dev/null || true
        wait "$nginx_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])') ||
    die "cannot find a free port"
mkdir -p "$tmp/www"
printf 'hello from nginx\n' >"$tmp/www/index.html"
user=
[ "$(id -u)" = 0 ] && user="user root;"
cat >"$tmp/nginx.conf" <<CONF
$user
worker_processes $NGINX_WORKERS;
pid $tmp/nginx.pid;
error_log $tmp/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $tmp/body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    server { listen 127.0.0.1:$port; root $tmp/www; }
}
CONF
nginx -c "$tmp/nginx.conf" -p "$tmp" -e "$tmp/error.log" -g 'daemon off;' &
nginx_pid=$!
i=0
until "$htstress" -n 1 "http://127.0.0.1:$port/index.html" >/dev/null 2>&1 &&
    "$htstress" --json -n 1 "http://127.0.0.1:$port/index.html" | grep -q '"good":1,'; do
    i=$((i + 1))
    [ $i -lt 100 ] || die "nginx did not start on port $port (see $tmp/error.log)"
    sleep 0.1
done

url="http://127.0.0.1:$port/index.html"
echo "workload: GET $url (17-byte file), keep-alive, $CONNECTIONS connections," \
    "$THREADS client threads, ${DURATION}s x $ROUNDS rounds per tool," \
    "nginx $NGINX_WORKERS worker(s), kernel $(uname -r), $(nproc) CPUs"
wrk_total=0
hts_total=0
r=1
run_wrk() {
    wrk_out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" "$url")
    wrk_rps=$(echo "$wrk_out" | awk '/^Requests\/sec:/ { print $2 }')
    if echo "$wrk_out" | grep -q 'Non-2xx\|Socket errors'; then
        echo "$wrk_out" >&2
        die "wrk saw errors"
    fi
}
run_htstress() {
    hts_out=$("$htstress" --json -k -t "$THREADS" -c "$CONNECTIONS" -d "$DURATION" "$url")
    hts_rps=$(echo "$hts_out" | sed 's/.*"req_per_s":\([0-9.]*\).*/\1/')
    echo "$hts_out" | grep -q '"bad":0,' || die "htstress saw bad responses: $hts_out"
    echo "$hts_out" | grep -q '"errors":{"total":0,' || die "htstress saw errors: $hts_out"
}
# Alternate which tool goes first, so a drift in the machine's load hits both.
while [ $r -le "$ROUNDS" ]; do
    if [ $((r % 2)) = 1 ]; then
        run_wrk
        run_htstress
    else
        run_htstress
        run_wrk
    fi
    printf 'round %d: wrk %.0f req/s, htstress %.0f req/s\n' "$r" "$wrk_rps" "$hts_rps"
    wrk_total=$(awk -v a="$wrk_total" -v b="$wrk_rps" 'BEGIN { print a + b }')
    hts_total=$(awk -v a="$hts_total" -v b="$hts_rps" 'BEGIN { print a + b }')
    r=$((r + 1))
done

awk -v w="$wrk_total" -v h="$hts_total" -v n="$ROUNDS" -v tol="$TOLERANCE" 'BEGIN {
    ratio = h / w
    printf "mean: wrk %.0f req/s, htstress %.0f req/s, htstress/wrk = %.3f\n", w / n, h / n, ratio
    if (ratio < 1 - tol / 100 || ratio > 1 + tol / 100) {
        printf "check-htstress-vs-wrk: the two differ by more than %d%%\n", tol > "/dev/stderr"
        exit 1
    }
    printf "agree within %d%%\n", tol
}'
