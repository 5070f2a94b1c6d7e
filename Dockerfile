# The example service (examples/service/server.ts) in NVIDIA's Triton
# container: Triton's libtritonserver.so and backends come with the image
# (/opt/tritonserver), Node.js 20 comes from the official Node image.
#
#   docker build -t tritonserver-node-service .
#   docker build --build-arg TRITON_VERSION=25.06 -t tritonserver-node-service .
#   docker run --rm -p 3000:3000 [--gpus all] tritonserver-node-service
ARG TRITON_VERSION=25.07
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS node

# ---------------------------------------------------------------------------
# Build: the addon, compiled against this image's glibc, and dist/.
FROM nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-py3 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends g++ make \
 && rm -rf /var/lib/apt/lists/*
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
COPY --from=node /usr/local/include/node /usr/local/include/node
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
# node-gyp takes the headers of the node binary above instead of downloading them.
ENV npm_config_nodedir=/usr/local
WORKDIR /app
COPY package.json package-lock.json binding.gyp ./
COPY native/ native/
# Dev dependencies included: the service runs through tsx.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsup.config.ts ./
COPY lib/ lib/
RUN npm run build:ts
COPY examples/ examples/

# ---------------------------------------------------------------------------
# Runtime: the same Triton image, no compiler.
FROM nvcr.io/nvidia/tritonserver:${TRITON_VERSION}-py3
COPY --from=node /usr/local/bin/node /usr/local/bin/node
RUN groupadd --system --gid 10001 service \
 && useradd --system --uid 10001 --gid service --home-dir /app --shell /usr/sbin/nologin service
WORKDIR /app
COPY --from=build --chown=root:root /app /app
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    MODEL_REPOSITORY=/app/examples/model_repository
USER 10001:10001
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM (docker stop, Kubernetes) lets the service finish requests and stop Triton.
STOPSIGNAL SIGTERM
CMD ["node", "--import", "tsx", "examples/service/server.ts"]
