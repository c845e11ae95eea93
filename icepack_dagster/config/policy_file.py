"""The policy file: YAML rules that set maintenance policy for groups of tables (docs/POLICY.md).

I/O only: read and validate the file once, at start-up, into domain `PolicyRule`s. A bad file fails
then, naming the rule (numbered from 1, as in `--explain` sources) and the field, instead of surfacing
later as a half-applied policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from icepack_dagster.domain.policy.layering import PolicyRule
from icepack_dagster.exceptions import ConfigurationError


def _rule(path: Path, number: int, data: Any) -> PolicyRule:
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"policy file {path}: rule {number} must be a mapping with 'match' and policy values, "
            f"not {type(data).__name__}"
        )
    try:
        return PolicyRule.model_validate(data)
    except ValidationError as error:
        problems = []
        for problem in error.errors(include_url=False, include_input=False):
            field = ".".join(str(part) for part in problem["loc"]) or "(rule)"
            message = str(problem["msg"]).removeprefix("Value error, ")
            problems.append(f"field {field}: {message}")
        match = data.get("match")
        label = f"rule {number} (match {match!r})" if match else f"rule {number}"
        raise ConfigurationError(f"policy file {path}: {label}: " + "; ".join(problems)) from None


def load_policy_rules(path: Path | None) -> tuple[PolicyRule, ...]:
    """Rules in file order (later matching rules override earlier ones); none without a file.

    Raises ConfigurationError when the file cannot be read, is not YAML, or a rule is invalid.
    """
    if path is None:
        return ()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"policy file {path}: cannot read it ({error})") from error
    except yaml.YAMLError as error:
        raise ConfigurationError(f"policy file {path}: not valid YAML ({error})") from error
    if data is None:
        return ()
    if not isinstance(data, dict) or set(data) - {"rules"}:
        raise ConfigurationError(f"policy file {path}: the top level must be a mapping with one key, 'rules'")
    rules = data.get("rules") or []
    if not isinstance(rules, list):
        raise ConfigurationError(f"policy file {path}: 'rules' must be a list of rules")
    return tuple(_rule(path, number, rule) for number, rule in enumerate(rules, start=1))
