#!/usr/bin/env bash
# CI checks of the container image (README "Deployment"): every container uses the host network,
# so all traffic stays on loopback.
#   1. `all` on a volume: test/smoke/smoke.mjs with SMOKE_IMAGE (a list, a signed delivery,
#      SIGTERM → exit 0, restart on the same volume, start after SIGKILL without a stale lock);
#   2. `migrate`, then `serve` and `worker` against the machine's PostgreSQL and Redis: ready,
#      a token from the image's CLI lists, the worker's /healthz and /metrics answer, docker's
#      HEALTHCHECK reports healthy, and `docker stop` (SIGTERM) ends both with exit 0;
#   3. bad input: a bad variable, a bad DATABASE_URL and an unwritable volume each stop the start with
#      one JSON line naming it and a non-zero exit;
#   4. the image runs as a non-root user and `--version` answers.
# Usage: test/container/image-checks.sh IMAGE   (needs docker, psql, redis-cli, node ≥ 22)
set -euo pipefail
IMAGE="${1:?image}"
cd "$(dirname "$0")/../.."
PG="${CI_PG_URL:-postgres://root@127.0.0.1:5432}"
REDIS="${CI_REDIS_URL:-redis://127.0.0.1:6379}"
run_id="$$"
db="store_api_image_$run_id"
containers=()
log() { printf '%s image-checks: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { log "FAILED: $*"; exit 1; }
cleanup() {
  for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "/tmp/store-api-ro-$run_id"
}
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
# Waits until `curl`-less GET $1 answers 200 (bounded; the containers print why when they fail).
wait_ok() {
  local url="$1" what="$2" container="$3"
  for _ in $(seq 1 240); do
    node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' "$url" && return 0
    [ "$(docker inspect -f '{{.State.Running}}' "$container" 2>/dev/null)" = true ] || { docker logs "$container" 2>&1 | tail -20; fail "$what: container stopped"; }
    sleep 0.5
  done
  docker logs "$container" 2>&1 | tail -20; fail "$what did not become ready"
}
# Expects `docker run … $@` to exit non-zero with exactly one JSON line on stderr containing $1.
expect_refusal() {
  local needle="$1"; shift
  local out err code=0
  err="$(docker run --rm --network host "$@" 2>&1 >/dev/null)" || code=$?
  [ "$code" -ne 0 ] || fail "started despite bad input ($*)"
  [ "$(printf '%s\n' "$err" | grep -c .)" = 1 ] || fail "expected one line, got: $err"
  printf '%s' "$err" | node -e 'const l=JSON.parse(require("fs").readFileSync(0,"utf8"));if(l.level!==60)process.exit(1)' || fail "not a JSON fatal line: $err"
  printf '%s' "$err" | grep -qF -- "$needle" || fail "the line does not name $needle: $err"
  log "refused with exit $code, naming $needle"
}

log "4. non-root user, --version"
user="$(docker image inspect -f '{{.Config.User}}' "$IMAGE")"
[ -n "$user" ] && [ "$user" != root ] && [ "$user" != 0 ] || fail "the image runs as root"
docker run --rm --network none "$IMAGE" --version | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+' || fail "--version"
[ "$(docker run --rm --network none --entrypoint id "$IMAGE" -u)" != 0 ] || fail "uid 0"
log "user $user; version $(docker run --rm --network none "$IMAGE" --version)"

log "1. all on a volume (test/smoke/smoke.mjs)"
SMOKE_IMAGE="$IMAGE" node test/smoke/smoke.mjs

log "2. migrate, serve and worker on PostgreSQL + Redis"
psql "$PG/postgres" -qc "CREATE DATABASE $db" >/dev/null
env_pg=(-e "DATABASE_URL=$PG/$db" -e "REDIS_URL=$REDIS" -e "REDIS_KEY_PREFIX=store-api-image-$run_id:" -e HOST=127.0.0.1 -e SEED_DEMO=false)
docker run --rm --network host "${env_pg[@]}" "$IMAGE" migrate | grep -Eq '"msg":"Applied [0-9]+ migrations: 0001-core.*Schema is current."' || fail "migrate"
api_port="$(free_port)"; metrics_port="$(free_port)"
containers+=("store-api-serve-$run_id" "store-api-worker-$run_id")
docker run -d --name "store-api-serve-$run_id" --network host "${env_pg[@]}" -e "PORT=$api_port" \
  --health-interval=2s --health-start-period=60s "$IMAGE" serve >/dev/null
docker run -d --name "store-api-worker-$run_id" --network host "${env_pg[@]}" -e "METRICS_PORT=$metrics_port" \
  --health-interval=2s --health-start-period=60s "$IMAGE" worker >/dev/null
wait_ok "http://127.0.0.1:$api_port/readyz" "serve /readyz" "store-api-serve-$run_id"
wait_ok "http://127.0.0.1:$metrics_port/readyz" "worker /readyz" "store-api-worker-$run_id"
token="$(docker run --rm --network host "${env_pg[@]}" "$IMAGE" tokens create --name image-check --json | node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).token)')"
node -e 'fetch(process.argv[1],{headers:{authorization:`Bearer ${process.argv[2]}`}}).then(async r=>{const b=await r.json();if(r.status!==200||!Array.isArray(b.data))throw new Error(`${r.status} ${JSON.stringify(b)}`)})' \
  "http://127.0.0.1:$api_port/api/v1/products?limit=1" "$token" || fail "list through serve"
node -e 'fetch(process.argv[1]).then(async r=>{const t=await r.text();if(r.status!==200||!t.includes("process_resident_memory_bytes"))throw new Error(String(r.status))})' \
  "http://127.0.0.1:$metrics_port/metrics" || fail "worker /metrics"
for c in "store-api-serve-$run_id" "store-api-worker-$run_id"; do
  for _ in $(seq 1 60); do [ "$(docker inspect -f '{{.State.Health.Status}}' "$c")" = healthy ] && break; sleep 1; done
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$c")" = healthy ] || fail "$c HEALTHCHECK: $(docker inspect -f '{{json .State.Health}}' "$c")"
  docker logs "$c" 2>/dev/null | node -e 'for (const l of require("fs").readFileSync(0,"utf8").split("\n").filter(Boolean)) JSON.parse(l)' || fail "$c printed a line that is not JSON"
  docker stop -t 30 "$c" >/dev/null
  [ "$(docker inspect -f '{{.State.ExitCode}}' "$c")" = 0 ] || { docker logs "$c" 2>&1 | tail; fail "$c exit code on SIGTERM"; }
done
log "serve and worker: ready, healthy, JSON logs, listed with a CLI token, SIGTERM → exit 0"

log "3. bad input"
expect_refusal PORT -e PORT=eighty "$IMAGE" serve
expect_refusal DATABASE_URL -e DATABASE_URL=mysql://db/store "$IMAGE" migrate
mkdir -p "/tmp/store-api-ro-$run_id" && chmod 755 "/tmp/store-api-ro-$run_id"   # owned by root: not writable by the image's user
expect_refusal /var/lib/store-api -v "/tmp/store-api-ro-$run_id:/var/lib/store-api" "$IMAGE" all
log "all image checks passed"
