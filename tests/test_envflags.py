"""decoding.envflags.flag agrees with ``os.environ.get(name, "") == "1"`` after every way a
test or a user changes the environment."""

from __future__ import annotations

import os

import pytest

from decoding.envflags import flag

NAME = "GD_TEST_ENVFLAG"


@pytest.mark.parametrize("value, expected", [("1", True), ("0", False), ("", False), ("11", False),
                                             (" 1", False), ("true", False)])
def test_flag_follows_monkeypatch(monkeypatch, value, expected):
    monkeypatch.setenv(NAME, value)
    assert flag(NAME) is expected
    assert flag(NAME) == (os.environ.get(NAME, "") == "1")
    monkeypatch.delenv(NAME)
    assert flag(NAME) is False


def test_flag_follows_os_environ_writes():
    try:
        assert flag(NAME) is False
        os.environ[NAME] = "1"
        assert flag(NAME) is True
        os.environ[NAME] = "0"
        assert flag(NAME) is False
        os.environ.update({NAME: "1"})
        assert flag(NAME) is True
        os.environ.pop(NAME)
        assert flag(NAME) is False
    finally:
        os.environ.pop(NAME, None)
