#!/usr/bin/env bash
# A container engine for the kind tier: the user's own docker when one answers, otherwise
# one this project starts itself, on its own socket and data directory, and stops again.
#
#   hack/engine.sh run -- COMMAND...   runs COMMAND with DOCKER_HOST (and DOCKER_CONFIG,
#                                      for the buildx plugin) pointing at an engine; an
#                                      engine started here is stopped when COMMAND ends,
#                                      pass or fail (or on Ctrl-C)
#   hack/engine.sh status              says which engine `run` would use
#
# The engine started here is Debian 13's docker 26 (dockerd, its docker CLI, containerd,
# the buildx plugin) with Debian 12's runc, unpacked from Debian's packages into the build
# cache by hack/engine-packages.sh, never installed: a privileged container (every kind
# node is one) gets the capabilities the daemon itself holds, so it runs where root lacks
# some of them (a sandbox without CAP_SYS_RESOURCE), where Debian 12's docker 20.10 refuses
# with "unable to apply caps". Its images live in containerd's store (the
# containerd-snapshotter feature, in its daemon.json). Everything it writes is under
# $DDPJOB_ENGINE_DIR (default ~/.cache/ddpjob/engine): images, containers, volumes, its
# socket. Its data survives between runs (the image cache); its processes do not.
#
# It leaves the host's network as it found it: no iptables rules, no ip_forward, no
# default bridge (docker0), and no bridge of a network left when it stops. Containers on one of its networks reach each other through
# that network's bridge, a port published on 127.0.0.1 goes through docker-proxy, and a
# build step that must reach a package index asks for `--network=host`.
#
# Env: DDPJOB_ENGINE=auto (default: the user's docker if it answers, else ours) | own
#      (always ours, beside any other) | user (the user's or fail).
#      ENGINE_START_TIMEOUT (default 120 s), ENGINE_LOCK_TIMEOUT (default 3600 s: how long
#      a second run waits for the first to give the engine back).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${DDPJOB_ENGINE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ddpjob/engine}
RUN_DIR=$DIR/run
SOCKET=$RUN_DIR/docker.sock
# docker 26's data; $DIR/docker held the images of the engine before it (moby v29 built
# from Go modules), which docker 26's containerd 1.7 is not to read.
DATA=$DIR/data
PY=${PY:-.venv/bin/python}
MODE=${DDPJOB_ENGINE:-auto}

log() { printf 'engine: %s\n' "$*" >&2; }

user_engine_answers() {
    [[ "$MODE" != own ]] && command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1
}

# The commands' folders, fetched first when not cached.
engine_path() {
    hack/engine-packages.sh || { log "the engine's packages could not be fetched"; return 1; }
}

# The docker CLI finds `docker build`'s BuildKit client (buildx) among its plugins: a
# client config of our own, so the user's ~/.docker is never written to. The daemon's
# own configuration: the containerd image store (kind load and the images' zstd layers).
configs() {
    local buildx=$1
    mkdir -p "$DIR/client/cli-plugins"
    ln -sf "$buildx" "$DIR/client/cli-plugins/docker-buildx"
    [[ -f "$DIR/client/config.json" ]] || echo '{}' >"$DIR/client/config.json"
    echo '{"features": {"containerd-snapshotter": true}}' >"$DIR/daemon.json"
}

# dockerd mounts its data root onto itself and its network namespaces under the exec root,
# and unmounts them when it exits; a dockerd killed outright (SIGKILL, a lost machine)
# leaves them, and they keep the directory from being removed. Only mounts under $DIR.
release_mounts() {
    local m
    while read -r m; do
        [[ -n "$m" ]] || continue
        log "unmounting $m, left by an engine that did not stop cleanly"
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
    done < <(awk -v d="$DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)
}

STARTED_PID=
stop_engine() {
    [[ -n "$STARTED_PID" ]] || return 0
    # Its networks that no container uses (kind's, once the cluster is deleted): dockerd keeps
    # a network's bridge on the host after it stops, and the host is to be left as found.
    DOCKER_HOST="unix://$SOCKET" timeout 30 docker network prune -f >/dev/null 2>&1 || true
    log "stopping dockerd (pid $STARTED_PID)"
    kill -TERM "$STARTED_PID" 2>/dev/null || true
    local waited=0
    # dockerd stops its containers (10 s each at most) and its containerd, then exits.
    while kill -0 "$STARTED_PID" 2>/dev/null && ((waited < 60)); do sleep 1; waited=$((waited + 1)); done
    if kill -0 "$STARTED_PID" 2>/dev/null; then
        log "dockerd did not stop within 60 s; killing it and its containerd"
        pkill -KILL -P "$STARTED_PID" 2>/dev/null || true
        kill -KILL "$STARTED_PID" 2>/dev/null || true
        release_mounts
    fi
    STARTED_PID=
}

start_engine() {
    local path=$1
    mkdir -p "$DATA" "$RUN_DIR"
    # A dockerd of ours left by a run that was killed outright: its pid file names it.
    if [[ -f "$RUN_DIR/docker.pid" ]]; then
        local old
        old=$(cat "$RUN_DIR/docker.pid")
        if [[ "$old" =~ ^[0-9]+$ ]] && grep -qz -- "--exec-root=$RUN_DIR" "/proc/$old/cmdline" 2>/dev/null; then
            log "stopping a dockerd left running by an earlier run (pid $old)"
            STARTED_PID=$old stop_engine
        fi
        rm -f "$RUN_DIR/docker.pid"
    fi
    release_mounts
    [[ ! -d "$DIR/docker" ]] || log "$DIR/docker holds the images of the engine before docker 26 ($(du -sh "$DIR/docker" 2>/dev/null | cut -f1)), unused now: remove it to free the disk"
    log "starting dockerd on unix://$SOCKET (data: $DATA, log: $DIR/dockerd.log)"
    # setsid: its own process group, so a Ctrl-C meant for the command does not reach it
    # before the trap stops it in order.
    PATH="$path:$PATH" setsid dockerd \
        --host="unix://$SOCKET" --data-root="$DATA" --exec-root="$RUN_DIR" --config-file="$DIR/daemon.json" \
        --pidfile="$RUN_DIR/docker.pid" --containerd-namespace=ddpjob --containerd-plugins-namespace=ddpjob-plugins \
        --cgroup-parent=ddpjob-engine --bridge=none --iptables=false --ip6tables=false --ip-forward=false \
        --ip-masq=false --default-address-pool=base=10.213.0.0/16,size=24 >"$DIR/dockerd.log" 2>&1 </dev/null &
    STARTED_PID=$!
    local deadline=$((SECONDS + ${ENGINE_START_TIMEOUT:-120}))
    until PATH="$path:$PATH" DOCKER_HOST="unix://$SOCKET" timeout 10 docker info >/dev/null 2>&1; do
        if ! kill -0 "$STARTED_PID" 2>/dev/null; then
            STARTED_PID=
            tail -20 "$DIR/dockerd.log" >&2
            log "dockerd exited while starting (log: $DIR/dockerd.log)"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            tail -20 "$DIR/dockerd.log" >&2
            log "dockerd did not answer within ${ENGINE_START_TIMEOUT:-120} s (log: $DIR/dockerd.log)"
            stop_engine
            return 1
        fi
        sleep 1
    done
    log "dockerd is up"
}

cmd_run() {
    [[ "${1:-}" == -- ]] && shift
    (($#)) || { echo "usage: hack/engine.sh run -- COMMAND..." >&2; exit 2; }
    if user_engine_answers; then
        log "using the docker that answers at ${DOCKER_HOST:-its default socket}"
        exec "$@"
    fi
    [[ "$MODE" != user ]] || { log "DDPJOB_ENGINE=user, and no docker answers"; exit 2; }
    ((EUID == 0)) || { log "starting an engine needs root (or run your own docker: see the README)"; exit 2; }
    # dockerd sets up its embedded DNS (127.0.0.11, which kind nodes resolve each other's
    # names through) with iptables rules inside each container's network namespace; with no
    # iptables command it starts the container anyway and only logs "Resolver Start failed".
    command -v iptables >/dev/null || hack/apt-install.sh engine iptables \
        || { log "dockerd's embedded DNS needs the iptables command (apt-get install iptables)"; exit 2; }
    local path
    path=$(engine_path) || exit 1
    mkdir -p "$DIR"
    exec {lock}>"$DIR/engine.lock"
    if ! flock -n "$lock"; then
        log "another run holds the engine ($DIR/engine.lock); waiting up to ${ENGINE_LOCK_TIMEOUT:-3600} s"
        flock -w "${ENGINE_LOCK_TIMEOUT:-3600}" "$lock" || { log "the engine was not given back in time"; exit 1; }
    fi
    configs "$(tr ':' '\n' <<<"$path" | while read -r d; do [[ -x "$d/docker-buildx" ]] && echo "$d/docker-buildx"; done | head -1)"
    trap 'stop_engine' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start_engine "$path"
    local rc=0
    DOCKER_HOST="unix://$SOCKET" DOCKER_CONFIG="$DIR/client" PATH="$path:$PATH" "$@" || rc=$?
    exit "$rc"
}

case "${1:-}" in
    run) shift; cmd_run "$@" ;;
    status)
        if user_engine_answers; then echo "the docker at ${DOCKER_HOST:-its default socket} answers: it is used"
        elif [[ "$MODE" == user ]]; then echo "no docker answers, and DDPJOB_ENGINE=user"; exit 1
        else echo "no docker answers: runs start dockerd on unix://$SOCKET (data: $DIR)"; fi ;;
    *) echo "usage: hack/engine.sh run -- COMMAND... | status" >&2; exit 2 ;;
esac
