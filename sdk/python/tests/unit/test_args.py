import pytest

from hutch import InvalidArgumentError
from hutch._args import env_dict, env_list, parse_mib, timeout_ms, to_argv


@pytest.mark.parametrize("value,mib", [(512, 512), ("512", 512), ("512M", 512), ("512m", 512),
                                       ("512MiB", 512), ("2G", 2048), ("2gb", 2048),
                                       ("1GiB", 1024), ("1T", 1024 * 1024), (" 8G ", 8192),
                                       (0, 0)])
def test_sizes(value, mib):
    assert parse_mib(value) == mib


@pytest.mark.parametrize("value", ["", "G", "1.5G", "2K", "-1", "12X", True, 1.5, None, -5])
def test_bad_sizes(value):
    with pytest.raises(InvalidArgumentError):
        parse_mib(value, "memory")


def test_argv_list_is_taken_as_is():
    assert to_argv(["ls", "-l", "a b"]) == ["ls", "-l", "a b"]
    assert to_argv(("echo", "$HOME")) == ["echo", "$HOME"]


def test_string_runs_in_sh():
    assert to_argv("echo $HOME | wc -c") == ["/bin/sh", "-c", "echo $HOME | wc -c"]


@pytest.mark.parametrize("cmd", ["", [], [1, 2], ["a\0b"], b"ls"])
def test_bad_commands(cmd):
    with pytest.raises(InvalidArgumentError):
        to_argv(cmd)


def test_env_forms():
    assert env_list({"A": "1", "B": "x=y"}) == ["A=1", "B=x=y"]
    assert env_list(["A=1", "B="]) == ["A=1", "B="]
    assert env_list(None) == []
    assert env_dict(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    assert env_dict({"K": "V"}) == {"K": "V"}


@pytest.mark.parametrize("env", [{"": "x"}, {"A=B": "x"}, ["NOEQUALS"], ["=x"], {"A": 1},
                                 "A=1", {"A": "x\0y"}])
def test_bad_env(env):
    with pytest.raises(InvalidArgumentError):
        env_list(env)


def test_timeout():
    assert timeout_ms(None) == 0
    assert timeout_ms(1.5) == 1500
    assert timeout_ms(0.0001) == 1
    for bad in (0, -1, "3", True):
        with pytest.raises(InvalidArgumentError):
            timeout_ms(bad)
