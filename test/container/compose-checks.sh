#!/usr/bin/env bash
# CI checks of compose.yaml (README "Deployment"):
#   (The password holds URL characters: compose passes it as PGPASSWORD, never inside DATABASE_URL.)
#   1. `docker-compose config` refuses compose.yaml without POSTGRES_PASSWORD (naming it) and
#      validates it with one; in that configuration one service builds the image and the others
#      run it, and only the serve ports are published beyond this host; the README's compose steps
#      set the password before their first docker compose command;
#   2. the same file runs, on the host network (test/container/compose-ci.mjs), with PostgreSQL and
#      Redis images built here from Debian's packages (no registry is reachable): postgres and redis
#      become healthy, migrate runs once and exits 0, serve-1, serve-2 and worker become ready and
#      healthy, a token made with the image's CLI lists through both serve instances, and
#      `docker-compose stop` (SIGTERM) ends every store-api container with exit 0.
# Usage: test/container/compose-checks.sh STORE_API_IMAGE
set -euo pipefail
IMAGE="${1:?image}"
cd "$(dirname "$0")/../.."
project="storeapici$$"
work="$(mktemp -d)"
log() { printf '%s compose-checks: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { log "FAILED: $*"; docker-compose -p "$project" -f "$work/compose.yaml" logs --tail=20 2>&1 | tail -60 || true; exit 1; }
cleanup() { docker-compose -p "$project" -f "$work/compose.yaml" down -v --remove-orphans >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
get_ok() { node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' "$1"; }

log "1. docker-compose config (without and with POSTGRES_PASSWORD), one build, published ports, README order"
if (unset POSTGRES_PASSWORD; docker-compose -f compose.yaml config -q) 2>"$work/no-password"; then
  fail "compose.yaml is valid without POSTGRES_PASSWORD (it must refuse to start)"
fi
grep -q 'POSTGRES_PASSWORD' "$work/no-password" || fail "the refusal without POSTGRES_PASSWORD does not name it: $(cat "$work/no-password")"
POSTGRES_PASSWORD=check docker-compose -f compose.yaml config > "$work/config.yaml"
POSTGRES_PASSWORD=check docker-compose -f compose.yaml config --services | sort | tr '\n' ' '; echo
node --input-type=module -e '
  import { readFileSync } from "node:fs";
  import { parse } from "yaml";
  const { services } = parse(readFileSync(process.argv[1], "utf8"));
  const fail = (text) => { console.error(`compose.yaml: ${text}`); process.exit(1); };
  const builders = Object.entries(services).filter(([, s]) => s.build).map(([n]) => n);
  if (builders.length !== 1) fail(`the store-api image must be built once, by one service; built by: ${builders.join(", ") || "none"}`);
  const image = services[builders[0]].image;
  for (const [name, s] of Object.entries(services))
    if (s.image === image && !s.build && s.pull_policy !== "never") fail(`${name} runs the built image ${image} but may pull it (pull_policy: never)`);
  for (const [name, s] of Object.entries(services))
    for (const p of s.ports ?? []) {
      const hostIp = typeof p === "string" ? (p.split(":").length === 3 ? p.split(":")[0] : "") : (p.host_ip ?? "");
      if (!name.startsWith("serve-") && hostIp !== "127.0.0.1") fail(`${name} publishes ${JSON.stringify(p)} beyond this host`);
    }
  const readme = readFileSync("README.md", "utf8");
  const block = /^### Compose[^\n]*\n[\s\S]*?^```(?:bash|sh)\n([\s\S]*?)^```$/m.exec(readme)?.[1] ?? fail("no compose block in README.md");
  let password = false;
  for (const line of block.split("\n")) {
    if (/^export POSTGRES_PASSWORD=/.test(line.trim())) password = true;
    if (/docker[- ]compose /.test(line) && !password && !/POSTGRES_PASSWORD=/.test(line)) fail(`README: \`${line.trim()}\` runs before POSTGRES_PASSWORD is set`);
  }
' "$work/config.yaml"

log "2. local PostgreSQL and Redis images (Debian packages on the local base)"
for s in postgres redis; do
  docker build -q --network host -t "store-api-ci-$s:bookworm" "test/container/$s" >/dev/null
done

pg="$(free_port)"; redis="$(free_port)"; s1="$(free_port)"; s2="$(free_port)"; metrics="$(free_port)"
node test/container/compose-ci.mjs compose.yaml "$pg" "$redis" "$s1" "$s2" "$metrics" > "$work/compose.yaml"
export STORE_API_IMAGE="$IMAGE" POSTGRES_IMAGE=store-api-ci-postgres:bookworm REDIS_IMAGE=store-api-ci-redis:bookworm POSTGRES_PASSWORD="ci-$$@p:s/s#w%rd?"
dc() { docker-compose -p "$project" -f "$work/compose.yaml" "$@"; }
dc config -q
log "up (postgres :$pg, redis :$redis, serve :$s1 :$s2, worker metrics :$metrics)"
dc up -d
for url in "http://127.0.0.1:$s1/readyz" "http://127.0.0.1:$s2/readyz" "http://127.0.0.1:$metrics/readyz"; do
  for _ in $(seq 1 240); do get_ok "$url" && break; sleep 0.5; done
  get_ok "$url" || fail "$url not ready"
done
migrate="$(dc ps -q migrate)"
[ "$(docker inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$migrate")" = "exited 0" ] || fail "migrate did not exit 0"
for s in postgres redis serve-1 serve-2 worker; do
  id="$(dc ps -q "$s")"
  for _ in $(seq 1 60); do [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] && break; sleep 1; done
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] || fail "$s is not healthy"
  [ "$(docker inspect -f '{{.HostConfig.RestartPolicy.Name}}' "$id")" = unless-stopped ] || fail "$s restart policy"
done
token="$(dc run --rm -T --no-deps migrate tokens create --name compose-check --json | node -e 'console.log(JSON.parse(require("fs").readFileSync(0,"utf8")).token)')"
for port in "$s1" "$s2"; do
  node -e 'fetch(process.argv[1],{headers:{authorization:`Bearer ${process.argv[2]}`}}).then(r=>{if(r.status!==200)throw new Error(String(r.status))})' \
    "http://127.0.0.1:$port/api/v1/products?limit=1" "$token" || fail "list through :$port"
done
log "migrate ran once (exit 0); postgres, redis, serve-1, serve-2, worker healthy; a CLI token lists through both serve instances"
dc stop -t 40 >/dev/null 2>&1
for s in serve-1 serve-2 worker; do
  code="$(docker inspect -f '{{.State.ExitCode}}' "$(dc ps -q "$s")")"
  [ "$code" = 0 ] || fail "$s exited $code on SIGTERM"
done
log "docker-compose stop: serve-1, serve-2 and worker exited 0; all compose checks passed"
