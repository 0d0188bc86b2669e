"""The quota, declared once: the resources a team is given, how each is typed, stored,
read and handed to KAI, and the value that holds one team's amounts.

Everything that lists quota fields iterates ``RESOURCES``: the forms and their previews,
the API's bodies, the review card, the messages, the cluster's queue. One rule checks a
quota against the pool (``Quota.problems``), in one wording, wherever it is asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.core.errors import InvalidInput
from app.core.quantities import QUANTITY_MAX, format_hundredths, parse_hundredths

PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 1, 1000, 100
WEIGHT_DEFAULT = 100  # hundredths: an over-quota weight of 1
WEIGHT_FIELD, PRIORITY_FIELD = "over_quota_weight", "priority"
_WHOLE = re.compile(r"[0-9]{1,9}", re.ASCII)


@dataclass(frozen=True)
class Resource:
    """One kind of resource a team's queue is given.

    Amounts are stored as integers: ``scale`` storage units make a hundredth of what people
    type (GPU: 1, hundredths of a GPU; CPU: 10, millicores; memory: 10, megabytes), and a
    storage unit is ``kai_scale`` of KAI's unit (GPU: 0.01, KAI counts whole GPUs; CPU and
    memory: 1, KAI counts millicores and megabytes)."""

    key: str  # KAI's name in a Queue's spec.resources
    name: str  # "GPU": the labels say "GPU guarantee", "GPU limit"
    unit: str  # what people type and read after a figure: "GPU", "cores", "GB"
    scale: int
    kai_scale: float
    required: bool  # the guarantee must be typed (otherwise: none, KAI's 0)
    limited: bool  # a limit is asked (otherwise KAI's limit is unlimited)
    pool_field: str  # the pool form's and API's field of the pool's amount: "gpus"
    pool_label: str  # what the pool's amount is called: "GPUs", "CPU cores"
    # Each team's share of it is shown (a gauge per pool), from its own division. KAI
    # divides every resource; the portal shows the ones teams share and wait for (GPUs).
    divided: bool = False

    @property
    def guarantee_field(self) -> str:
        """The form's and the API's field: ``gpu_quota`` (KAI calls a guarantee quota)."""
        return f"{self.key}_quota"

    @property
    def limit_field(self) -> str:
        return f"{self.key}_limit"

    @property
    def guarantee_label(self) -> str:
        return f"{self.name} guarantee"

    @property
    def limit_label(self) -> str:
        return f"{self.name} limit"

    @property
    def in_sentence(self) -> str:
        """The name within a sentence: "GPU", "CPU", "memory"."""
        return self.name if self.name.isupper() else self.name.lower()

    def text(self, stored: int | None) -> str:
        """An amount as people type it: 33 -> "0.33" (GPU), 4000 -> "4" (CPU)."""
        return "" if stored is None else format_hundredths(stored // self.scale)

    def shown(self, stored: int | None) -> str:
        """An amount as people read it: "0.33 GPU", "4 cores", "none"."""
        return "none" if stored is None else f"{self.text(stored)} {self.unit}"

    def parse(self, raw: object, what: str) -> int:
        """What a person typed, in storage units; ``ValueError`` says what to change."""
        text = raw if isinstance(raw, (str, int, float)) or raw is None else str(raw)
        return parse_hundredths(text, what=what) * self.scale

    def kai(self, stored: int | None) -> float:
        """An amount in KAI's unit (none is 0, as KAI reads an omitted quota), the nearest
        double to the decimal it is (57 hundredths times 0.01 is 0.5700000000000001: the
        Queue would carry that)."""
        return 0.0 if stored is None else round(stored * self.kai_scale, 9)


GPU = Resource(
    key="gpu",
    name="GPU",
    unit="GPU",
    scale=1,
    kai_scale=0.01,
    required=True,
    limited=True,
    pool_field="gpus",
    pool_label="GPUs",
    divided=True,
)
CPU = Resource(
    key="cpu",
    name="CPU",
    unit="cores",
    scale=10,
    kai_scale=1.0,
    required=False,
    limited=False,
    pool_field="cpu_cores",
    pool_label="CPU cores",
)
MEMORY = Resource(
    key="memory",
    name="Memory",
    unit="GB",
    scale=10,
    kai_scale=1.0,
    required=False,
    limited=False,
    pool_field="memory_gb",
    pool_label="memory (GB)",
)
RESOURCES: tuple[Resource, ...] = (GPU, CPU, MEMORY)


def resource(key: str) -> Resource:
    for found in RESOURCES:
        if found.key == key:
            return found
    raise KeyError(key)


def pool_display(capacity: Mapping[str, int]) -> dict[str, str]:
    """A pool's amounts as the pool form writes them: {"gpus": "1", "cpu_cores": "40"}."""
    return {res.pool_field: res.text(capacity.get(res.key, 0)) for res in RESOURCES}


def field_labels() -> dict[str, tuple[str, str]]:
    """Every quota field -> (its label, the unit after a value; "" where the label says
    it), in the forms' order."""
    labels: dict[str, tuple[str, str]] = {}
    for res in RESOURCES:
        unit = "" if res.unit == res.name else res.unit
        labels[res.guarantee_field] = (res.guarantee_label, unit)
        if res.limited:
            labels[res.limit_field] = (res.limit_label, unit)
    labels[WEIGHT_FIELD] = ("Over-quota weight", "")
    labels[PRIORITY_FIELD] = ("Queue priority", "")
    return labels


def fields() -> tuple[str, ...]:
    """The quota's fields as forms and API bodies name them."""
    return tuple(field_labels())


@dataclass(frozen=True)
class Line:
    """One resource's quota, in storage units: the guarantee (None: none asked, an
    optional resource), the limit (None: unlimited) and the over-quota weight."""

    guarantee: int | None
    limit: int | None = None
    weight: int = WEIGHT_DEFAULT

    @property
    def usable(self) -> int | None:
        """The most the line lets a team hold: its limit, else its guarantee."""
        return self.limit if self.limit is not None else self.guarantee


class StoredLine(Protocol):
    """A stored line's values (``models.QuotaLine``)."""

    @property
    def resource(self) -> str: ...
    @property
    def guarantee(self) -> int | None: ...
    @property
    def quota_limit(self) -> int | None: ...
    @property
    def weight(self) -> int: ...


Capacity = Mapping[str, int]  # resource key -> the pool's amount in storage units


@dataclass(frozen=True)
class Quota:
    """A team's quota: a line per resource (in ``RESOURCES``' order) and the queue's
    priority. Frozen: a change is a new value."""

    lines: tuple[Line, ...]
    priority: int = PRIORITY_DEFAULT
    _by_key: dict[str, Line] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if len(self.lines) != len(RESOURCES):
            raise ValueError(f"a quota has one line per resource ({len(RESOURCES)})")
        by_key = {res.key: line for res, line in zip(RESOURCES, self.lines, strict=True)}
        object.__setattr__(self, "_by_key", by_key)

    @classmethod
    def of_gpu(
        cls,
        guarantee: int,
        limit: int,
        *,
        weight: int = WEIGHT_DEFAULT,
        priority: int = PRIORITY_DEFAULT,
    ) -> Quota:
        """A GPU guarantee and limit, nothing asked of the other resources."""
        return cls(
            tuple(
                Line(guarantee, limit, weight) if res is GPU else Line(None, None, weight)
                for res in RESOURCES
            ),
            priority,
        )

    def __getitem__(self, key: str) -> Line:
        return self._by_key[key]

    def __iter__(self) -> Iterator[tuple[Resource, Line]]:
        return iter(zip(RESOURCES, self.lines, strict=True))

    @property
    def weight(self) -> int:
        """The over-quota weight (one for every resource, as the forms ask it)."""
        return self._by_key[GPU.key].weight

    @property
    def gpu(self) -> Line:
        return self._by_key[GPU.key]

    def replace(self, key: str, **changes: int | None) -> Quota:
        """This quota with one line changed: ``q.replace("gpu", guarantee=50)``."""
        lines = []
        for res, line in self:
            if res.key == key:
                line = Line(
                    changes.get("guarantee", line.guarantee),
                    changes.get("limit", line.limit),
                    line.weight,
                )
            lines.append(line)
        return Quota(tuple(lines), self.priority)

    def keep_others(self, other: Quota, key: str) -> Quota:
        """This quota's ``key`` line, weight and priority with ``other``'s other lines."""
        lines = tuple(
            line if res.key == key else Line(kept.guarantee, kept.limit, line.weight)
            for (res, line), kept in zip(self, other.lines, strict=True)
        )
        return Quota(lines, self.priority)

    # -- storage: an owner's lines in one pool (``models.QuotaLine``) --

    @classmethod
    def from_lines(cls, lines: Iterable[StoredLine], priority: int) -> Quota:
        """The quota an owner's lines in one pool hold: a resource without a line has
        none (a required one: 0, no limit beyond it)."""
        by_key = {line.resource: line for line in lines}
        weight = next(iter(by_key.values())).weight if by_key else WEIGHT_DEFAULT
        values = []
        for res in RESOURCES:
            stored = by_key.get(res.key)
            if stored is None:
                values.append(Line(0, 0, weight) if res.required else Line(None, None, weight))
            else:
                limit = stored.quota_limit if res.limited else None
                values.append(Line(stored.guarantee, limit, stored.weight))
        return cls(tuple(values), priority)

    def stored(self) -> Iterator[tuple[str, Line]]:
        """The lines to store (resource key -> line): an optional resource with no
        guarantee has none."""
        for res, line in self:
            if res.required or line.guarantee is not None:
                yield res.key, line

    # -- the one fit rule --

    def problems(self, capacity: Capacity) -> dict[str, str]:
        """What is wrong with this quota in a pool of ``capacity``: field -> what to change.
        A limit is at least the guarantee; nothing exceeds the pool (an optional resource
        only where the pool sets an amount of it)."""
        errors: dict[str, str] = {}
        for res, line in self:
            errors.update(_line_problems(res, line, capacity.get(res.key, 0)))
        return errors

    # -- as people read it --

    def display(self) -> dict[str, str]:
        """Field -> value as a person types it (the forms' values, the messages' facts)."""
        shown: dict[str, str] = {}
        for res, line in self:
            shown[res.guarantee_field] = res.text(line.guarantee)
            if res.limited:
                shown[res.limit_field] = res.text(line.limit)
        shown[WEIGHT_FIELD] = format_hundredths(self.weight)
        shown[PRIORITY_FIELD] = str(self.priority)
        return shown

    def changes(self, other: Quota) -> dict[str, list[str]]:
        """Field -> [this, other] for every value ``other`` changes."""
        before, after = self.display(), other.display()
        return {k: [before[k], after[k]] for k in before if before[k] != after[k]}

    def describe(self) -> str:
        """ "guarantee 0.33 GPU, limit 1 GPU, weight 1, priority 100, 4 CPU cores"."""
        return describe(self.display())


def describe(shown: Mapping[str, str]) -> str:
    """A quota's values (``Quota.display``) in one line, as messages say it."""
    parts = []
    for res in RESOURCES:
        if res.required:
            parts.append(f"guarantee {shown.get(res.guarantee_field, '')} {res.unit}")
            if res.limited:
                parts.append(f"limit {shown.get(res.limit_field, '')} {res.unit}")
    parts.append(f"weight {shown.get(WEIGHT_FIELD, '')}")
    parts.append(f"priority {shown.get(PRIORITY_FIELD, '')}")
    for res in RESOURCES:
        value = shown.get(res.guarantee_field, "")
        if not res.required and value:
            parts.append(f"{value} {_optional_words(res)}")
    return ", ".join(parts)


def _optional_words(res: Resource) -> str:
    """ "CPU cores", "GB memory": how a message names an optional resource's amount."""
    if res.name.isupper():
        return f"{res.name} {res.unit}"
    return f"{res.unit} {res.in_sentence}"


def _line_problems(res: Resource, line: Line, capacity: int) -> dict[str, str]:
    errors: dict[str, str] = {}
    guarantee, limit = line.guarantee, line.limit
    if guarantee is not None and limit is not None and guarantee > limit:
        errors[res.limit_field] = (
            f"the limit ({res.shown(limit)}) cannot be below the guarantee "
            f"({res.shown(guarantee)}): raise the limit or lower the guarantee"
        )
    checked = res.required or capacity > 0
    largest, where = (
        (limit, res.limit_field) if limit is not None else (guarantee, res.guarantee_field)
    )
    if checked and largest is not None and largest > capacity:
        what = "limit" if limit is not None else "guarantee"
        errors[where] = (
            f"the {what} ({res.shown(largest)}) cannot exceed the pool of "
            f"{res.shown(capacity)}: enter {res.text(capacity)} or less"
        )
    return errors


def typed(data: Mapping[str, Any], key: str) -> str:
    """A field as typed in a form or a JSON body, as text."""
    value = data.get(key)
    if isinstance(value, bool):  # JSON true is not 1
        return str(value).lower()
    return "" if value is None else str(value).strip()


def parse(data: Mapping[str, Any], *, capacity: Capacity | None) -> Quota:
    """Read a quota as typed in a form or a JSON body, once; raise with every problem
    found, each under its field and naming it by its label (against the pool too, unless
    ``capacity`` is None)."""
    errors: dict[str, str] = {}

    def amount(res: Resource, key: str, what: str, default: str = "") -> int | None:
        raw = typed(data, key) or default
        if not raw and not res.required:
            return None
        try:
            return res.parse(raw, what)
        except ValueError as exc:
            errors[key] = str(exc)
            return None

    weight_raw = typed(data, WEIGHT_FIELD) or "1"
    try:
        weight = parse_hundredths(weight_raw, what="the over-quota weight")
    except ValueError as exc:
        errors[WEIGHT_FIELD] = str(exc)
        weight = WEIGHT_DEFAULT
    lines = []
    for res in RESOURCES:
        unit = "" if res.unit == res.name else f" ({res.unit})"
        what = f"the {res.in_sentence} guarantee{unit}"
        guarantee = amount(res, res.guarantee_field, what)
        what = f"the {res.in_sentence} limit"
        limit = amount(res, res.limit_field, what) if res.limited else None
        lines.append(Line(guarantee, limit, weight))
    priority = _priority(typed(data, PRIORITY_FIELD), errors)
    quota = Quota(tuple(lines), priority)
    unbounded = {res.key: QUANTITY_MAX * 100 * res.scale for res in RESOURCES}
    for key, problem in quota.problems(unbounded if capacity is None else capacity).items():
        errors.setdefault(key, problem)
    if errors:
        raise InvalidInput(errors)
    return quota


def _priority(raw: str, errors: dict[str, str]) -> int:
    if not raw:
        return PRIORITY_DEFAULT
    if _WHOLE.fullmatch(raw) and PRIORITY_MIN <= int(raw) <= PRIORITY_MAX:
        return int(raw)
    errors[PRIORITY_FIELD] = (
        f"priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX} "
        f"(KAI's default is {PRIORITY_DEFAULT})"
    )
    return PRIORITY_DEFAULT
