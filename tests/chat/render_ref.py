#!/usr/bin/python3
"""Reference renderer for sluice's chat-template test: renders templates the
way HF transformers' apply_chat_template does (jinja2
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks, loop controls
and a {% generation %} tag; tojson without HTML escaping and with json.dumps'
options; raise_exception; strftime_now), but with a fixed clock.

Usage: render_ref.py CASES.json
CASES.json: [{"template": path, "messages": [...], "tools": [...] | null,
              "add_generation_prompt": bool, "bos_token": str, "eos_token": str,
              "extra": {...}, "now": "YYYY-MM-DDTHH:MM:SS"}, ...]
Prints a JSON array, one entry per case: {"ok": true, "text": ...} or
{"ok": false, "error": ...} (any exception from compiling or rendering).
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %}: transformers uses it to mark
    assistant spans; for rendering it only outputs its body (in a call block,
    so its own scope, as transformers' AssistantTracker does)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # jinja2's own tojson HTML-escapes; transformers replaces it with plain json.dumps.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def render(case):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    now = datetime.fromisoformat(case["now"])
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    with open(case["template"], encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    return tpl.render(messages=case["messages"], tools=case.get("tools"),
                      add_generation_prompt=case["add_generation_prompt"],
                      bos_token=case["bos_token"], eos_token=case["eos_token"], **case.get("extra", {}))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    results = []
    for case in cases:
        try:
            results.append({"ok": True, "text": render(case)})
        except Exception as e:  # every failure is a result: the C++ side must fail too
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
