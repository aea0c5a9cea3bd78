# The benchmarks' topology (sourced, not run): a client namespace and a
# server namespace joined by a veth pair, a temporary directory, and a
# cleanup at exit that stops the server and removes them all.
#
#   topology TAG SUBNET
#
# makes NSC (the client's namespace, SUBNET.1 on oxTAGc0) and NSS (the
# server's, SUBNET.2 on oxTAGs0), TMP, and SERVER_PID="" (set it to the
# running server's pid: cleanup sends it SIGINT). SUBNET is three octets,
# e.g. 10.82.0.

topology() {
    NSC="ox${1}c$$"
    NSS="ox${1}s$$"
    TMP="$(mktemp -d)"
    SERVER_PID=""
    trap topology_cleanup EXIT
    ip netns add "$NSC"
    ip netns add "$NSS"
    ip -n "$NSC" link set lo up
    ip -n "$NSS" link set lo up
    ip -n "$NSC" link add "ox${1}c0" type veth peer name "ox${1}s0" netns "$NSS"
    ip -n "$NSC" addr add "$2.1/24" dev "ox${1}c0"
    ip -n "$NSS" addr add "$2.2/24" dev "ox${1}s0"
    ip -n "$NSC" link set "ox${1}c0" up
    ip -n "$NSS" link set "ox${1}s0" up
}

topology_cleanup() {
    if [ -n "$SERVER_PID" ]; then kill -INT "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    ip netns del "$NSC" 2>/dev/null || true
    ip netns del "$NSS" 2>/dev/null || true
    rm -rf "$TMP"
}
