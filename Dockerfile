# decoy as a drop-in for the wiremock/wiremock image: same working directory
# (/home/wiremock with mappings/ and __files/), same ports, arguments after the image
# name go to `decoy serve`, options also from DECOY_OPTIONS or WIREMOCK_OPTIONS.
#
# The image is FROM scratch: it holds one static binary and a few empty folders.
# Build the binary first, then the image (container/build.sh does both):
#
#   cargo build --release --locked --target x86_64-unknown-linux-musl -p decoy --no-default-features
#   docker build -t decoy .        # or: podman build --format docker -t decoy .
#
# (--format docker keeps the HEALTHCHECK: the OCI image format has no field for it.)
# The build context is only what .dockerignore lets through: the binary and container/.
FROM scratch

ARG DECOY_BINARY=target/x86_64-unknown-linux-musl/release/decoy
# Empty for the static binary. For a glibc build (container/build.sh --binary, as the
# tests use): a folder holding exactly the shared libraries it needs, at their paths.
ARG DECOY_LIBS=container/no-libs

# /home/wiremock/{mappings,__files,plugins,mq-mappings}, /var/cache/decoy (compiled
# plugins) and /tmp, all owned by the user decoy runs as.
COPY --chown=10001:10001 container/rootfs/ /
COPY ${DECOY_LIBS}/ /
COPY ${DECOY_BINARY} /usr/local/bin/decoy

# Compiled plugin code goes to $XDG_CACHE_HOME/decoy/plugins = /var/cache/decoy/plugins:
# mount a volume at /var/cache/decoy to keep it between containers.
ENV HOME=/home/wiremock \
    XDG_CACHE_HOME=/var/cache

WORKDIR /home/wiremock
USER 10001:10001
EXPOSE 8080 8443

# `decoy health` asks GET /__admin/health on the port PID 1 (decoy serve) was given,
# read from its command line and DECOY_OPTIONS / WIREMOCK_OPTIONS (8080 by default;
# DECOY_HEALTH_PORT overrides).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/decoy", "health", "--quiet"]

# PID 1 is decoy itself: SIGTERM (docker stop) lets requests in flight finish, then
# it exits 0. Other subcommands: --entrypoint /usr/local/bin/decoy IMAGE validate ...
ENTRYPOINT ["/usr/local/bin/decoy", "serve"]
