#!/usr/bin/env bash
# Make sure a Vulkan driver exists; install Mesa's software one (lavapipe) when none does.
# Sourced by the other scripts. Without root or sudo it says exactly what is missing.
#
# lavapipe from Mesa 24 on branches around code that no lane of a subgroup runs, where Mesa
# 22.3 (Debian 12's own) runs it masked: our kernels run 1.2–1.5× faster on the newer one
# (docs/perf-history.md, "Mesa 25's lavapipe"). On Debian 12 it comes from bookworm-backports, which
# is used for this one package only (`apt-get install -t bookworm-backports`).
# `bash scripts/lavapipe.sh --upgrade` replaces an older lavapipe that is already installed.
set -euo pipefail

have_vulkan_driver() {
    # Either folder may be missing or empty; one driver manifest in either is enough.
    compgen -G '/usr/share/vulkan/icd.d/*.json' >/dev/null || compgen -G '/etc/vulkan/icd.d/*.json' >/dev/null
}

# Runs its arguments as root: directly, or through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    else
        sudo "$@"
    fi
}

# Installs Mesa's packages named in the arguments (on Debian 12 from bookworm-backports, so
# that they match lavapipe's Mesa).
install_mesa() {
    local bookworm=false
    grep -qs '^VERSION_CODENAME=bookworm' /etc/os-release && bookworm=true
    if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
        if $bookworm; then
            echo "closest: cannot install it without root: as root, run
  echo 'deb http://deb.debian.org/debian bookworm-backports main' > /etc/apt/sources.list.d/closest-bookworm-backports.list
  apt-get update && apt-get install -y -t bookworm-backports $*
(plain 'apt-get install -y $*' gives Mesa 22.3, which works and is slower)" >&2
        else
            echo "closest: cannot install it without root: run 'apt-get install -y $*' as root" >&2
        fi
        exit 3
    fi
    local release=()
    if $bookworm; then
        echo 'deb http://deb.debian.org/debian bookworm-backports main' |
            as_root tee /etc/apt/sources.list.d/closest-bookworm-backports.list >/dev/null
        release=(-t bookworm-backports)
    fi
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${release[@]}" "$@" >/dev/null
}

install_lavapipe() {
    install_mesa mesa-vulkan-drivers
}

# Mesa's GL driver through EGL (llvmpipe), which tests/gl.rs runs the kernels on: the test
# command installs it when missing.
have_gl_driver() {
    compgen -G '/usr/share/glvnd/egl_vendor.d/*mesa*.json' >/dev/null
}

ensure_gl_driver() {
    if ! have_gl_driver; then
        echo "closest: no GL driver for the GL tests; installing Mesa's (libegl-mesa0, libgl1-mesa-dri)" >&2
        install_mesa libegl1 libegl-mesa0 libgl1-mesa-dri
    fi
}

if ! have_vulkan_driver; then
    echo "closest: no Vulkan driver found; installing Mesa's lavapipe (mesa-vulkan-drivers)" >&2
    install_lavapipe
elif [ "${1:-}" = --upgrade ]; then
    mesa=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)
    if [ -n "$mesa" ] && [ "${mesa%%.*}" -lt 24 ] 2>/dev/null; then
        echo "closest: upgrading lavapipe from Mesa $mesa" >&2
        install_lavapipe
    fi
fi
