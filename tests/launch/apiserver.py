"""A small Kubernetes API server for `trainenv serve` to read pods' owners from: HTTPS with a
certificate minted by the openssl CLI, a bearer token checked on every request, and GET of the
objects it is given at their real API paths (404 Status JSON for any other object). The harness
changes the objects between the steps of a scenario (a JobSet that grows) and reads back which
GETs trainenv made, and when.

It runs in the harness's own process, on 127.0.0.1 in the root network namespace: only trainenv
talks to it, never the pods.
"""
import json
import secrets
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import cluster
from cluster import HarnessError


def resource_of(kind):
    """The REST resource of a kind (JobSet -> jobsets, ClusterTrainingRuntime ->
    clustertrainingruntimes): every kind the harness serves pluralises with an "s"."""
    return kind.lower() + "s"


def api_path(obj):
    """Where the real API server serves `obj`: /api/v1/namespaces/<ns>/pods/<name>,
    /apis/<group>/<version>/namespaces/<ns>/<resource>/<name>, or without the namespace part
    for a cluster-scoped object (one with no metadata.namespace: a ClusterTrainingRuntime)."""
    api_version, metadata = obj["apiVersion"], obj["metadata"]
    path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    if metadata.get("namespace"):
        path += f"/namespaces/{metadata['namespace']}"
    return f"{path}/{resource_of(obj['kind'])}/{metadata['name']}"


def status(code, reason, message, details=None):
    """A metav1.Status, as the API server answers an error."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def mint_certificate(directory):
    """A CA and a serving certificate for 127.0.0.1 signed by it, with the openssl CLI (ECDSA
    P-256); returns (ca.crt, tls.crt, tls.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_crt, ca_key = directory / "ca.crt", directory / "ca.key"
    crt, key, csr, ext = (directory / n for n in ("tls.crt", "tls.key", "tls.csr", "tls.cnf"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    cluster.run("openssl", "req", "-x509", "-new", *curve, "-keyout", str(ca_key), "-out", str(ca_crt),
                "-days", "1", "-subj", "/CN=fake kube-apiserver CA",
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    cluster.run("openssl", "req", "-new", *curve, "-keyout", str(key), "-out", str(csr),
                "-subj", "/CN=kube-apiserver")
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    cluster.run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
                "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(crt))
    return ca_crt, crt, key


class FakeAPIServer:
    """GET-only Kubernetes API over HTTPS. `serve(objects)` replaces what it serves; `requests`
    lists every request it answered: (time.time(), method, path, status code)."""

    def __init__(self, directory):
        self.directory = directory
        self.token = secrets.token_urlsafe(24)
        self.objects = {}  # api path -> object
        self.requests = []
        self.lock = threading.Lock()
        self.server = self.thread = None
        self.ca = None
        self.port = None
        self._version = 0

    def serve(self, objects):
        """From now on serves exactly `objects` (each gets a resourceVersion, as stored objects
        do; a changed object a new one)."""
        with self.lock:
            served = {}
            for obj in objects:
                obj = json.loads(json.dumps(obj))
                path = api_path(obj)
                old = self.objects.get(path)
                old_body = None
                if old is not None:
                    old_body = dict(old, metadata={k: v for k, v in old["metadata"].items()
                                                   if k != "resourceVersion"})
                if old_body != obj:
                    self._version += 1
                    obj["metadata"]["resourceVersion"] = str(self._version)
                else:
                    obj = old
                served[path] = obj
            self.objects = served

    def gets(self, since=0.0):
        """[(time, path, code)] of the GETs answered at or after `since`."""
        with self.lock:
            return [(t, path, code) for t, method, path, code in self.requests
                    if method == "GET" and t >= since]

    def start(self):
        self.ca, crt, key = mint_certificate(self.directory)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(crt), str(key))
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                # The handshake here, in the connection's own thread, not in accept().
                self.request.settimeout(10)
                self.request.do_handshake()
                super().setup()

            def log_message(self, *args):  # the harness keeps its own record
                pass

            def _answer(self, code, body):
                # Recorded before it is sent: once trainenv has its answer, so has `requests`.
                with owner.lock:
                    owner.requests.append((time.time(), self.command, self.path, code))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.headers.get("Authorization") != f"Bearer {owner.token}":
                    self._answer(401, status(401, "Unauthorized", "Unauthorized"))
                    return
                path = self.path.split("?", 1)[0]
                with owner.lock:
                    obj = owner.objects.get(path)
                if obj is None:
                    parts = path.rstrip("/").split("/")
                    group = parts[2] if len(parts) > 2 and parts[1] == "apis" else ""
                    what = parts[-2] + (f".{group}" if group else "")
                    self._answer(404, status(404, "NotFound", f'{what} "{parts[-1]}" not found',
                                             {"name": parts[-1], "group": group, "kind": parts[-2]}))
                else:
                    self._answer(200, obj)

            def _refuse(self):
                if self.headers.get("Authorization") != f"Bearer {owner.token}":
                    self._answer(401, status(401, "Unauthorized", "Unauthorized"))
                else:
                    self._answer(405, status(405, "MethodNotAllowed",
                                             f"{self.command} is not served here: GET only"))

            do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-apiserver",
                                       daemon=True)
        self.thread.start()

    def write_kubeconfig(self, path):
        """A kubeconfig whose current context reaches us: the server, our CA, the token."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                      "certificate-authority": str(self.ca)}}],
            "users": [{"name": "trainenv", "user": {"token": self.token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "trainenv"}}],
        }
        Path(path).write_text(json.dumps(config, indent=1))
        Path(path).chmod(0o600)
        return path

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def check_served(server):
    """Raises unless `server` answers: a GET with the token reaches it (used once, at start)."""
    import http.client
    context = ssl.create_default_context(cafile=str(server.ca))
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=5)
    try:
        connection.request("GET", "/api/v1/namespaces/default/pods/nothing",
                           headers={"Authorization": f"Bearer {server.token}"})
        response = connection.getresponse()
        response.read()
        if response.status != 404:
            raise HarnessError(f"the fake API server answered {response.status} to a GET of a "
                               "missing pod, expected 404")
    except (OSError, ssl.SSLError) as error:
        raise HarnessError(f"the fake API server on 127.0.0.1:{server.port} did not answer: {error}")
    finally:
        connection.close()
        with server.lock:  # our own probe is not trainenv's
            server.requests = [r for r in server.requests if not r[2].endswith("/pods/nothing")]
