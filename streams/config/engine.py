"""Configuration as code (SPEC 6): plan a file's items, apply them all or nothing, export the rows back.

Every registered section (:mod:`common.config.section`) takes part: an item is
normalized to its flat form, compared with the row read back, and written
through the app's service only when it differs, so applying a file twice
writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError

from common.config.document import ConfigError, ConfigProblem, DocPath, Document
from common.config.section import SECTIONS, SECTIONS_ELSEWHERE, FieldProblem, ModelSection, sections_ordered


@dataclass(frozen=True, slots=True)
class PlanItem:
    section: ModelSection
    key: str
    form: dict[str, Any]
    path: DocPath


def config_plan(document: Document) -> list[PlanItem]:
    """Every item of the file, normalized, in the order to apply; :class:`ConfigError` with every problem."""
    data = document.data
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError([document.problem((), "a configuration file is a mapping of sections")])
    problems: list[ConfigProblem] = []
    plan: list[PlanItem] = []
    for name, items in data.items():
        section = SECTIONS.get(name)
        if section is None:
            message = SECTIONS_ELSEWHERE.get(name) or f"unknown section (known: {', '.join(sorted(SECTIONS))})"
            problems.append(document.problem((str(name),), message))
            continue
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append(document.problem((name,), f"must be a list of {name}"))
            continue
        first: dict[str, DocPath] = {}
        for index, item in enumerate(items):
            path: DocPath = (name, index)
            try:
                form = section.normalize(item, path, document)
            except ConfigError as exc:
                problems += exc.problems
                continue
            key = form[section.key]
            if key in first:
                earlier = document.mark(first[key])
                line = f" (first at line {earlier.line})" if earlier else ""
                problems.append(document.problem((*path, section.key), f"{section.label} {key} is given twice{line}"))
                continue
            first[key] = path
            plan.append(PlanItem(section, key, form, path))
    if problems:
        raise ConfigError(problems)
    return sorted(plan, key=lambda item: item.section.order)


@dataclass
class ConfigReport:
    """What applying a file did (or, with ``check``, would do)."""

    filename: str
    kind: str = "sluice"
    check: bool = False
    actions: list[tuple[str, str, str]] = field(default_factory=list)  # (action, label, key)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (YAML path, reason)

    def count(self, action: str) -> int:
        return sum(1 for done, _, _ in self.actions if done == action)

    @property
    def changed(self) -> bool:
        return any(action != "unchanged" for action, _, _ in self.actions)

    def lines(self) -> list[str]:
        verb = {"created": "would create", "updated": "would update", "deleted": "would delete"}
        out = [
            f"{verb.get(action, action) if self.check else action} {label} {key}" for action, label, key in self.actions
        ]
        out += [f"skipped {where}: {reason}" for where, reason in self.skipped]
        summary = ", ".join(f"{self.count(a)} {a}" for a in ("created", "updated", "unchanged", "deleted"))
        source = "" if self.kind == "sluice" else f" ({self.kind} import)"
        tail = "checked, nothing changed" if self.check else "applied"
        out.append(f"{self.filename}{source}: {summary}; {tail}")
        return out


def config_apply(
    document: Document,
    *,
    prune: bool = False,
    check: bool = False,
    report: ConfigReport | None = None,
    checked: Callable[[ConfigReport], None] | None = None,
) -> ConfigReport:
    """Apply ``document`` all or nothing: every problem is collected, and any problem changes nothing.

    ``check`` runs the very same writes in a transaction that is rolled back, so
    it refuses exactly what a real apply would; ``checked`` is called before the
    rollback, to read the rows as the file would leave them.
    """
    report = report or ConfigReport(document.filename)
    report.check = check
    plan = config_plan(document)
    problems: list[ConfigProblem] = []
    with transaction.atomic():
        for section in sections_ordered():
            current = section.rows()
            for item in (item for item in plan if item.section is section):
                before = current.get(item.key)
                if before == item.form:
                    report.actions.append(("unchanged", section.label, item.key))
                    continue
                try:
                    section.write(item.form)
                except ValidationError as exc:
                    problems += section.problems(exc, item.form, item.path, document)
                except FieldProblem as exc:
                    problems.append(document.problem((*item.path, *exc.key.split(".")), exc.message))
                else:
                    report.actions.append(("created" if before is None else "updated", section.label, item.key))
        if prune:
            named = {(item.section.name, item.key) for item in plan}
            for section in reversed(sections_ordered()):
                for key in section.rows():
                    if (section.name, key) in named:
                        continue
                    try:
                        with transaction.atomic():
                            section.delete(key)
                    except ProtectedError as exc:
                        users = ", ".join(sorted(str(row) for row in exc.protected_objects))
                        problems.append(
                            ConfigProblem(
                                document.filename,
                                f"cannot delete {section.label} {key}: still used by {users}",
                                where=section.name,
                            )
                        )
                    else:
                        report.actions.append(("deleted", section.label, key))
        if problems:
            raise ConfigError(problems)
        if check:
            if checked is not None:
                checked(report)
            transaction.set_rollback(True)
    return report


def config_export() -> dict[str, list[dict[str, Any]]]:
    """Every configured row, as a file :func:`config_apply` takes back unchanged."""
    out: dict[str, list[dict[str, Any]]] = {}
    for section in sections_ordered():
        items = [section.export(form) for form in section.rows().values()]
        if items:
            out[section.name] = items
    return out


def config_dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)
