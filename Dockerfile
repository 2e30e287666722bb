# syntax=docker/dockerfile:1
#
# audio-proxy as a container: Debian slim with Debian's ffmpeg, the compiled build, production
# dependencies only, a non-root user, a health check and a graceful stop. docs/operations.md
# ("Containers") says how to run it; test/deploy.test.ts checks this file.
#
#   docker build -t audio-proxy .
#   docker run --rm -p 4000:4000 -e AP_KEY=… -e AP_SALT=… -e AP_LOCAL_ROOT=/srv/audio \
#     -v /path/to/audio:/srv/audio:ro --stop-timeout 30 audio-proxy
#
# The stop grace must outlast the shutdown: SIGTERM drains for up to 10 s (CLOSE_DRAIN_MS) and
# the whole shutdown is bounded by 25 s (SHUTDOWN_GRACE_MS), so give it 30 s (`docker run
# --stop-timeout 30`, compose `stop_grace_period: 30s`, Kubernetes
# `terminationGracePeriodSeconds: 30`). Docker's default of 10 s would cut the drain short.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: every dependency, TypeScript compiled to dist/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: Debian's ffmpeg, production dependencies, dist/ ----
FROM ${NODE_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 audio-proxy \
 && useradd --system --uid 10001 --gid audio-proxy --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin audio-proxy
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# The npm-shipped static ffmpeg/ffprobe (~150 MB) are only a fallback for a machine without
# one; this image names Debian's below (AP_FFMPEG_PATH), so they would never run.
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force \
 && rm -rf node_modules/@ffmpeg-installer/linux-* node_modules/@ffprobe-installer/linux-*
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY deploy/healthcheck.mjs deploy/s3-bucket.mjs ./deploy/
COPY LICENSE NOTICE ./

# Debian's ffmpeg, named explicitly: if it were missing the boot fails instead of falling back
# to the npm-shipped 2018 build. Every interface, IPv4 (AP_BIND's own default is `::`, which
# fails where a platform disables IPv6). Metrics stay on loopback unless the operator opens
# them (AP_METRICS_BIND=0.0.0.0 and a private network): the endpoint is unsigned.
# MALLOC_ARENA_MAX=2 keeps RSS flat across worker-pool recycles (docs/performance.md, "Soak").
ENV AP_FFMPEG_PATH=/usr/bin/ffmpeg \
    AP_FFPROBE_PATH=/usr/bin/ffprobe \
    AP_BIND=0.0.0.0 \
    AP_PORT=4000 \
    MALLOC_ARENA_MAX=2

USER audio-proxy:audio-proxy
EXPOSE 4000
# There is no curl in slim: node asks /health itself (exit 0 on 200, 1 otherwise, 2 s timeout).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "deploy/healthcheck.mjs"]
# The CLI drains on SIGTERM (new requests 503, in-flight responses up to 10 s) and exits 0.
STOPSIGNAL SIGTERM
# node is the process that gets the signal: no npm or shell in between.
ENTRYPOINT ["node", "bin/audio-proxy.mjs"]
CMD ["serve"]
