# The local stand-in for the official Node image (deploy/docker/build-base-image.sh builds it):
# Debian minbase + Node and npm from the npm registry, user `node` (uid 1000) like the official image.
# The packages are unpacked where they stay and linked, never moved: a move would copy them into
# another layer and double the image.
ARG DEBIAN_IMAGE=store-api-debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
ADD node.tgz /usr/local/lib/node-dist/
ADD npm.tgz /usr/local/lib/npm-dist/
RUN mkdir -p /usr/local/lib/node_modules \
 && ln -s /usr/local/lib/node-dist/package/bin/node /usr/local/bin/node \
 && ln -s /usr/local/lib/npm-dist/package /usr/local/lib/node_modules/npm \
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
