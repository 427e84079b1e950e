"""The report's tables: headers in words with units, the index as columns, numbers rounded and marked for the right."""

import re

import pandas as pd
import pytest

from mcpbench.analysis.page import Html, label, number, table
from mcpbench.analysis.tables import latency_table


@pytest.mark.parametrize(("column", "words"), [
    ("handshake_ms", "handshake (ms)"), ("client_version", "client version"), ("answer_bytes", "answer (bytes)"),
    ("failed_calls:session-not-found", "failed calls: session-not-found"), ("recover_p50_ms", "recovery p50 (ms)"),
    ("tool_errors", "tool errors"), ("first_instance_share", "first instance's share (%)"), ("p99", "p99 (ms)"),
])
def test_a_column_name_becomes_words_with_its_unit(column, words):
    assert label(column) == words


@pytest.mark.parametrize(("value", "text"), [
    (3, "3"), (12_345, "12\u202f345"), (1345.0, "1345"), (0.3512, "0.35"), (4.267, "4.27"), (12.34, "12.3"),
    (148.6, "149"), (0.0042, "0.004"), (True, "yes"),
])
def test_numbers_are_rounded_for_reading(value, text):
    assert number(value) == text


def test_a_grouped_table_has_one_header_row_its_groups_as_columns_and_numbers_on_the_right():
    calls = pd.DataFrame({"type": ["sse", "sse", "stdio"], "step": ["tools/list", "tools/list", "initialize"],
                          "latency_ms": [1.23456, 2.5, 5579.5965]})
    out = table(latency_table(calls, by=["type", "step"]), labels={"count": "calls"})
    assert out.count("<tr>") == 3 and out.count("<thead>") == 1  # a header row and two groups: no empty index row
    headers = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", out)
    assert headers == ["type", "step", "calls", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)"]
    assert "<td class=num>5580</td>" in out and "<td class=num>1.87</td>" in out
    assert out.startswith("<div class=scroll>")


def test_a_header_with_hyphens_does_not_break_at_them_and_links_stay_links():
    frame = pd.DataFrame({"tool-error": [1, None], "session": [Html("<a href='#x'>abc</a>"), "d<e"]})
    out = table(frame)
    assert "tool\u2011error" in out and "<a href='#x'>abc</a>" in out and "d&lt;e" in out and "<td class=num>–</td>" in out
    assert table(pd.DataFrame(), empty="nothing here") == "<p class=none>nothing here</p>"
