"""Whom ``explore``'s Model Explorer answers: requests for its own address (no rebinding page's),
on the API only with the run's token, and only about the files the command wrote (the
server itself, as the page uses it: tests/test_model_explorer.py)."""

import json

import pytest

from harness.errors import UsageError
from harness.inspection import explorer_server
from harness.inspection.explorer_server import Access, free_port

PORT = 8123
OWN = f"127.0.0.1:{PORT}"


@pytest.fixture
def access(tmp_path) -> Access:
    (tmp_path / "m.etrecord").write_bytes(b"the graph")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "01-overlay.json").write_text("{}")
    return Access.of(PORT, tmp_path / "m.etrecord", [tmp_path / "m" / "01-overlay.json"])


def _asked(access: Access, route: str, host: str = OWN, origin: str | None = None, body: str = "",
           cookie: str | None = None, **query) -> str | None:
    return access.refusal(host, origin, route, query, cookie, lambda: body)


def test_only_requests_for_its_own_address_are_answered(access):
    assert _asked(access, "/") is None and _asked(access, "/", host=f"localhost:{PORT}") is None
    assert _asked(access, "/", host=f"evil.example:{PORT}") == (
        f"Host 'evil.example:{PORT}' is not this server's (127.0.0.1:{PORT})")  # a page rebinding its name
    assert _asked(access, "/", host="127.0.0.1:80") is not None
    assert _asked(access, "/main.js", origin=f"http://{OWN}") is None
    assert _asked(access, "/main.js", origin="http://evil.example") == (
        "Origin 'http://evil.example' is not this server's page")


def test_the_api_answers_only_a_client_with_the_token_of_the_run(access, tmp_path):
    other = Access.of(PORT, tmp_path / "m.etrecord", [])
    assert len(access.token) >= 40 and other.token != access.token  # secrets.token_urlsafe(32), per run
    no_token = "no token of this run: open the address layoutbench explore printed, which carries it"
    assert _asked(access, "/api/v1/get_extensions") == no_token
    assert _asked(access, "/api/v1/get_extensions", token=other.token) == no_token
    assert _asked(access, "/api/v1/get_extensions", cookie=other.token) == no_token
    assert _asked(access, "/api/v1/get_extensions", token=access.token) is None  # the address it printed
    assert _asked(access, "/apistream/server_director", cookie=access.token) is None  # the page's cookie
    assert _asked(access, "/api/v1/get_extensions", token="é") == no_token
    assert access.cookie == f"layoutbench-explore-{PORT}"
    assert _asked(access, "/main-PMF54IZX.js") is None  # the web app's scripts hold no data
    assert access.page_without_token("/", {}, None) and access.page_without_token("/index.html", {}, other.token)
    assert not access.page_without_token("/", {"token": access.token}, None)
    assert not access.page_without_token("/", {}, access.token)
    assert not access.page_without_token("/main-PMF54IZX.js", {}, None)


def test_only_the_files_the_command_wrote_are_read_or_converted(access, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's")
    secret.chmod(0o600)
    token = access.token
    overlay = tmp_path / "m" / "01-overlay.json"
    assert _asked(access, "/api/v1/read_text_file", path=str(overlay), token=token) is None
    assert _asked(access, "/api/v1/read_text_file", path=f"{tmp_path}/m/../m/01-overlay.json", token=token) is None
    assert _asked(access, "/api/v1/read_text_file", path=str(secret), token=token) == (
        "it reads only the overlays explore wrote")
    assert _asked(access, "/api/v1/read_text_file", token=token) is not None

    def command(model, cmd="convert", delete=False) -> str:
        return json.dumps({"extensionId": "etrecord_adapter", "cmdId": cmd, "modelPath": str(model),
                           "settings": {}, "deleteAfterConversion": delete})

    model = tmp_path / "m.etrecord"
    assert _asked(access, "/api/v1/send_command", json=command(model), token=token) is None
    assert _asked(access, "/apipost/v1/send_command", body=command(model), cookie=token) is None
    runs_only_on_it = "its extensions run only on the model explore wrote"
    assert _asked(access, "/apipost/v1/send_command", body=command(secret), cookie=token) == runs_only_on_it
    assert _asked(access, "/apipost/v1/send_command", body=command(model, delete=True), cookie=token) == (
        runs_only_on_it)  # which would remove its folder as the server ends
    assert _asked(access, "/apipost/v1/send_command", body=command(model, "run"), cookie=token) == (
        runs_only_on_it)  # a node data provider's run reads the files its settings name
    assert _asked(access, "/apipost/v1/send_command", body=command(None, "get_config_editors"), cookie=token) is None
    assert _asked(access, "/apipost/v1/send_command", body="[", cookie=token) == "not a command"
    for elsewhere in ("/apipost/v1/upload", "/apipost/v1/update_config"):
        assert _asked(access, elsewhere, cookie=token) == f"{elsewhere} is not served here"


def test_a_port_is_free_or_the_command_says_to_name_another(monkeypatch):
    monkeypatch.setattr(explorer_server, "_port_taken", lambda port: port < 8082)
    assert free_port(8080) == 8082 and free_port(9000) == 9000
    with pytest.raises(UsageError, match="port 8081 is in use; name a free one with --port"):
        free_port(8081)
    monkeypatch.setattr(explorer_server, "_port_taken", lambda port: True)
    with pytest.raises(UsageError, match="ports 8080 to 8099 are in use; name a free one with --port"):
        free_port(8080)
