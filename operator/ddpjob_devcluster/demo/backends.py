"""The cluster the demo runs, and whether it is still whole: the real control plane, its
Nodes, and a network namespace of its own where it can have one."""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Callable

from ddpjob_devcluster.clusters.client import OperatorProcess
from ddpjob_devcluster.clusters.real import RealCluster
from ddpjob_devcluster.controlplane.node import NodeShape
from ddpjob_devcluster.demo import network as cluster_network

DemoCluster = RealCluster


def make_cluster(
    args: argparse.Namespace, workdir: pathlib.Path, relay: cluster_network.Relay | None = None
) -> DemoCluster:
    """relay: the API server's port on the host, when the cluster has a network of its own."""
    shapes = [NodeShape(f"cpu-{i}", cpu="64", memory="256Gi") for i in range(args.nodes)]
    shapes += [
        NodeShape(
            f"gpu-{i}", cpu="64", memory="256Gi", gpus=args.gpus_per_node, labels=(("nvidia.com/gpu.present", "true"),)
        )
        for i in range(args.gpu_nodes)
    ]
    # A network of its own: the API server on the relayed port, Pod CIDR addresses; else
    # RealCluster's defaults (a free port, loopback addresses).
    api_port, addresses = (relay.port, cluster_network.PodAddresses()) if relay is not None else (0, None)
    return RealCluster(
        workdir,
        namespace="default",
        nodes=shapes,
        scope="cluster",
        stop_grace=10.0,
        api_port=api_port,
        addresses=addresses,
    )


def own_network(args: argparse.Namespace, say: Callable[[str], None]) -> cluster_network.Relay | None:
    """Move into the cluster's own network namespace (the endpoint
    controllers refuse loopback Pod addresses); None, and why, where it stays on the host's."""
    why = "--host-network" if args.host_network else None
    if why is None:
        relay = cluster_network.Relay()
        why = cluster_network.enter()
        if why is None:
            say(
                f"network: a namespace of its own, Pod IPs from {cluster_network.POD_CIDR}, the API server "
                f"published on 127.0.0.1:{relay.port}; Pods reach nothing outside the cluster"
            )
            return relay.start()
        relay.stop()
    say(
        f"network: the host's ({why}); Pods get loopback addresses, which an EndpointSlice may not hold, so "
        f"each job's Service gets FailedToUpdateEndpoint(Slices) Warning Events: expected here, not the job's fault"
    )
    return None


def operator_of(cluster: DemoCluster) -> OperatorProcess:
    """The operator process, which the cluster's start() made."""
    if cluster.operator is None:
        raise RuntimeError("the cluster is not started: it has no operator")
    return cluster.operator


def check_alive(cluster: DemoCluster) -> None:
    operator = operator_of(cluster)
    if not operator.alive:
        raise RuntimeError(
            f"the operator exited ({operator.returncode}); see {operator.log_path}:\n{operator.log_tail(20)}"
        )
    if cluster.kubelet is not None and cluster.kubelet.errors:
        raise RuntimeError(f"the kubelet failed: {cluster.kubelet.errors[0]!r}")
    cluster.plane.check_alive()  # one line naming the component and its log
