"""Sandbox ids that name their server (`airlock serve --node-name`), and the URL to reach it."""
import pytest

from airlock_client import sandbox_node, sandbox_url


def test_an_id_names_its_server() -> None:
    sid = "sb-airlock-2.1f3a-7-00ff00ff00ff00ff"
    assert sandbox_node(sid) == "airlock-2"
    url = sandbox_url(sid, "ws://{node}.airlock.airlock.svc.cluster.local:7878/")
    assert url == "ws://airlock-2.airlock.airlock.svc.cluster.local:7878/"


def test_an_id_without_a_server_name_has_no_url() -> None:
    assert sandbox_node("sb-1f3a-7-00ff00ff00ff00ff") is None
    assert sandbox_node("other") is None
    with pytest.raises(ValueError):
        sandbox_url("sb-1f3a-7-00ff00ff00ff00ff", "ws://{node}:7878/")
