"""Label selectors and node selectors, matching as apimachinery's `labels` package and
component-helpers' `nodeaffinity` do in Kubernetes 1.20.

Selectors are parsed once (per pod, per controller) into frozen requirement lists, so matching a
node or a pod is a handful of dict look-ups. Parsing validates like `labels.NewRequirement` and
raises `SelectorError` with the reason apimachinery gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

# Operators, named as in pkg/selection (the API spells them In, NotIn, Exists, DoesNotExist, Gt, Lt).
IN: Final = "In"
NOT_IN: Final = "NotIn"
EXISTS: Final = "Exists"
DOES_NOT_EXIST: Final = "DoesNotExist"
GT: Final = "Gt"
LT: Final = "Lt"
EQUALS: Final = "="  # only produced from plain maps (nodeSelector, Service and RC selectors)

LABEL_SELECTOR_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
NODE_SELECTOR_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT})
NODE_FIELD_OPERATORS: Final = frozenset({IN, NOT_IN})
_NODE_REQUIREMENT: Final = "a node selector requirement"
# kubectl's label selector syntax, one clause: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`.
_SET_CLAUSE: Final = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQ_CLAUSE: Final = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_KEY_CLAUSE: Final = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")

_QNAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# validation.IsDNS1123Label's pattern (at most 63 characters besides).
DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# validation.IsDNS1123Subdomain's pattern (at most 253 characters besides).
DNS1123_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# strconv.ParseInt(s, 10, 64): optional sign, decimal digits only.
_INT64 = re.compile(r"^[+-]?[0-9]+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def is_dns1123_label(value: str) -> bool:
    """validation.IsDNS1123Label: what names a namespace."""
    return len(value) <= 63 and DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """validation.IsDNS1123Subdomain: what names most objects, and prefixes label keys."""
    return len(value) <= 253 and DNS1123_SUBDOMAIN.fullmatch(value) is not None


class SelectorError(ValueError):
    """A selector the API machinery would refuse to build."""


def _label_key_error(key: str) -> str | None:
    """validation.IsQualifiedName, reduced to its first complaint."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"invalid label key {key!r}: a qualified name must have at most one '/'"
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return f"invalid label key {key!r}: prefix part must be non-empty"
        if not is_dns1123_subdomain(prefix):
            return f"invalid label key {key!r}: prefix part must be a lowercase RFC 1123 subdomain"
    else:
        name = parts[0]
    if not name:
        return f"invalid label key {key!r}: name part must be non-empty"
    if len(name) > 63:
        return f"invalid label key {key!r}: name part must be no more than 63 characters"
    if not _QNAME.match(name):
        return (
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def qualified_name_error(name: str) -> str | None:
    """validation.IsQualifiedName's first complaint about `name`, or None when it is valid."""
    return _label_key_error(name)


def _label_value_error(key: str, value: str) -> str | None:
    """validation.IsValidLabelValue."""
    if len(value) > 63:
        return f"invalid label value: {value!r}: at key: {key!r}: must be no more than 63 characters"
    if value and not _QNAME.match(value):
        return (
            f"invalid label value: {value!r}: at key: {key!r}: a valid label must be an empty string or "
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character"
        )
    return None


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go returns an error."""
    if not _INT64.match(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` clause; `number` holds the parsed operand of Gt and Lt."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()
    number: int = 0

    @classmethod
    def build(cls, key: Any, operator: Any, values: Any) -> Requirement:
        """labels.NewRequirement: validates the key, the operator's arity and every value."""
        if not isinstance(key, str):
            raise SelectorError(f"label key must be a string, got {key!r}")
        if values is None:
            values = []
        if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"values of {key!r} must be a list of strings, got {values!r}")
        error = _label_key_error(key)
        if error:
            raise SelectorError(error)
        number = 0
        if operator in (IN, NOT_IN):
            if not values:
                raise SelectorError(f"key {key!r}: for 'in', 'notin' operators, values set can't be empty")
        elif operator == EQUALS:
            if len(values) != 1:
                raise SelectorError(f"key {key!r}: exact-match compatibility requires one single value")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if values:
                raise SelectorError(f"key {key!r}: values set must be empty for exists and does not exist")
        elif operator in (GT, LT):
            if len(values) != 1:
                raise SelectorError(f"key {key!r}: for 'Gt', 'Lt' operators, exactly one value is required")
            parsed = parse_int64(values[0])
            if parsed is None:
                raise SelectorError(f"key {key!r}: for 'Gt', 'Lt' operators, the value must be an integer")
            number = parsed
        else:
            raise SelectorError(f"operator {operator!r} is not recognized")
        for value in values:
            error = _label_value_error(key, value)
            if error:
                raise SelectorError(error)
        return cls(key, operator, frozenset(values), number)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Requirement.Matches."""
        op = self.operator
        value = labels.get(self.key)
        if op in (IN, EQUALS):
            return value is not None and value in self.values
        if op == NOT_IN:
            return value is None or value not in self.values
        if op == EXISTS:
            return value is not None
        if op == DOES_NOT_EXIST:
            return value is None
        if value is None:
            return False
        # Gt and Lt compare integers; a label that is not one never matches.
        number = parse_int64(value)
        if number is None:
            return False
        return number > self.number if op == GT else number < self.number


def _checked(
    expressions: list[Any], item: str, operators: frozenset[str], kind: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(operator, expression) of each match expression, checked only as the caller reaches it, so
    the first bad expression is the one reported."""
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError(f"{item} must be an object, got {expr!r}")
        operator = expr.get("operator")
        if operator not in operators:
            raise SelectorError(f"{operator!r} is not a valid {kind} operator")
        yield operator, expr


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A conjunction of requirements; `nothing` is labels.Nothing() (a nil selector matches no object)."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @classmethod
    def parse(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """metav1.LabelSelectorAsSelector: None matches nothing, `{}` matches everything."""
        if selector is None:
            return NOTHING
        if not isinstance(selector, Mapping):
            raise SelectorError(f"a label selector must be an object, got {selector!r}")
        match_labels = selector.get("matchLabels") or {}
        expressions = selector.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise SelectorError(f"matchLabels must be an object, got {match_labels!r}")
        if not isinstance(expressions, list):
            raise SelectorError(f"matchExpressions must be a list, got {expressions!r}")
        requirements = [Requirement.build(k, EQUALS, [v]) for k, v in match_labels.items()]
        checked = _checked(expressions, "a match expression", LABEL_SELECTOR_OPERATORS, "pod selector")
        for operator, expr in checked:
            requirements.append(Requirement.build(expr.get("key"), operator, expr.get("values")))
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @classmethod
    def from_string(cls, text: str) -> LabelSelector:
        """labels.Parse: kubectl's syntax (`app=web,tier!=db,env in (a,b),!legacy`); "" matches everything."""
        if not text.strip():
            return EVERYTHING
        return cls().add([_string_requirement(clause) for clause in _split_clauses(text)])

    @classmethod
    def from_map(cls, labels: Mapping[str, str] | None) -> LabelSelector:
        """labels.SelectorFromSet: equality on every key, not validated; an empty map matches everything."""
        if not labels:
            return EVERYTHING
        return cls(tuple(Requirement(k, EQUALS, frozenset((str(v),))) for k, v in sorted(labels.items())))

    @property
    def empty(self) -> bool:
        """Selector.Empty(): true for Everything, false for Nothing."""
        return not self.nothing and not self.requirements

    def add(self, requirements: Sequence[Requirement]) -> LabelSelector:
        return LabelSelector(
            tuple(sorted((*self.requirements, *requirements), key=lambda r: r.key)), self.nothing
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        # A plain loop, not all(<generator>): spreading matches every pod of every node.
        for requirement in self.requirements:  # noqa: SIM110
            if not requirement.matches(labels):
                return False
        return True


def _split_clauses(text: str) -> list[str]:
    """The clauses between the commas outside parentheses."""
    clauses: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            clauses.append("".join(current))
            current = []
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current.append(char)
    clauses.append("".join(current))
    return clauses


def _string_requirement(clause: str) -> Requirement:
    if match := _SET_CLAUSE.match(clause):
        key, op, values = match.groups()
        listed = [v.strip() for v in values.split(",") if v.strip()]
        return Requirement.build(key, IN if op == "in" else NOT_IN, listed)
    if match := _EQ_CLAUSE.match(clause):
        key, op, value = match.groups()
        return Requirement.build(key, NOT_IN if op == "!=" else EQUALS, [value])
    if match := _KEY_CLAUSE.match(clause):
        negated, key = match.groups()
        return Requirement.build(key, DOES_NOT_EXIST if negated else EXISTS, [])
    raise SelectorError(f"cannot parse {clause.strip()!r}")


EVERYTHING: Final = LabelSelector()
NOTHING: Final = LabelSelector(nothing=True)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """`metadata.name In [x]` / `NotIn [x]`: the only node fields 1.20 matches on."""

    key: str
    value: str
    equal: bool

    def matches(self, fields: Mapping[str, str]) -> bool:
        # fields.Set.Get returns "" for an absent field.
        return (fields.get(self.key, "") == self.value) is self.equal


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term: expressions on labels AND expressions on fields. `error` set: never matches."""

    labels: LabelSelector | None = None
    fields: tuple[FieldRequirement, ...] | None = None
    error: str | None = None

    @classmethod
    def parse(cls, term: Mapping[str, Any]) -> NodeSelectorTerm:
        """newNodeSelectorTerm, keeping the parse error in the term instead of raising."""
        try:
            return cls(
                _parse_node_labels(term.get("matchExpressions")), _parse_node_fields(term.get("matchFields"))
            )
        except SelectorError as exc:
            return cls(error=str(exc))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.error is not None:
            return False
        if self.labels is not None and not self.labels.matches(labels):
            return False
        # A node without a name has no field set; 1.20 then ignores matchFields.
        if self.fields is not None and node_name:
            fields = {"metadata.name": node_name}
            return all(f.matches(fields) for f in self.fields)
        return True


def _parse_node_labels(expressions: Any) -> LabelSelector | None:
    if not expressions:
        return None
    if not isinstance(expressions, list):
        raise SelectorError(f"matchExpressions must be a list, got {expressions!r}")
    checked = _checked(expressions, _NODE_REQUIREMENT, NODE_SELECTOR_OPERATORS, "node selector")
    requirements = [Requirement.build(expr.get("key"), op, expr.get("values")) for op, expr in checked]
    return LabelSelector(tuple(requirements))


def _parse_node_fields(expressions: Any) -> tuple[FieldRequirement, ...] | None:
    if not expressions:
        return None
    if not isinstance(expressions, list):
        raise SelectorError(f"matchFields must be a list, got {expressions!r}")
    fields = []
    checked = _checked(expressions, _NODE_REQUIREMENT, NODE_FIELD_OPERATORS, "node field selector")
    for operator, expr in checked:
        values = expr.get("values") or []
        if not isinstance(values, list) or len(values) != 1:
            count = len(values) if isinstance(values, list) else values
            raise SelectorError(
                f"unexpected number of value ({count}) for node field selector operator {operator!r}"
            )
        fields.append(FieldRequirement(str(expr.get("key") or ""), str(values[0]), operator == IN))
    return tuple(fields)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Terms ORed (v1.NodeSelector); no usable term matches no node."""

    terms: tuple[NodeSelectorTerm, ...]

    @classmethod
    def parse(cls, selector: Mapping[str, Any], *, strict: bool = False) -> NodeSelector:
        """NewLazyErrorNodeSelector; with `strict`, NewNodeSelector, which raises on the first bad term.

        Terms with neither matchExpressions nor matchFields are dropped, as 1.20 does.
        """
        if not isinstance(selector, Mapping):
            raise SelectorError(f"a node selector must be an object, got {selector!r}")
        raw_terms = selector.get("nodeSelectorTerms") or []
        if not isinstance(raw_terms, list):
            raise SelectorError(f"nodeSelectorTerms must be a list, got {raw_terms!r}")
        terms = []
        for raw in raw_terms:
            if not isinstance(raw, Mapping):
                raise SelectorError(f"a node selector term must be an object, got {raw!r}")
            if not raw.get("matchExpressions") and not raw.get("matchFields"):
                continue
            term = NodeSelectorTerm.parse(raw)
            if strict and term.error is not None:
                raise SelectorError(term.error)
            terms.append(term)
        return cls(tuple(terms))

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(t.error for t in self.terms if t.error is not None)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(term.matches(labels, node_name) for term in self.terms)
