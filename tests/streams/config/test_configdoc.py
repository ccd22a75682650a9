"""YAML loaded with the position of every key and value (common.config.document)."""

from __future__ import annotations

import pytest

from common.config.document import ConfigError, Document, Mark, Translation, document_load, path_text

TEXT = """\
routes:
  - path: /a
    filters:
      - {key: k, headers: {tag: blue}}
  - path: /b
"""


def test_marks_of_keys_values_and_items() -> None:
    document = document_load(TEXT, "f.yaml")

    assert document.data["routes"][0]["filters"][0]["headers"] == {"tag": "blue"}
    assert document.mark(("routes",)) == Mark(1, 1)
    assert document.mark(("routes", 0)) == Mark(2, 5)
    assert document.mark(("routes", 0, "filters", 0, "headers", "tag")) == Mark(4, 28)
    assert document.mark(("routes", 1, "path")) == Mark(5, 5)
    # A path the file does not hold is placed at its nearest enclosing value.
    assert document.mark(("routes", 1, "topic")) == Mark(5, 5)


def test_problem_names_file_line_column_and_field() -> None:
    document = document_load(TEXT, "f.yaml")
    problem = document.problem(("routes", 0, "filters", 0, "key"), "bad")
    assert str(problem) == "f.yaml:4:10: routes[0].filters[0].key: bad"


def test_duplicate_keys_are_errors() -> None:
    with pytest.raises(ConfigError) as raised:
        document_load("a: 1\nb: 2\na: 3\n", "f.yaml")
    assert str(raised.value) == "f.yaml:3:1: a: given twice (first at line 1)"


def test_syntax_error_position() -> None:
    with pytest.raises(ConfigError) as raised:
        document_load("a: [1, 2\nb: 3\n", "f.yaml")
    (problem,) = raised.value.problems
    assert problem.mark is not None
    assert problem.mark.line == 2
    assert "not valid YAML" in problem.message


def test_only_safe_types() -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        document_load("a: !!python/object/apply:os.system ['true']\n", "f.yaml")


def test_empty_document() -> None:
    assert document_load("", "f.yaml").data is None


def test_path_text() -> None:
    assert path_text(("routes", 0, "cors", "allow_origins")) == "routes[0].cors.allow_origins"
    assert path_text(()) == ""


def test_translation_points_at_the_source() -> None:
    source = document_load("bindings:\n  x:\n    with:\n      topic: t\n", "zilla.yaml")
    translation = Translation(source)
    translation.document.data = {"routes": [{"topic": "t"}]}
    translation.carry(("routes", 0), ("bindings", "x", "with"), {"topic": "t"})
    translation.skip(("bindings", "y"), "why")

    document: Document = translation.document
    assert str(document.problem(("routes", 0, "topic"), "bad")) == "zilla.yaml:4:7: bindings.x.with.topic: bad"
    assert translation.skipped == [("bindings.y", "why")]


def test_a_control_character_is_a_config_error_not_a_crash() -> None:
    # Found by tests/fuzz: the YAML reader refuses it while the loader is being built.
    with pytest.raises(ConfigError) as caught:
        document_load("\x1f", "bad.yaml")
    assert "not valid YAML" in str(caught.value)
