"""The words people receive: one template per event they hear of, in
``templates/events/<event>.txt``, with a block for each place a message appears:

- ``title``: the bell's line, the e-mail's subject and the chat post (required);
- ``email``: the e-mail's text above the link (default: the title);
- ``chat``: the Slack line (default: the title).

A template renders the event's stored facts (its audit details, also as ``facts``),
``team`` and ``actor``; quota fields are named with the forms' labels (the ``changes``
and ``label`` filters, ``amount()``); ``quota(facts)`` describes a requested quota."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jinja2

from app.core import labels, quota
from app.core.config import PROJECT_ROOT
from app.core.events import Event

FOLDER = PROJECT_ROOT / "templates" / "events"
BLOCKS = ("title", "email", "chat")


@dataclass(frozen=True)
class Words:
    title: str
    email: str
    chat: str


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(FOLDER),
        # Plain text, never HTML: the pages escape the title, the Slack sender its line.
        autoescape=False,  # noqa: S701
        undefined=jinja2.StrictUndefined,  # a fact missing from a message fails its test
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )
    env.filters["changes"] = labels.changes
    env.filters["label"] = labels.label
    env.globals["amount"] = labels.amount
    # A quota in one line, from the declaration: ``quota(facts)``.
    env.globals["quota"] = quota.describe
    return env


def template_name(event: Event) -> str:
    return f"{event.value}.txt"


def render(event: Event, facts: Mapping[str, Any]) -> Words:
    template = _environment().get_template(template_name(event))
    context = template.new_context({**facts, "facts": facts})
    text: dict[str, str] = {}
    for block in BLOCKS:
        render_block = template.blocks.get(block)
        if render_block is not None:
            text[block] = (
                " ".join("".join(render_block(context)).split())
                if block != "email"
                else ("".join(render_block(context)).strip())
            )
    if not text.get("title"):
        raise ValueError(f"{template_name(event)} has no title block")
    return Words(
        title=text["title"],
        email=text.get("email") or text["title"],
        chat=text.get("chat") or text["title"],
    )
