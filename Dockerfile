# Store Integration API container image (README "Deployment", docs/decisions/0009).
#
#   docker build -t store-api .                       (official Node 24 LTS image as the base)
#   docker build --build-arg BASE_IMAGE=store-api-base:node24 -t store-api .
#                                                     (a locally built base: deploy/docker/build-base-image.sh)
#   docker run -v store-api-data:/var/lib/store-api -p 3000:3000 store-api             (role `all`)
#   docker run -e DATABASE_URL=postgres://… store-api serve|worker|migrate
#
# Stage 1 builds with the dev dependencies; stage 2 keeps package.json, the production
# dependencies and the compiled JavaScript (dist/) only, runs as the unprivileged user `node`,
# and starts node itself (exec form), so the server is PID 1 and receives SIGTERM.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY . .
# npm ci builds dist/ (prepare); the second install is the production install of the README:
# dev dependencies removed, the build kept (bin/build.js --if-possible). The PGlite templates hold
# owner-only files (PostgreSQL's modes): readable by all, so the runtime user can copy them.
RUN npm ci --no-audit --no-fund \
 && npm ci --omit=dev --no-audit --no-fund \
 && test -f dist/.build-stamp && test ! -e node_modules/typescript \
 && test -f packages/client/dist/webhook-signature.js \
 && chmod -R a+rX dist packages/client/dist \
 && rm -rf node_modules/@store-api/sync node_modules/.bin/store-api-sync

FROM ${BASE_IMAGE} AS runtime
# NODE_OPTIONS: a 16 MiB young generation for every role (decision 0018). V8's default grows it to
# 128 MiB under load: `serve` on PostgreSQL then peaked 50-70 MiB higher for the same CPU per request
# and per record (decision 0023). `npm start` runs the embedded `all` with an 8 MiB one
# (--max-semi-space-size=4, decision 0043) and --optimize-for-size (decision 0048; V8 refuses that
# one in NODE_OPTIONS): for an image that runs the embedded `all`, set the first here and pass the
# second on the command line (node --optimize-for-size bin/store-api.js all).
# MALLOC_ARENA_MAX: at most two glibc malloc arenas; with glibc's default (8 per core) the threads'
# arenas kept 30-35 MiB more of freed memory under the list load (decision 0039).
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=8 \
    MALLOC_ARENA_MAX=2 \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/var/lib/store-api
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The service signs webhooks with @store-api/client/webhook-signature (the verifier's own signed
# content): node_modules/@store-api/client links to packages/client, whose package.json and dist/ it needs.
COPY --from=build /app/packages/client/package.json ./packages/client/
COPY --from=build /app/packages/client/dist ./packages/client/dist
COPY --from=build /app/bin/store-api.js /app/bin/healthcheck.js ./bin/
# The embedded database lives on a volume owned by the runtime user; mount your own there.
RUN mkdir -p /var/lib/store-api && chown node:node /var/lib/store-api
VOLUME ["/var/lib/store-api"]
USER node
EXPOSE 3000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 CMD ["node", "/app/bin/healthcheck.js"]
ENTRYPOINT ["node", "/app/bin/store-api.js"]
# The role: all (API + worker on the embedded database), serve, worker, migrate — or any other
# store-api command (tokens create …, admin create …, --version).
CMD ["all"]
