#!/usr/bin/env python3
"""Oracle for gridfeed's chat-template engine: renders real chat templates and feature probes
with jinja2 configured exactly as transformers 4.x configures it for apply_chat_template
(src/transformers/utils/chat_template_utils.py: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True, extensions=[AssistantTracker ({% generation %}), jinja2.ext.loopcontrols]),
filters["tojson"] = json.dumps(x, ensure_ascii=False, indent, separators, sort_keys),
globals raise_exception and strftime_now) and render(messages=..., tools=..., documents=...,
add_generation_prompt=..., **special tokens). strftime_now uses a fixed clock (NOW) so that the
expectations are stable; the gtest passes the same broken-down time.

Writes tests/golden/chat-templates/renderings.json. Run with a python3 that has jinja2 3.1:
    python3 tests/order/sft/oracle/render_templates.py
Templates come from sources/*.seg (see sources/SOURCES.md) and the Phi-3 tokenizer_config.json
of tests/golden/hf-tokenizers.
"""
import datetime
import hashlib
import json
import os

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "chat-templates", "renderings.json")
NOW = datetime.datetime(2025, 3, 7, 14, 5, 9)


class Generation(Extension):
    """transformers' AssistantTracker as the renderer sees it: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_seg(name):
    seg = open(os.path.join(HERE, "sources", name + ".seg"), encoding="utf-8").read().rstrip("\n")
    return json.loads('"' + json.loads('"' + seg + '"') + '"')


def phi3():
    p = os.path.join(ROOT, "tests", "golden", "hf-tokenizers", "tokenizers", "phi3",
                     "tokenizer_config.json")
    return json.load(open(p, encoding="utf-8"))["chat_template"]


TEMPLATES = {
    "llama-3.1-8b-instruct": (load_seg("llama3.1"), "meta-llama/Llama-3.1-8B-Instruct",
                              {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "llama-3.2-11b-vision-instruct": (load_seg("llama3.2-vision"),
                                      "meta-llama/Llama-3.2-11B-Vision-Instruct",
                                      {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "qwen3": (load_seg("qwen3"), "Qwen/Qwen3 (0.6B..32B)",
              {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwen2.5-generation": (load_seg("qwen2.5-generation"),
                           "Qwen/Qwen2.5 tools template with {% generation %} (third-party variant)",
                           {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "mistral-7b-instruct-v0.3": (load_seg("mistral-v0.3"), "mistralai/Mistral-7B-Instruct-v0.3",
                                 {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "gemma-2": (load_seg("gemma"), "google/gemma-2-27b-it (and gemma-7b-it)",
                {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                 "unk_token": "<unk>"}),
    "deepseek-r1-distill-llama-8b": (load_seg("deepseek-r1-distill-llama"),
                                     "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
                                     {"bos_token": "<｜begin▁of▁sentence｜>",
                                      "eos_token": "<｜end▁of▁sentence｜>",
                                      "pad_token": "<｜end▁of▁sentence｜>"}),
    "phi-3-mini": (phi3(), "microsoft/Phi-3-mini-4k-instruct (tests/golden/hf-tokenizers/phi3)",
                   {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>",
                    "pad_token": "<|endoftext|>"}),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location — «quoted» \"x\"",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14.5},
                "strict": {"type": "boolean", "default": False, "nullable": None},
            },
            "required": ["location"],
        },
    },
}

ROWS = {
    "basic": {"messages": [
        {"role": "system", "content": "  You are brief.\n"},
        {"role": "user", "content": "Hi there, é中文🙂"},
        {"role": "assistant", "content": "Hello! ß\tΣ"},
        {"role": "user", "content": "  And now?  "},
    ]},
    "no_system": {"messages": [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2 with \"quotes\" and \\backslash"},
        {"role": "assistant", "content": "A2\n"},
    ]},
    "alternation_error": {"messages": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ]},
    "system_only_first": {"messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u"},
    ]},
    "tools": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "abc123XYZ", "type": "function",
             "function": {"name": "get_current_weather",
                          "arguments": {"location": "Zürich", "unit": "celsius", "days": 2}}}]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "name": "get_current_weather",
         "content": "{\"temp\": 21.5}"},
        {"role": "assistant", "content": "It is 21.5 °C."},
    ]},
    "tools_string_args": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call00001", "type": "function",
             "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Paris\"}"}},
            {"id": "call00002", "type": "function",
             "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call00001", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call00002", "content": "rainy"},
    ]},
    "reasoning": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "\nthink hard\n"},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "<think>\nadd\n</think>\n\n6"},
    ]},
    "reasoning_last": {"messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo", "reasoning_content": "think hard"},
    ]},
    "deepseek_tools": {"messages": [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}},
            {"type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "content": "r1"},
        {"role": "tool", "content": "r2"},
        {"role": "assistant", "content": "<think>hidden</think>Answer"},
    ]},
    "vision_parts": {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "Describe"},
                                     {"type": "image"}, {"type": "text", "text": " this."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
    ]},
    "bad_tool_id": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "short", "type": "function", "function": {"name": "f", "arguments": {}}}]},
    ]},
    "big_numbers": {"messages": [
        {"role": "user", "content": "n", "meta": {"i": 9223372036854775807, "f": 1e-07,
                                                   "g": 12345678901234567.0, "neg": -0.0,
                                                   "list": [1, 2.5, True, None, "s"]}},
    ]},
}

# (template, row, add_generation_prompt)
CASES = []
for name in TEMPLATES:
    for row in ["basic", "no_system"]:
        for agp in [False, True]:
            CASES.append((name, row, agp))
for name, row in [
    ("llama-3.1-8b-instruct", "tools"), ("llama-3.2-11b-vision-instruct", "tools"),
    ("qwen3", "tools"), ("qwen3", "tools_string_args"), ("qwen2.5-generation", "tools"),
    ("qwen2.5-generation", "tools_string_args"), ("mistral-7b-instruct-v0.3", "tools"),
    ("mistral-7b-instruct-v0.3", "tools_string_args"), ("qwen3", "reasoning"),
    ("qwen3", "reasoning_last"), ("deepseek-r1-distill-llama-8b", "reasoning"),
    ("deepseek-r1-distill-llama-8b", "deepseek_tools"),
    ("llama-3.2-11b-vision-instruct", "vision_parts"), ("qwen3", "vision_parts"),
    ("mistral-7b-instruct-v0.3", "alternation_error"), ("gemma-2", "alternation_error"),
    ("gemma-2", "system_only_first"), ("mistral-7b-instruct-v0.3", "bad_tool_id"),
    ("llama-3.1-8b-instruct", "alternation_error"), ("phi-3-mini", "tools"),
    ("llama-3.1-8b-instruct", "tools_string_args"),
]:
    for agp in [False, True]:
        CASES.append((name, row, agp))

# Feature probes: small templates over the "probe" row, each exercising constructs real
# templates use (and the Python semantics behind them).
PROBE_ROW = {"tools": [WEATHER_TOOL], "documents": [{"title": "T", "text": "body"}], "messages": [
    {"role": "system", "content": "  Sys  "},
    {"role": "user", "content": "Hello World, ÉCOLE ß straße ǅ Σ ΑΣ", "name": "bob"},
    {"role": "assistant", "content": "a,b,,c", "weight": 2, "score": 0.5},
    {"role": "user", "content": "x  y\tz\n w", "tags": ["b", "A", "a", "c"]},
]}
PROBES = [
    "{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{{ '|' if not loop.last }}{% endfor %}",
    "{% for m in messages %}{% if loop.index0 == 2 %}{% break %}{% endif %}{% if m.role == 'system' %}{% continue %}{% endif %}[{{ m.content }}]{% endfor %}",
    "{% for k, v in messages[2].items() %}{{ k }}={{ v }};{% endfor %}",
    "{{ messages[1].content | upper }}|{{ messages[1].content | lower }}|{{ messages[1].content.title() }}|{{ messages[1].content | title }}|{{ messages[1].content.capitalize() }}|{{ 'straße'.upper() }}",
    "{{ messages[2].content.split(',') }}{{ messages[3].content.split() }}{{ messages[3].content.split(None, 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ messages[2].content.split(',', 2) }}",
    "{{ tools | tojson }}\n{{ tools[0] | tojson(indent=2) }}\n{{ tools[0].function.parameters | tojson(sort_keys=true) }}\n{{ {'a': [1, 2], 'b': 'é'} | tojson(separators=(',', ':')) }}\n{{ 'é' | tojson(ensure_ascii=true) }}",
    "{{ 2 ** 3 }} {{ 2 ** -1 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 9223372036854775807 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.0e-5 }} {{ 10 / 5 }} {{ -7.5 // 2 }} {{ 3 * 'ab' }} {{ [0] * 3 }}",
    "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'in', ['user', 'system']) | map(attribute='content') | first }}|{{ messages | map(attribute='weight', default=0) | list }}",
    "{{ messages[3].tags | sort }}{{ messages[3].tags | sort(case_sensitive=true) }}{{ messages[3].tags | unique | list }}{{ messages[3].tags | reverse | list }}{{ messages[3].tags | sort(reverse=true) | join }}",
    "{{ messages[2] | dictsort }}{{ messages[2] | items | list }}{{ messages[2].keys() | list }}{{ messages[2].get('weight') }}{{ messages[2].get('nope', 'dflt') }}",
    "{% set ns = namespace(count=0, names=[]) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.names = ns.names + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.names }}",
    "{% macro show(m, prefix='>') %}{{ prefix }}{{ m.role }}{% endmacro %}{% for m in messages %}{{ show(m) }}{{ show(m, prefix='#') }}{% endfor %}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ messages[0].role }}{% endcall %}",
    "{% filter upper %}shout {{ messages[0].role }}{% endfilter %}|{% set body %}  captured {{ 1 + 1 }} {% endset %}[{{ body }}]{% set t | trim %}  trimmed  {% endset %}[{{ t }}]",
    "{{ messages[0].content | trim }}|{{ '  xx  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '--a--'.lstrip('-') }}|{{ 'ab'.startswith(('x', 'a')) }}|{{ 'hello'.endswith('lo') }}|{{ 'hello'.find('l') }}|{{ 'hello'.rfind('l') }}|{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|{{ 'hello'.replace('l', 'L', 1) }}",
    "{{ 'Hi %s, %d items' % ('bob', 3) }}|{{ '{} and {}'.format('x', 'y') }}|{{ '{0}{name}'.format('a', name='b') }}|{{ '%s' % messages[3].tags }}",
    "{{ messages[1].content[0] }}{{ messages[1].content[-1] }}{{ messages[1].content[::-1] }}{{ messages[1].content[2:5] }}{{ messages[1:3] | length }}{{ messages[-1].role }}{{ [1,2,3,4,5][::2] }}{{ [1,2,3,4,5][-2:] }}{{ (1, 2) }}{{ (1,) }}",
    "{{ x is defined }}{{ messages is iterable }}{{ messages is sequence }}{{ messages[0] is mapping }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}{{ none is none }}{{ 'a' is string }}{{ 'a' is in 'abc' }}{{ 2 is gt 1 }}{{ 'abc' is lower }}{{ x is undefined }}{{ raise_exception is callable }}",
    "{{ messages[2].score | round }}{{ 2.675 | round(2) }}{{ 2.5 | round }}{{ 3.7 | int }}{{ '42' | int }}{{ '4.2' | float }}{{ -3 | abs }}{{ 'x' | int(7) }}{{ [3, 1, 2] | max }}{{ [3, 1, 2] | min }}{{ [1, 2, 3] | sum }}{{ 5 | string }}{{ none | string }}",
    "{{ messages[5] | default('dflt') }}|{{ '' | default('empty', true) }}|{{ none | d('x') }}|{{ undefined_name | default('u') }}|{{ messages | length }}|{{ 'ab' | count }}|{{ 'one two, three' | wordcount }}|{{ messages[0] | first }}|{{ 'abc' | last }}|{{ 'abc' | list }}",
    "{{ 'line1\nline2\n\nline3' | indent(2) }}|{{ 'a\nb' | indent(4, first=true) }}|{{ 'a\n\nb' | indent('>', blank=true) }}|{{ 'mid' | center(9) }}|{{ 'x' | capitalize }}|{{ 'a<b>' | escape }}",
    "{% for i in range(3) %}{{ loop.cycle('odd', 'even') }}{{ loop.previtem if not loop.first }}{{ loop.nextitem if not loop.last }}{{ loop.revindex }}{% endfor %}{% for x in [] %}no{% else %}empty{% endfor %}",
    "{{ documents | map(attribute='title') | join }}{{ documents[0].text }}{{ add_generation_prompt }}{{ bos_token }}{{ eos_token }}{{ pad_token is defined }}",
    "{{ 'é' < 'z' }}{{ [1, 2] < [1, 3] }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' in messages[3].tags }}{{ 'role' in messages[0] }}{{ none in [none] }}{{ 1 if 0 }}{{ 'x' ~ 1 ~ none ~ true }}{{ not 0 and 'y' or 'z' }}",
    "{{ messages[1].content.lower().split() | map('upper') | join('-') }}|{{ messages | map(attribute='content') | select('string') | map('length') | list }}|{{ [1, 0, 2] | select | list }}|{{ [1, 0, 2] | reject | list }}",
    "{{ 'ǅ'.lower() }}{{ 'ǅ'.upper() }}{{ 'ΑΣ'.lower() }}{{ 'ǆa'.title() }}{{ 'ﬁne'.upper() }}{{ 'İ'.lower() | length }}{{ 'ß'.swapcase() }}{{ 'Ab'.swapcase() }}",
    "{% raw %}{{ not rendered }}{% endraw %}\n  {% if true %}\n    kept\n  {% endif %}\n{{- '  trimmed' }}  \n{#- comment #}x",
    "{{ messages[2].weight * 1.5 }}{{ messages[2].weight / 4 }}{{ 10 ** 18 // 10 ** 17 }}{{ (messages | length) * 2 - 1 }}",
    "{{ messages[1].name }}|{{ messages[0].name }}|{{ messages[0].name is defined }}|{{ messages[1].missing.deeper is defined if messages[1].missing is defined else 'guarded' }}",
    "{{ raise_exception('custom failure: ' ~ messages[0].role) }}",
    "{{ messages[0].nope.deeper }}",
    "{{ 1 + 'a' }}",
    "{{ messages.append(1) }}",
    "{% for a, b in messages %}{% endfor %}",
    "{{ 1 // 0 }}",
    "{{ strftime_now('%Y-%m-%d %H:%M:%S %a %A %b %B %j %p %y %%') }}",
]


def render(env, template, row, tokens, agp):
    t = env.from_string(template)
    kwargs = dict(tokens)
    return t.render(messages=row["messages"], tools=row.get("tools"),
                    documents=row.get("documents"), add_generation_prompt=agp, **kwargs)


def main():
    env = make_env()
    out = {"_comment": "Made by tests/order/sft/oracle/render_templates.py with jinja2 " +
                       jinja2.__version__ + " configured as transformers' apply_chat_template; "
                       "strftime_now's clock is fixed at 'now'.",
           "now": {"year": NOW.year, "month": NOW.month, "day": NOW.day, "hour": NOW.hour,
                   "minute": NOW.minute, "second": NOW.second},
           "templates": {}, "rows": ROWS, "cases": []}
    for name, (tmpl, source, tokens) in TEMPLATES.items():
        out["templates"][name] = {"source": source, "tokens": tokens, "template": tmpl,
                                  "sha256": hashlib.sha256(tmpl.encode()).hexdigest()}
    def case(tname, rname, tmpl, row, tokens, agp):
        c = {"template": tname, "row": rname, "add_generation_prompt": agp}
        try:
            c["expected"] = render(env, tmpl, row, tokens, agp)
        except Exception as e:  # noqa: BLE001 -- the error is the expectation
            c["error"] = type(e).__name__ + ": " + str(e)
        out["cases"].append(c)
    for tname, rname, agp in CASES:
        tmpl, _, tokens = TEMPLATES[tname]
        case(tname, rname, tmpl, ROWS[rname], tokens, agp)
    out["rows"]["probe"] = PROBE_ROW
    for k, p in enumerate(PROBES):
        name = "probe-%02d" % k
        tokens = {"bos_token": "<s>", "eos_token": "</s>"}
        out["templates"][name] = {"source": "feature probe", "tokens": tokens, "template": p,
                                  "sha256": hashlib.sha256(p.encode()).hexdigest()}
        case(name, "probe", p, PROBE_ROW, tokens, True)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    ok = sum(1 for c in out["cases"] if "expected" in c)
    print("%d cases (%d rendered, %d errors) -> %s" % (len(out["cases"]), ok,
                                                       len(out["cases"]) - ok, OUT))


if __name__ == "__main__":
    main()
