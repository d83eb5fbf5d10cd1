# The local stand-in for the official Node image (deploy/docker/build-base-image.sh builds it):
# Debian minbase + Node and npm from the npm registry, user `node` (uid 1000) like the official image.
ARG DEBIAN_IMAGE=store-api-debian:bookworm
FROM ${DEBIAN_IMAGE}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
ADD node.tgz /opt/
RUN install -m 0755 /opt/package/bin/node /usr/local/bin/node && rm -rf /opt/package
ADD npm.tgz /usr/local/lib/node_modules/
RUN mv /usr/local/lib/node_modules/package /usr/local/lib/node_modules/npm \
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
