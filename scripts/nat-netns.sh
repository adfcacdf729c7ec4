#!/usr/bin/env bash
# Two private networks behind two Linux NATs, and a public network between
# them, in network namespaces (root only; nothing outside the namespaces
# changes). Addresses come from the documentation ranges (RFC 5737):
#
#   PREFIX-a   192.0.2.2     ── PREFIX-nat1 192.0.2.1    | 203.0.113.1  ─┐
#   PREFIX-b   198.51.100.2  ── PREFIX-nat2 198.51.100.1 | 203.0.113.2  ─┤ routed by
#                                       PREFIX-pub 203.0.113.10 (public) ─┘ PREFIX-pub
#
# The public side is a router (PREFIX-pub, a point-to-point link to each
# NAT), not a switch: as on the Internet, a datagram between the two NATs
# crosses a router, where one sent with a small TTL expires.
#
# Each NAT is nftables `masquerade` on its public side: "cone" keeps the
# source port where it can (endpoint-independent mapping) and conntrack
# lets in only replies from the endpoint a host sent to
# (address-and-port-dependent filtering); "symmetric" adds
# `random,fully-random`, a new random port per mapping.
#
# Usage: nat-netns.sh up [cone|symmetric] [cone|symmetric]   (NAT 1, NAT 2)
#        nat-netns.sh down
#        nat-netns.sh exec a|b|pub|nat1|nat2 COMMAND...
# `up` starts from scratch each time (it runs `down` first); `down` removes
# whatever exists. TERN_NAT_PREFIX names the namespaces (default tern-nat).
set -euo pipefail

prefix=${TERN_NAT_PREFIX:-tern-nat}
ns() { echo "${prefix}-$1"; }
in_ns() { local n=$1; shift; ip netns exec "$(ns "$n")" "$@"; }

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "nat-netns.sh: needs root (network namespaces, nftables)" >&2
        exit 2
    fi
}

need_nft() {
    if ! command -v nft >/dev/null; then
        echo "nat-netns.sh: installing nftables" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y nftables >/dev/null \
            || { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y nftables >/dev/null; }
    fi
}

down() {
    for n in a b nat1 nat2 pub; do
        ip netns del "$(ns "$n")" 2>/dev/null || true
    done
}

# masquerade flags for a NAT kind
masquerade() {
    case "$1" in
        cone) echo "masquerade" ;;
        symmetric) echo "masquerade random,fully-random" ;;
        *) echo "nat-netns.sh: unknown NAT kind '$1' (cone or symmetric)" >&2; exit 2 ;;
    esac
}

# nat NUMBER KIND HOST LAN_NET LAN_NAT_IP LAN_HOST_IP WAN_IP
nat() {
    local i=$1 kind=$2 host=$3 lan_nat=$4 lan_host=$5 wan=$6
    local router; router=$(ns "nat$i")
    ip netns add "$router"
    # The host's side of its LAN, and the NAT's.
    ip link add "lan$i" netns "$(ns "$host")" type veth peer name lan netns "$router"
    in_ns "$host" ip addr add "$lan_host/24" dev "lan$i"
    in_ns "$host" ip link set "lan$i" up
    in_ns "$host" ip route add default via "$lan_nat"
    in_ns "nat$i" ip addr add "$lan_nat/24" dev lan
    in_ns "nat$i" ip link set lan up
    # The NAT's public side: a link of its own to the public router.
    ip link add wan netns "$router" type veth peer name "wan$i" netns "$(ns pub)"
    in_ns pub ip link set "wan$i" up
    in_ns pub ip route add "$wan/32" dev "wan$i"
    in_ns "nat$i" ip addr add "$wan/32" dev wan
    in_ns "nat$i" ip link set wan up
    in_ns "nat$i" ip route add 203.0.113.10/32 dev wan
    in_ns "nat$i" ip route add default via 203.0.113.10 dev wan
    in_ns "nat$i" ip link set lo up
    in_ns "nat$i" sysctl -qw net.ipv4.ip_forward=1
    in_ns "nat$i" nft -f - <<NFT
table ip nat {
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "wan" counter $(masquerade "$kind")
    }
}
NFT
}

up() {
    local kind1=${1:-cone} kind2=${2:-cone}
    masquerade "$kind1" >/dev/null
    masquerade "$kind2" >/dev/null
    need_root
    need_nft
    down
    for n in a b pub; do
        ip netns add "$(ns "$n")"
        in_ns "$n" ip link set lo up
    done
    in_ns pub ip addr add 203.0.113.10/32 dev lo
    in_ns pub sysctl -qw net.ipv4.ip_forward=1
    nat 1 "$kind1" a 192.0.2.1 192.0.2.2 203.0.113.1
    nat 2 "$kind2" b 198.51.100.1 198.51.100.2 203.0.113.2
    echo "up: $(ns a) 192.0.2.2 behind $(ns nat1) 203.0.113.1 ($kind1)," \
        "$(ns b) 198.51.100.2 behind $(ns nat2) 203.0.113.2 ($kind2), $(ns pub) 203.0.113.10"
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) need_root; down ;;
    exec) shift; n=${1:?which namespace}; shift; in_ns "$n" "$@" ;;
    *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
