# decoy as a drop-in for the wiremock/wiremock image: same working directory
# (/home/wiremock with mappings/ and __files/), same ports, arguments after the image
# name go to `decoy serve`, options also from DECOY_OPTIONS or WIREMOCK_OPTIONS.
#
# The image is FROM scratch: it holds decoy (a glibc build), the few shared libraries
# it loads, an nsswitch.conf and some empty folders. container/build.sh builds the
# binary and stages it with its libraries in target/container-stage, then runs
#
#   docker build -t decoy .        # or: podman build --format docker -t decoy .
#
# (--format docker keeps the HEALTHCHECK: the OCI image format has no field for it.)
# The build context is only what .dockerignore lets through: the stage and container/.
FROM scratch

# /home/wiremock/{mappings,__files,plugins,mq-mappings}, /var/cache/decoy (compiled
# plugins) and /tmp, all owned by the user decoy runs as.
COPY --chown=10001:10001 container/rootfs/ /
# Host names from /etc/hosts first, then DNS (glibc's default without this file asks
# DNS first and stops at its "no such name", so compose's extra_hosts would be missed).
COPY container/etc/ /etc/
# Exactly the shared libraries `ldd` lists for the binary, each at its path.
COPY target/container-stage/libs/ /
COPY target/container-stage/decoy /usr/local/bin/decoy

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
