"""Model Explorer on a local port, with ExecuTorch's extension (its ETRecord adapter draws the
model) and node data files loaded as overlays: the ``ai-edge-model-explorer`` server, run
until Ctrl-C. The packages are the ``explorer`` extra (``make explorer``), not the pinned
stack: this module imports them only when it starts a server, and says how to get them.

Model Explorer's server reads any file a request names (``read_text_file``), runs an adapter
on any path (``send_command``) and answers any client that reaches its port: a page the user
visits could read the user's files through it, by DNS rebinding. So the server ``explore``
starts answers only (:class:`Access`):

- requests for its own address: ``Host`` 127.0.0.1 or localhost with its port (a rebinding
  page's is its own name), and an ``Origin``, where the browser sends one, of the same;
- on the API, a client with the token of this run (``secrets.token_urlsafe``, as Jupyter's),
  which the address it prints and opens carries: the page's first load turns it into a cookie
  for the page's own requests (its scripts ask the API by absolute paths, without it). Asked
  without it, the page is a line that says to open that address; the web app's scripts and
  styles, which the package ships and which hold no data, need no token;
- the files the command wrote: the ETRecord, which the adapter converts, and the overlays,
  which the page reads.

Any other request gets 403 with the reason, said on stderr too.
"""

import importlib.util
import json
import os
import secrets
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UnavailableError, UsageError

EXTENSION = "executorch_extension_model_explorer"
INSTALL = "Model Explorer is not installed: make explorer (or pip install -r requirements-explorer.txt)"
HOST = "127.0.0.1"
DEFAULT_PORT, LAST_PORT = 8080, 8099  # Model Explorer's: the first free port of these
API = ("/api/", "/apipost/", "/apistream/")
PAGE = ("/", "/index.html")
READ_FILE = "/api/v1/read_text_file"
COMMANDS = ("/api/v1/send_command", "/apipost/v1/send_command")  # a command in ?json=, or the body
# What the page asks that reads no file: the extensions, the (local) version, the server's
# directives (an event stream), and a model path it was handed, which a server not watching ignores.
READS_NO_FILE = ("/api/v1/get_extensions", "/api/v1/check_new_version", "/apistream/server_director",
                 "/api/v1/notify_user_provided_model_path")
NO_TOKEN = "no token of this run: open the address layoutbench explore printed, which carries it"
NO_TOKEN_PAGE = f"<!doctype html><title>layoutbench explore</title><p>{NO_TOKEN}.</p>\n"


def _real(path: str) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


@dataclass(frozen=True)
class Access:
    """Whom the server on ``port`` answers, and which files it serves: ``model`` (the ETRecord)
    and ``node_data`` (the overlays), each by its real path (see the module)."""

    port: int
    model: Path
    node_data: frozenset[Path]
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @classmethod
    def of(cls, port: int, model: Path, node_data: list[Path]) -> "Access":
        return cls(port, _real(str(model)), frozenset(_real(str(path)) for path in node_data))

    @property
    def hosts(self) -> tuple[str, str]:
        return f"{HOST}:{self.port}", f"localhost:{self.port}"

    @property
    def cookie(self) -> str:
        """The token's cookie: by port, since a browser keeps one host's cookies for all its ports."""
        return f"layoutbench-explore-{self.port}"

    def has_token(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.token.encode())

    def page_without_token(self, path: str, query: Mapping[str, str], cookie: str | None) -> bool:
        """Whether this is the page itself, asked without the run's token: it is answered with
        :data:`NO_TOKEN_PAGE`."""
        return path in PAGE and not self.has_token(query.get("token", cookie))

    def refusal(self, host: str, origin: str | None, path: str, query: Mapping[str, str], cookie: str | None,
                body: Callable[[], str] = str) -> str | None:
        """Why the server does not answer a request (None: it does): the ``Host`` and ``Origin``
        it was sent with, the path and query asked, the token's cookie, and ``body``, which reads
        what was sent (only where that is a command)."""
        if host not in self.hosts:
            return f"Host {host!r} is not this server's ({self.hosts[0]})"
        if origin is not None and origin not in [f"http://{address}" for address in self.hosts]:
            return f"Origin {origin!r} is not this server's page"
        if not path.startswith(API):
            return None
        if not self.has_token(query.get("token", cookie)):
            return NO_TOKEN
        if path == READ_FILE:
            wrote = _real(query.get("path", "")) in self.node_data
            return None if wrote else "it reads only the overlays explore wrote"
        if path in COMMANDS:
            return self._command_refusal(query.get("json", "") if path.startswith("/api/") else body())
        return None if path in READS_NO_FILE else f"{path} is not served here"

    def _command_refusal(self, text: str) -> str | None:
        """A command for an extension: the adapter's conversion of the ETRecord (keeping it), or a
        node data provider's settings (none of which reads a file)."""
        try:
            command = json.loads(text)
        except ValueError:
            command = None
        if not isinstance(command, dict):
            return "not a command"
        if command.get("cmdId") == "get_config_editors":
            return None
        if (command.get("cmdId") == "convert" and not command.get("deleteAfterConversion")
                and isinstance(command.get("modelPath"), str) and _real(command["modelPath"]) == self.model):
            return None
        return "its extensions run only on the model explore wrote"


def require() -> None:
    """Say in one line how to install Model Explorer where it is missing (before any work)."""
    if importlib.util.find_spec("model_explorer") is None or importlib.util.find_spec(EXTENSION) is None:
        raise UnavailableError(INSTALL)


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex((HOST, port)) == 0


def free_port(asked: int) -> int:
    """``asked`` where it is free; for :data:`DEFAULT_PORT`, the first free one up to
    :data:`LAST_PORT`. A :class:`UsageError` otherwise (Model Explorer's own would be a line
    in red, or a random port)."""
    candidates = range(DEFAULT_PORT, LAST_PORT + 1) if asked == DEFAULT_PORT else [asked]
    port = next((port for port in candidates if not _port_taken(port)), None)
    if port is None:
        taken = f"ports {DEFAULT_PORT} to {LAST_PORT} are" if asked == DEFAULT_PORT else f"port {asked} is"
        raise UsageError(f"{taken} in use; name a free one with --port")
    return port


def _no_version_check(print_msg: bool = True) -> dict:
    return {"version": "", "runningVersion": "", "releaseUrl": "", "desktopAppUrl": ""}


def _check_each_request(access: Access) -> None:
    """Answer only what ``access`` allows, and set the token's cookie where the query brings it.
    Model Explorer makes its Flask app inside its ``start``, out of reach: the check is a
    receiver of the signal Flask sends before it dispatches each request (``request_started``),
    where an abort answers the request as one in a view would."""
    import flask

    def keep_token(response: flask.Response) -> flask.Response:
        response.set_cookie(access.cookie, access.token, httponly=True, samesite="Strict")
        return response

    def check(sender, **extra) -> None:
        request = flask.request
        refusal = access.refusal(request.host, request.headers.get("Origin"), request.path, request.args,
                                 request.cookies.get(access.cookie), lambda: request.get_data(as_text=True))
        if refusal:
            print(f"layoutbench explore: refused {request.method} {request.path}: {refusal}", file=sys.stderr)
            flask.abort(flask.Response(json.dumps({"error": refusal}), 403, mimetype="application/json"))
        if access.page_without_token(request.path, request.args, request.cookies.get(access.cookie)):
            # 200, not 403: Model Explorer's start waits for "/" to answer 200, asking without a token
            flask.abort(flask.Response(NO_TOKEN_PAGE, 200, mimetype="text/html"))
        if access.has_token(request.args.get("token")):
            flask.after_this_request(keep_token)

    flask.request_started.connect(check, weak=False)


def serve(model: Path, node_data: list[Path], port: int, open_browser: bool) -> None:
    """Start Model Explorer on 127.0.0.1:``port`` (:func:`free_port`) showing ``model`` with
    ``node_data`` overlays; returns on Ctrl-C. It prints its address
    (``http://127.0.0.1:PORT/?data=...&token=...``) once it answers, and opens it."""
    require()
    import model_explorer
    from model_explorer import server
    from model_explorer.config import ModelExplorerConfig

    access = Access.of(port, model, node_data)

    class TokenConfig(ModelExplorerConfig):
        """The address Model Explorer prints and opens, ``/?data=...``, with the token beside the data."""

        def to_url_param_value(self) -> str:
            return f"{super().to_url_param_value()}&token={access.token}"

    if _port_taken(port):  # since free_port (minutes of lowering ago): Model Explorer would move to another
        raise UsageError(f"port {port} was taken meanwhile; name a free one with --port")
    # Its check for a newer release asks PyPI and GitHub from a thread the process then waits
    # for at exit: a local viewer asks the network nothing.
    server._check_new_version = _no_version_check
    config = TokenConfig().add_model_from_path(str(model))
    for path in node_data:
        config.add_node_data_from_path(str(path))
    _check_each_request(access)
    sys.stdout.flush()
    model_explorer.visualize_from_config(config, host=HOST, port=port, extensions=[EXTENSION],
                                         no_open_in_browser=not open_browser)
