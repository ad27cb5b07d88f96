#!/usr/bin/env bash
# Runs a command as one real node's lane: in a network and mount namespace of its own, as
# kind runs each node in a container of its own (e2e/controlplane/README.md, "Lanes").
#
# Usage: lane-ns.sh <command> [args...]   (root; e.g. lane-ns.sh python3 -m pytest ...)
#
# Everything the command starts (control plane, kubelet, containerd, kube-proxy,
# kube-router, the operator and the stand-ins) sees only this lane's network: loopback
# and the node's bridge, whose address (10.213.0.1) every lane may use. iptables and
# nftables rules, ipsets, links and net.* sysctls are the lane's and vanish with it.
# The paths the kubelet and containerd use whatever they are told (/run/netns,
# /run/containerd, /var/lib/cni, /var/lib/kubelet, /var/log/containers) are the lane's
# too: /run, /var/lib and /var/log are overlays whose changes live in a tmpfs of the
# lane's, so the machine's own files are read but never written. /sys is mounted again
# for the lane's network (its /sys/class/net lists the lane's links), with the machine's
# cgroup hierarchies moved into it.
#
# The namespaces are entered here, before Python starts: unshare(CLONE_NEWNS) fails in a
# process with threads, and pytest-xdist's worker, execnet, starts one at once. A fresh
# network namespace has no route out, so images are built before a lane starts
# (e2e/controlplane/lanes.py prebuild). AGENTCHAIN_REALNODE_LANE names the lane (its
# pid, unique while it runs): the kubelet's cgroupRoot is agentchain-realnode-<lane>.
set -euo pipefail

if [ "${1:-}" != --inside ]; then
  if [ "$#" -eq 0 ]; then
    echo "usage: $0 <command> [args...]" >&2
    exit 2
  fi
  # The network namespace the lane leaves: a process is in the lane when its own is
  # another one (the variables alone are inherited by anything).
  AGENTCHAIN_REALNODE_LANE_FROM=$(readlink /proc/self/ns/net)
  export AGENTCHAIN_REALNODE_LANE_FROM
  exec unshare --net --mount --propagation private -- "$0" --inside "$@"
fi
shift

ip link set lo up
scratch=$(mktemp -d /tmp/agentchain-lane.XXXXXX)
mount -t tmpfs -o mode=0755 agentchain-lane "$scratch"
for dir in /run /var/lib /var/log; do
  name=${dir//\//_}
  mkdir -p "$scratch/$name/upper" "$scratch/$name/work"
  mount -t overlay agentchain-lane \
    -o "lowerdir=$dir,upperdir=$scratch/$name/upper,workdir=$scratch/$name/work" "$dir"
done
mkdir "$scratch/cgroup"
mount --rbind /sys/fs/cgroup "$scratch/cgroup"
mount -t sysfs agentchain-lane /sys
mount --move "$scratch/cgroup" /sys/fs/cgroup
# What another node on the machine left at those fixed paths is not this lane's: gone
# from its view (whiteouts in the tmpfs), still there for the machine.
rm -rf /run/netns /run/containerd /var/lib/cni /var/lib/kubelet /var/log/containers \
  /var/log/pods
# The overlays keep the tmpfs alive; its mount point on the machine's /tmp can go.
umount --lazy "$scratch"
rmdir "$scratch"

export AGENTCHAIN_REALNODE_LANE=$$
exec "$@"
