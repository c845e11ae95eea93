"""A real Kubernetes control plane for the kubernetes_api tier: etcd, kube-apiserver (RBAC and the Node
authorizer, Pod Security admission), kube-controller-manager, kube-scheduler and kwok, the binaries
built by scripts/kube/build from the pinned Go modules.

Everything listens on free loopback ports and lives in a temporary directory, with a CA, serving and
client certificates and a ServiceAccount signing key made for this start. kwok is the
kubelet: it keeps one fake node Ready and moves the pods scheduled on it through their phases
(kwok_stages.yaml) without running a container, so what pods *do* is simulated while everything the API
server, the admission chain, the authorizer and the controllers decide is real. `stop()` ends every
process; nothing outlives the tests.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes

from tests import processes, tiers
from tests.kubernetes.certificates import CertificateAuthority, KeyPair, service_account_signing_key

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "scripts" / "kube" / "build"
STAGES = Path(__file__).with_name("kwok_stages.yaml")
NODE = "kwok-node-0"
ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.96.0.0/16"
START_TIMEOUT = 180.0
# The controllers the tests rely on: ServiceAccounts and their tokens, Jobs, Deployments (through
# ReplicaSets), owner-reference garbage collection, namespace deletion, the CA bundle pods mount, and
# the node lifecycle (it lifts the not-ready taint admission puts on a new node once kwok reports it
# Ready).
CONTROLLERS = ("serviceaccount-controller", "serviceaccount-token-controller", "job-controller",
               "deployment-controller", "replicaset-controller", "garbage-collector-controller",
               "namespace-controller", "root-ca-certificate-publisher-controller",
               "ttl-after-finished-controller", "node-lifecycle-controller")


def binaries() -> Path:
    """Where scripts/setup built the control plane; a failure saying what to run when it has not."""
    done = subprocess.run([str(BUILD), "--print-dir"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"{BUILD} --print-dir failed")
    return Path(done.stdout.strip())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str]) -> Path:
    """A kubeconfig for `server` as `user` (client certificate files, or a bearer token)."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "test", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }))
    path.chmod(0o600)
    return path


def certificate_user(pair: KeyPair) -> dict[str, str]:
    return {"client-certificate": str(pair.certificate), "client-key": str(pair.key)}


class Component:
    """One control-plane process, its output in a log file of the session's directory."""

    def __init__(self, name: str, command: list[str], directory: Path) -> None:
        self.name, self.command = name, command
        self.log = directory / f"{name}.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; its log "
                               f"({self.log}) ends:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            processes.stop(self.process, group=True)


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _insecure() -> ssl.SSLContext:
    """For the controller manager's and scheduler's health endpoints, served with self-signed
    certificates they generate themselves (nothing secret is read through it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class ControlPlane:
    directory: Path
    server: str
    ca: Path
    admin: KeyPair
    components: list[Component]

    def admin_kubeconfig(self) -> Path:
        return kubeconfig(self.directory / "admin.kubeconfig", self.server, self.ca,
                          certificate_user(self.admin))

    def api_client(self) -> kubernetes.client.ApiClient:
        """A client with cluster-admin rights (system:masters), for setting the stage and judging."""
        return kubernetes.config.new_client_from_config(str(self.admin_kubeconfig()))

    def token_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that authenticates with `token` alone (a ServiceAccount's)."""
        return kubeconfig(path, self.server, self.ca, {"token": token})

    def wait(self, what: str, ready: Callable[[], Any], timeout: float = START_TIMEOUT) -> Any:
        """Poll `ready` until it returns something truthy; fail naming `what` and any dead component."""
        deadline = time.monotonic() + timeout
        while True:
            for component in self.components:
                component.check_alive()
            result = ready()
            if result:
                return result
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {c.name}:\n{c.tail(1500)}" for c in self.components)
                raise TimeoutError(f"{what} not within {timeout:.0f} s\n{logs}")
            time.sleep(0.2)

    def stop(self) -> None:
        for component in reversed(self.components):
            component.stop()


def start(directory: Path) -> ControlPlane:
    """Start the control plane in `directory` and return once a node is Ready for pods."""
    tiers.require("kubernetes_api", "a Kubernetes control plane")
    bin_dir = binaries()
    pki = directory / "pki"
    pki.mkdir(parents=True)
    ca = CertificateAuthority(pki)
    serving = ca.issue("apiserver", "kube-apiserver", server=True)
    admin = ca.issue("admin", "icepack-test-admin", "system:masters")
    signing = service_account_signing_key(pki)
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    plane = ControlPlane(directory, server, ca.certificate, admin, [])
    try:
        _start_etcd(plane, bin_dir, etcd_port, etcd_peer)
        _start_api_server(plane, bin_dir, etcd_port, api_port, serving, signing)
        _start_controllers(plane, bin_dir, ca, signing)
        _start_kwok(plane, bin_dir, ca)
    except BaseException:
        plane.stop()
        raise
    return plane


def _start_etcd(plane: ControlPlane, bin_dir: Path, port: int, peer: int) -> None:
    client_url, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
    plane.components.append(Component("etcd", [
        str(bin_dir / "etcd"), "--name=test", f"--data-dir={plane.directory / 'etcd'}",
        f"--listen-client-urls={client_url}", f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=test={peer_url}", "--log-level=warn", "--unsafe-no-fsync",
    ], plane.directory))
    plane.wait("etcd healthy", lambda: _http_ok(f"{client_url}/health"))


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _start_api_server(plane: ControlPlane, bin_dir: Path, etcd_port: int, port: int,
                      serving: KeyPair, signing: KeyPair) -> None:
    plane.components.append(Component("kube-apiserver", [
        str(bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--cert-dir={plane.directory / 'apiserver'}",
        f"--tls-cert-file={serving.certificate}", f"--tls-private-key-file={serving.key}",
        f"--client-ca-file={plane.ca}",
        f"--service-account-issuer={ISSUER}", f"--service-account-key-file={signing.certificate}",
        f"--service-account-signing-key-file={signing.key}",
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction,PodSecurity",
        f"--service-cluster-ip-range={SERVICE_CIDR}", "--profiling=false", "--v=0",
        # The `kubernetes` Service's endpoints may not be loopback; nothing here reaches it by Service.
        "--endpoint-reconciler-type=none",
    ], plane.directory))
    context = ssl.create_default_context(cafile=str(plane.ca))
    context.load_cert_chain(str(plane.admin.certificate), str(plane.admin.key))
    plane.wait("kube-apiserver ready", lambda: _https_ok(f"{plane.server}/readyz", context))


def _start_controllers(plane: ControlPlane, bin_dir: Path, ca: CertificateAuthority,
                       signing: KeyPair) -> None:
    for name, user, extra in (
        ("kube-controller-manager", "system:kube-controller-manager", [
            f"--controllers={','.join(CONTROLLERS)}", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={signing.key}", f"--root-ca-file={plane.ca}",
            # kwok's heartbeats come every 20-45 s: a loaded machine must not make the node look lost
            # (the lifecycle controller would taint it and evict the pods under test).
            "--node-monitor-grace-period=1h",
        ]),
        ("kube-scheduler", "system:kube-scheduler", []),
    ):
        config = kubeconfig(plane.directory / f"{name}.kubeconfig", plane.server, plane.ca,
                            certificate_user(ca.issue(name, user)))
        port = free_port()
        plane.components.append(Component(name, [
            str(bin_dir / name), f"--kubeconfig={config}", f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", "--leader-elect=false", *extra,
        ], plane.directory))
        plane.wait(f"{name} healthy", lambda port=port: _https_ok(f"https://127.0.0.1:{port}/healthz",
                                                                  _insecure()))


def _start_kwok(plane: ControlPlane, bin_dir: Path, ca: CertificateAuthority) -> None:
    # kwok acts for every kubelet at once (it writes node and pod status); it gets admin rights.
    config = kubeconfig(plane.directory / "kwok.kubeconfig", plane.server, plane.ca,
                        certificate_user(ca.issue("kwok", "kwok", "system:masters")))
    with plane.api_client() as api:
        core = kubernetes.client.CoreV1Api(api)
        core.create_node(kubernetes.client.V1Node(metadata=kubernetes.client.V1ObjectMeta(
            name=NODE, annotations={"kwok.x-k8s.io/node": "fake"},
            labels={"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", "type": "kwok"})))
        plane.components.append(Component("kwok", [
            str(bin_dir / "kwok"), f"--kubeconfig={config}", f"--config={STAGES}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{free_port()}", "--cidr=10.244.0.0/16",
        ], plane.directory))

        def node_schedulable() -> bool:
            node = core.read_node(NODE)
            ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
            return ready and not node.spec.taints

        plane.wait(f"node {NODE} Ready and untainted", node_schedulable)
