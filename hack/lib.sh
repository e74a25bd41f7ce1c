# shellcheck shell=bash
# Shared helpers for hack/* scripts. Source it; do not execute it.

SHADOW_ROOT=${SHADOW_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SHADOW_CACHE=${SHADOW_CACHE:-$SHADOW_ROOT/hack/.cache}
export SHADOW_ROOT SHADOW_CACHE

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# System packages the build, tests and benchmarks need (Debian 12 names).
SHADOW_APT_PACKAGES=(
  libseccomp-dev pkg-config busybox-static
  runc crun bubblewrap hyperfine uidmap iproute2 jq tmux python3 time git util-linux e2fsprogs gcc
  docker.io podman containerd
)
# >>> Packages for later scenarios (NOT needed yet). Add them here when the
# >>> tests/benchmarks that use them land:
#   golang-go
SHADOW_APT_PACKAGES_LATER=()

missing_packages() {
  local p status
  for p in "$@"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = installed ] || printf '%s\n' "$p"
  done
}

# ensure_packages [--update]: install missing SHADOW_APT_PACKAGES with apt-get.
# --update forces one `apt-get update` even when nothing is missing;
# --if-missing (default) updates and installs only when something is missing.
ensure_packages() {
  local force_update=0 missing
  [ "${1:-}" = --update ] && force_update=1
  mapfile -t missing < <(missing_packages "${SHADOW_APT_PACKAGES[@]}" "${SHADOW_APT_PACKAGES_LATER[@]}")
  if [ "${#missing[@]}" -eq 0 ] && [ "$force_update" -eq 0 ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    [ "${#missing[@]}" -eq 0 ] && return 0
    warn "not root: cannot install missing packages: ${missing[*]}"
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  log "apt-get update"
  if ! apt-get update -q; then
    [ "${#missing[@]}" -eq 0 ] || die "apt-get update failed and packages are missing: ${missing[*]}"
    warn "apt-get update failed; all packages already installed, continuing"
    return 0
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}
