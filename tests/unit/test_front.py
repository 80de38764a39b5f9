"""The serving process's view of the collecting process, against a peer played by the
test over a real socket pair: what it answers itself, what it passes on, and what it
says when the peer does not answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http import HTTPStatus

import pytest

from pgq_exporter import front
from pgq_exporter.channel import Channel
from pgq_exporter.front import RemoteService
from pgq_exporter.service import Reply, ServiceUnavailableError
from tests.support import wait_for

GZIPPED_OPENMETRICS = (True, True)
TEXT = (False, False)


@pytest.fixture
def pair() -> Iterator[tuple[RemoteService, Channel]]:
    ours, theirs = socket.socketpair()
    service, peer = RemoteService(Channel(ours)), Channel(theirs)
    service.start()
    try:
        yield service, peer
    finally:
        service.stop()
        peer.close()


def _published(service: RemoteService, params: dict[str, list[str]]) -> bool:
    """Whether a probe of ``params`` is answered without the peer (no call is sent)."""
    try:
        return service.probe(params, "0.2", TEXT).status == HTTPStatus.OK
    except ServiceUnavailableError:
        return False


def _next(peer: Channel, kind: str) -> tuple[object, ...] | None:
    """The next message of ``kind`` the peer receives (the calls _published made first)."""
    while (message := peer.receive()) is not None and message[0] != kind:
        pass
    return message


def test_a_published_target_is_answered_here_and_its_probes_passed_on(
    pair: tuple[RemoteService, Channel],
) -> None:
    service, peer = pair
    peer.send("target", ("", "a"), {TEXT: b"pgq_up 1\n"}, None)
    wait_for(lambda: _published(service, {"target": ["a"]}), "the published target", until=bool)
    reply = service.probe({"target": ["a"]}, None, TEXT)
    assert reply == Reply(HTTPStatus.OK, b"pgq_up 1\n")
    assert _next(peer, "touch") == ("touch", {("", "a")})  # for its idle clock
    peer.send("gone", ("", "a"))
    wait_for(lambda: _published(service, {"target": ["a"]}), "the target gone",
             until=lambda answered: not answered)  # fmt: skip


def test_a_module_target_is_answered_by_its_normalised_address(
    pair: tuple[RemoteService, Channel],
) -> None:
    service, peer = pair
    peer.send("target", ("mod", "db.example:5432/app"), {TEXT: b"x"}, "connection refused")
    params = {"target": ["DB.Example.:05432/app"], "auth_module": ["mod"]}
    wait_for(lambda: _published(service, params), "the module target", until=bool)
    assert service.probe(params, None, TEXT).reason == "connection refused"


def test_what_is_not_published_is_passed_on_and_answered(
    pair: tuple[RemoteService, Channel],
) -> None:
    service, peer = pair
    peer.send("target", ("", "a"), {TEXT: b"text"}, None)
    asked: list[tuple[object, ...]] = []

    def answer() -> None:
        message = peer.receive()
        assert message is not None
        asked.append(message)
        peer.send("reply", message[1], "ok", Reply(HTTPStatus.OK, b"gzipped"))

    threading.Thread(target=answer).start()
    # Another form than the one published, or a debug probe: the peer answers.
    reply = service.probe({"target": ["a"], "debug": ["true"]}, None, GZIPPED_OPENMETRICS)
    assert reply.body == b"gzipped"
    [(kind, _, method, args)] = asked
    assert (kind, method) == ("call", "probe")
    assert args == ({"target": ["a"], "debug": ["true"]}, None, GZIPPED_OPENMETRICS)


def test_a_peer_that_does_not_answer_is_said_so_within_the_scrape_deadline(
    pair: tuple[RemoteService, Channel],
) -> None:
    service, _ = pair
    with pytest.raises(ServiceUnavailableError, match=r"did not answer within 0\.3s"):
        service.probe({"target": ["new"]}, "0.3", TEXT)


def test_a_peer_that_has_gone_fails_the_calls_waiting_and_the_next(
    pair: tuple[RemoteService, Channel], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, peer = pair
    monkeypatch.setattr(front, "CALL_TIMEOUT", 30.0)
    failed: list[BaseException] = []

    def landing() -> None:
        try:
            service.landing()
        except ServiceUnavailableError as exc:
            failed.append(exc)

    waiting = threading.Thread(target=landing)
    waiting.start()
    assert peer.receive() is not None  # the call reached the peer, which then goes
    peer.close()
    waiting.join(10)
    assert [str(exc) for exc in failed] == ["the collecting process has ended"]
    with pytest.raises(ServiceUnavailableError, match="has ended"):
        service.targets()
