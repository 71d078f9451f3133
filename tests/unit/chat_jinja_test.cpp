// The Jinja2 interpreter of src/chat on small handwritten templates, with the
// exact text jinja2 3.1 gives (trim_blocks and lstrip_blocks on, as HF
// transformers renders chat templates).
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/template.h"
#include "chat/value.h"
#include "test_support.h"

namespace sluice::chat {
namespace SLUICE_TEST_FILE {

std::string render(const std::string& src, const std::string& vars_json = "{}") {
  Dict vars;
  const auto j = nlohmann::ordered_json::parse(vars_json);
  for (const auto& [k, v] : j.items()) vars.emplace_back(k, Value::from_json(v));
  return Template(src).render(vars);
}

TEST(ChatJinja, OutputLiteralsAndOperators) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 4 / 2 }}"),
            "7|3|-4|1|2|3.5|2.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}|{{ 'ab' * 2 }}|{{ [1, 'x'] }}|{{ {'k': true} }}|{{ (1, 2) }}"),
            "a1None|abab|[1, 'x']|{'k': True}|(1, 2)");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 0.00001 }}|{{ 2 ** 10 }}"), "0.30000000000000004|1e+20|1e-05|1024");
  EXPECT_EQ(render("{{ 'x' if a else 'y' }}{{ 'z' if not a }}", R"({"a": false})"), "yz");
  EXPECT_EQ(render("{{ 'b' in 'abc' }}{{ 2 not in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 1 < 2 <= 2 }}"), "TrueFalseTrueTrue");
  EXPECT_EQ(render("{{ \"it's\\n\" }}{{ 'a\\tb' }}"), "it's\na\tb");
}

TEST(ChatJinja, WhitespaceControlAsTransformers) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indent before it.
  EXPECT_EQ(render("{% if true %}\n  a\n  {% endif %}\nb\n"), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(render("a {{- ' b ' -}} c"), "a b c");
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
  EXPECT_EQ(render("{# comment #}\nz"), "z");
  EXPECT_EQ(render("q {% if true %}r{% endif %}"), "q r");  // not alone on its line: kept
}

TEST(ChatJinja, LoopsAndScopes) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
                   R"({"xs": ["a", "b", "c"]})"),
            "1a,2b,3c");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "b=1;a=2;");
  EXPECT_EQ(render("{% for x in range(5) if x is odd %}{{ x }}{{ loop.length }}{% endfor %}"), "1232");
  EXPECT_EQ(render("{% for x in range(9) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "02");
  // set inside a loop does not leak; a namespace does.
  EXPECT_EQ(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set n = n + x %}"
                   "{% set ns.n = ns.n + x %}{% endfor %}{{ n }} {{ ns.n }}"),
            "0 3");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
  EXPECT_EQ(render("{% set y = 0 %}{% for x in [1, 2] %}[{{ y }}]{% set y = x %}{% endfor %}{{ y }}"), "[0][0]0");
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.previtem is defined }}{{ loop.revindex0 }}{% endfor %}"), "False1True0");
}

TEST(ChatJinja, SetBlocksMacrosAndFilterBlocks) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a + b }}"), "3");
  EXPECT_EQ(render("{% set s %}  x {{ 1 }}  {% endset %}[{{ s }}]"), "[  x 1  ]");
  EXPECT_EQ(render("{% set s | trim %}  y  {% endset %}[{{ s }}]"), "[y]");
  EXPECT_EQ(render("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(2, b=3) }} {{ m(b=4, a=5) }}"),
            "1-d 2-3 5-4");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(ChatJinja, Filters) {
  EXPECT_EQ(render("{{ '  a b  ' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ 'hello world' | title }}|{{ 'aXa' | replace('a', 'b') }}"),
            "a b|ABab|Hello World|bXb");
  EXPECT_EQ(render("{{ [1, 2, 3] | join(', ') }}|{{ [3, 1, 2] | sort | list }}|{{ [1, 1, 2] | unique | list }}|{{ 'abc' | reverse }}"),
            "1, 2, 3|[1, 2, 3]|[1, 2]|cba");
  EXPECT_EQ(render("{{ x | default('d') }}{{ '' | default('e', true) }}{{ none | d('f') }}|{{ xs | length }}{{ 'héllo' | length }}",
                   R"({"xs": [1, 2]})"),
            "deNone|25");
  EXPECT_EQ(render("{{ {'a': 'é', 'b': [1, 2.5, none, true]} | tojson }}"), R"({"a": "é", "b": [1, 2.5, null, true]})");
  // Markup + str escapes the str, as markupsafe does (functionary v3.1 relies on it).
  EXPECT_EQ(render("{{ 'a<'|safe + '\"b&' }}|{{ 'x' ~ '<'|safe }}"), "a<&#34;b&amp;|x<");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ users | selectattr('admin') | map(attribute='name') | join(',') }}|"
                   "{{ users | rejectattr('name', 'equalto', 'a') | map(attribute='name') | list }}",
                   R"({"users": [{"name": "a", "admin": true}, {"name": "b", "admin": false}, {"name": "c", "admin": true}]})"),
            "a,c|['b', 'c']");
  EXPECT_EQ(render("{{ {'b': 1, 'A': 2} | dictsort }}|{{ {'k': 'v'} | items | list }}"), "[('A', 2), ('b', 1)]|[('k', 'v')]");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'x' | indent(2, true) }}"), "a\n  b\n\n  c|  x");
  EXPECT_EQ(render("{{ '42' | int + 1 }}|{{ 'x' | int }}|{{ 3 | float }}|{{ -3 | abs }}|{{ 2.567 | round(1) }}|{{ 'a b c' | wordcount }}"),
            "43|0|3.0|3|2.6|3");
  EXPECT_EQ(render("{{ [1, 2, 3, 4, 5] | batch(2) | list }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|{{ 3 | string ~ 'x' }}"),
            "[[1, 2], [3, 4], [5]]|12|3x");
}

TEST(ChatJinja, TestsAndMethods) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is none }}{{ 's' is string }}{{ {} is mapping }}{{ [] is iterable }}"
                   "{{ 3 is number }}{{ 3 is integer }}{{ true is boolean }}{{ 4 is divisibleby 2 }}{{ 1 is even }}"
                   "{{ 'a' is in ['a'] }}{{ x is not none }}",
                   R"({"y": null})"),
            "FalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrue");
  EXPECT_EQ(render("{{ ' a ' .strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y '.split() }}|{{ 'abc'.startswith('ab') }}"
                   "{{ 'abc'.endswith(('x', 'c')) }}|{{ '{} and {}'.format(1, 'b') }}|{{ 'abcb'.find('b') }}{{ 'abcb'.count('b') }}"),
            "a|['a', 'b', '', 'c']|['x', 'y']|TrueTrue|1 and b|12");
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.get('q') }}|{{ d.keys() | list }}{{ d['a'] }}{{ d.a }}",
                   R"({"d": {"a": 1}})"),
            "1dfltNone|['a']11");
  EXPECT_EQ(render("{{ xs[1:] }}{{ xs[-1] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ 'hello'[1:3] }}", R"({"xs": [1, 2, 3]})"),
            "[2, 3]3[3, 2, 1][1, 2]el");
  EXPECT_EQ(render("{{ dict(a=1) }}{{ range(1, 7, 2) | list }}"), "{'a': 1}[1, 3, 5]");
}

TEST(ChatJinja, UndefinedSemanticsAndErrors) {
  EXPECT_EQ(render("[{{ nope }}]{{ nope | length }}{% if not nope %}f{% endif %}{% for x in nope %}x{% endfor %}"
                   "{{ d.missing is defined }}{{ none.x is defined }}",
                   R"({"d": {}})"),
            "[]0fFalseFalse");
  EXPECT_NE(test::error_of([] { render("{{ nope.attr }}"); }).find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(test::error_of([] { render("{{ 1 + nope }}"); }).find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(test::error_of([] { render("{{ [1].append(2) }}"); }).find("unsafe"), std::string::npos);
  EXPECT_NE(test::error_of([] { render("{% if x %}"); }).find("missing {% endif %}"), std::string::npos);
  EXPECT_NE(test::error_of([] { render("{{ x | from_json }}"); }).find("no filter named 'from_json'"), std::string::npos);
  EXPECT_NE(test::error_of([] { render("{% frob %}"); }).find("unknown tag 'frob'"), std::string::npos);
  EXPECT_EQ(test::error_of([] { render("{{ 'x' + 1 }}"); }),
            "chat template: line 1: unsupported operand type(s) for +: 'str' and 'int'");
}

// Found by chat_template_fuzz (a real template with `messages[]`): the
// parser accepted an empty subscript and the interpreter dereferenced the
// missing index (UBSan: reference binding to null pointer).
TEST(ChatJinja, EmptySubscriptIsASyntaxError) {
  EXPECT_EQ(test::error_of([] { render("{{ messages[]['content'] }}", R"({"messages": []})"); }),
            "chat template: line 1: expected an index or a slice inside []");
  EXPECT_EQ(render("{{ m[:] }}{{ m[1:] }}{{ m[::2] }}{{ m[-1] }}", R"({"m": [1, 2, 3]})"),
            "[1, 2, 3][2, 3][1, 3]3");
}

TEST(ChatJinja, RenderChatProvidesTransformersGlobals) {
  ChatInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  in.add_generation_prompt = true;
  in.bos_token = "<s>";
  in.extra = {{"enable_thinking", false}};
  in.now.tm_year = 125;
  in.now.tm_mon = 2;
  in.now.tm_mday = 7;
  const std::string tpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ tools is none }}{{ enable_thinking }}"
      "|{{ strftime_now('%d %b %Y') }}";
  EXPECT_EQ(render_chat(tpl, in), "<s><user>hi<assistant>TrueFalse|07 Mar 2025");
  EXPECT_EQ(test::error_of([&] { render_chat("{{ raise_exception('no system role') }}", in); }),
            "chat template: raise_exception: no system role");
}

}  // namespace
}  // namespace sluice::chat
