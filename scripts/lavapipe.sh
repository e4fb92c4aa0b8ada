#!/usr/bin/env bash
# Make sure a Vulkan driver exists; install Mesa's software one (lavapipe) when none does.
# Sourced by the other scripts. Without root or sudo it says exactly what is missing.
set -euo pipefail

have_vulkan_driver() {
    # Either folder may be missing or empty; one driver manifest in either is enough.
    compgen -G '/usr/share/vulkan/icd.d/*.json' >/dev/null || compgen -G '/etc/vulkan/icd.d/*.json' >/dev/null
}

if ! have_vulkan_driver; then
    echo "closest: no Vulkan driver found; installing Mesa's lavapipe (mesa-vulkan-drivers)" >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers >/dev/null
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers >/dev/null
    else
        echo "closest: cannot install it without root: run 'apt-get install -y mesa-vulkan-drivers' as root" >&2
        exit 3
    fi
fi
