"""benchmarks.lib.tables.markdown_table: the one layout of every results page's tables."""

import pytest

from benchmarks.lib.tables import markdown_table


def test_a_table_has_a_header_a_rule_with_each_columns_alignment_and_a_line_a_row():
    assert markdown_table(["task", "e", "steps"], [["resnet", 2, "1,250"], ["resnet", "", "-"]], align="lr") == (
        "| task | e | steps |\n|---|---:|---|\n| resnet | 2 | 1,250 |\n| resnet | | - |")


@pytest.mark.parametrize("rows, align, message", [
    ([["a"]], "", r"rows: expected 2 cells a row, got 1: \['a'\]"),
    ([["a", "b"]], "lc", r"align: expected up to 2 letters l or r, got 'lc'"),
    ([["a", "b"]], "lrr", r"align: expected up to 2 letters l or r, got 'lrr'"),
])
def test_a_row_or_alignment_that_does_not_fit_the_header_is_refused_by_name(rows, align, message):
    with pytest.raises(ValueError, match=message):
        markdown_table(["x", "y"], rows, align=align)
