"""A hostile config file gets one located line, quickly, and never a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pgq_exporter.config import load_config, parse_config
from pgq_exporter.config.yamlpos import ConfigError
from tests.support import assert_clean_failure, run_cli

DB = "databases:\n  - name: main\n    dsn: postgresql:///app\n"
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (DB + LAUGHS, 4, "aliases expand too far"),
        (DB + "x: &loop [*loop]\n", 4, "an alias refers to itself"),
        (DB + "window: !!python/name:os.system\n", 4, "the tag"),
        (DB + "window: !local 5m\n", 4, "the tag !local is not allowed"),
        (DB + "exact_count_limit: !!int ten\n", 4, "not a valid value"),
        (DB + "exact_count_limit: " + "9" * 5000 + "\n", 4, "not a valid value"),
        (DB + "window: 5m\n\x00\n", 5, "a NUL character"),
    ],
)
def test_refused_with_its_line(text: str, line: int, words: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError) as raised:
        parse_config(text, "c.yaml", {})
    assert f"c.yaml:{line}:" in str(raised.value) and words in str(raised.value)
    assert time.monotonic() - started < 5  # no expansion ran away


def test_merge_keys_are_honoured() -> None:
    text = (
        "base: &base {interval: 30s, timeout: 2s}\n"
        "databases:\n  - name: main\n    dsn: postgresql:///app\n"
        "collectors:\n  activity:\n    <<: *base\n    timeout: 3s\n"
    )
    with pytest.raises(ConfigError, match="base: unknown key"):
        parse_config(text, "c.yaml", {})  # the anchor's own key is still checked
    merged = parse_config(text.split("\n", 1)[1].replace("*base", "{interval: 30s, timeout: 2s}"),
                          "c.yaml", {})  # fmt: skip
    assert merged.collector("activity").interval == 30
    assert merged.collector("activity").timeout == 3  # the mapping's own key wins


def test_big_and_non_utf8_files_are_refused_by_the_cli(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(DB + "# " + "x" * (2 << 20) + "\n")
    assert_clean_failure(run_cli("check-config", str(big)), "big.yaml:1:", "larger than")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(DB.encode() + b"window: 5m # caf\xe9\n")
    assert_clean_failure(run_cli("check-config", str(latin)), "latin.yaml:4:", "not UTF-8")
    with pytest.raises(ConfigError):
        load_config(latin)
