"""http.client's private status-line reader, the one the operator counts interim answers
through (interim_answers.py): this Python has it as checked, and a Python without it, or
whose http.client reads an answer without it, is refused by name instead of reading
without the cap."""

from __future__ import annotations

import http.client
import importlib
import socket
import sys

import pytest

from ddpjob.operator import interim_answers
from ddpjob.operator.interim_answers import InterimCounted, PrivateAPIChanged


def answer(raw: bytes, max_interim: int = 2) -> InterimCounted:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(raw)
        theirs.shutdown(socket.SHUT_WR)
        response = type("Counted", (InterimCounted,), {"max_interim": max_interim})(ours)
        response.begin()
        return response


def test_this_python_reads_every_status_line_through_the_hook():
    assert interim_answers.problem() is None, sys.version
    response = answer(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert (response.status, response.interim, response.status_lines) == (200, 1, 2)


def test_interim_answers_past_the_cap_end_the_read():
    with pytest.raises(ValueError, match=r"more than 1 interim \(1xx\) answers"):
        answer(b"HTTP/1.1 100 Continue\r\n\r\n" * 3 + b"HTTP/1.1 200 OK\r\n\r\n", max_interim=1)


def test_a_python_without_the_hook_is_refused_at_import(monkeypatch):
    monkeypatch.delattr(http.client.HTTPResponse, "_read_status")
    assert "http.client.HTTPResponse._read_status(self) is gone" in (interim_answers.problem() or "")
    monkeypatch.delitem(sys.modules, "ddpjob.operator.interim_answers")
    with pytest.raises(RuntimeError, match=r"_read_status\(self\) is gone") as refused:
        importlib.import_module("ddpjob.operator.interim_answers")
    assert type(refused.value).__name__ == "PrivateAPIChanged"  # the class of the module that refused


def test_an_answer_read_without_the_hook_fails_the_read(monkeypatch):
    """An http.client whose `begin()` reads status lines some other way: the interim
    answers would go uncounted, so the read fails naming the hook."""

    def begin_elsewhere(self: http.client.HTTPResponse) -> None:
        self.status = 200

    monkeypatch.setattr(http.client.HTTPResponse, "begin", begin_elsewhere)
    with pytest.raises(PrivateAPIChanged, match=r"without http\.client\.HTTPResponse\._read_status"):
        answer(b"HTTP/1.1 200 OK\r\n\r\n")
