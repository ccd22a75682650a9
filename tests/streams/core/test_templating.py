"""Templates for topics and filters (SPEC 2.1): params, identity and attributes."""

from __future__ import annotations

import pytest

from streams.core.templating import ExpansionContext, TemplateError, template_compile


def context(**params: str) -> ExpansionContext:
    return ExpansionContext(params=params)


def test_literal() -> None:
    template = template_compile("scores")
    assert template.is_literal
    assert template.params == frozenset()
    assert template.expand(context()) == "scores"


def test_empty() -> None:
    template = template_compile("")
    assert template.is_literal
    assert template.expand(context()) == ""


def test_params() -> None:
    template = template_compile("${params.topic}")
    assert not template.is_literal
    assert template.params == frozenset({"topic"})
    assert template.expand(context(topic="scores")) == "scores"


def test_mixed_literal_and_references() -> None:
    template = template_compile("league-${params.league}.${params.season}-live")
    assert template.params == frozenset({"league", "season"})
    assert template.expand(context(league="nba", season="2024")) == "league-nba.2024-live"


def test_whitespace_inside_the_braces_is_allowed() -> None:
    assert template_compile("${ params.topic }").expand(context(topic="t")) == "t"


def test_identity_and_attributes() -> None:
    template = template_compile("${identity}:${attributes.team}")
    assert template.params == frozenset()
    ctx = ExpansionContext(params={}, identity="alice", attributes={"team": "blue"})
    assert template.expand(ctx) == "alice:blue"


def test_values_are_not_expanded_again() -> None:
    assert template_compile("${params.a}").expand(context(a="${params.b}", b="x")) == "${params.b}"


def test_dollar_without_brace_is_literal() -> None:
    assert template_compile("$5 {x} $").expand(context()) == "$5 {x} $"


@pytest.mark.parametrize(
    "source",
    [
        "${}",
        "${params}",
        "${params.}",
        "${params.1x}",
        "${param.topic}",
        "${identity.x}",
        "${attributes}",
        "${env.HOME}",
        "${params.a-b}",
        "${params.a.b}",
    ],
)
def test_unknown_expressions_are_rejected(source: str) -> None:
    with pytest.raises(TemplateError, match="is not one of"):
        template_compile(source)


@pytest.mark.parametrize("source", ["${params.topic", "x-${", "${params.a}-${params.b"])
def test_unterminated_expression_is_rejected(source: str) -> None:
    with pytest.raises(TemplateError, match="unterminated"):
        template_compile(source)


def test_missing_param_at_expansion() -> None:
    with pytest.raises(TemplateError, match=r"\$\{params.topic\} has no value"):
        template_compile("${params.topic}").expand(context(other="x"))


def test_missing_identity_at_expansion() -> None:
    with pytest.raises(TemplateError, match=r"\$\{identity\} has no value"):
        template_compile("${identity}").expand(context())


def test_missing_attribute_at_expansion() -> None:
    template = template_compile("${attributes.team}")
    with pytest.raises(TemplateError, match=r"\$\{attributes.team\} has no value"):
        template.expand(context())
    with pytest.raises(TemplateError, match=r"\$\{attributes.team\} has no value"):
        template.expand(ExpansionContext(params={}, attributes={"other": "x"}))
