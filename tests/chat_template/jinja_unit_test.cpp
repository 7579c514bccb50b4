// Unit tests for the Jinja engine. Expected strings follow Jinja2 3.1 semantics as transformers
// configures it (trim_blocks=True, lstrip_blocks=True); each is what Python's Jinja2 prints.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/jinja/chat_template.h"

namespace frugal::jinja {
namespace {

using nlohmann::json;

std::string render(const std::string& src, const json& ctx = json::object()) {
  auto t = Template::parse(src);
  if (!t.is_ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->render(ctx);
  if (!r.is_ok()) return "RENDER ERROR: " + r.status().message();
  return *r;
}

Status render_error(const std::string& src, const json& ctx = json::object()) {
  auto t = Template::parse(src);
  if (!t.is_ok()) return t.status();
  auto r = t->render(ctx);
  if (r.is_ok()) return Status::ok();
  return r.status();
}

TEST(JinjaExpr, Literals) {
  EXPECT_EQ(render("{{ 1 }} {{ 1.5 }} {{ 'a' }} {{ \"b\" }} {{ true }} {{ none }} {{ False }}"),
            "1 1.5 a b True None False");
  EXPECT_EQ(render("{{ [1, 'a', none] }}"), "[1, 'a', None]");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [true]} }}"), "{'a': 1, 'b': [True]}");
  EXPECT_EQ(render("{{ 'it\\'s' }}|{{ \"x\\ny\" }}|{{ 'a' 'b' }}"), "it's|x\ny|ab");
  EXPECT_EQ(render("{{ '\\u00e9\\x41' }}"), "\xc3\xa9" "A");
  EXPECT_EQ(render("{{ 2.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }}"), "2.0 1000.0 0.30000000000000004");
  EXPECT_EQ(render("{{ [\"it's\"] }}"), "[\"it's\"]");
}

TEST(JinjaExpr, Arithmetic) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"),
            "3 -4 1 2 3.5 1024");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1 - -1 }} {{ 4 / 2 }}"), "7 9 2 2.0");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none }}"), "ababab [1, 2] a1None");
  EXPECT_EQ(render("{{ '%s-%d' % ('a', 3) }} {{ '%.2f%%' % 12.3456 }} {{ '%s and %r' | format('x', 'y') }}"),
            "a-3 12.35% x and 'y'");
  EXPECT_FALSE(render_error("{{ '%s %s' % ('a',) }}").is_ok());
  EXPECT_EQ(render("{{ true + 1 }}"), "2");
  EXPECT_FALSE(render_error("{{ 'a' + 1 }}").is_ok());
  EXPECT_FALSE(render_error("{{ 1 / 0 }}").is_ok());
}

TEST(JinjaExpr, ComparisonAndLogic) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ [1,2] == [1,2] }}"),
            "True False True True True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "True True True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ [] or none }} {{ not [] }}"), "x y None True");
  EXPECT_EQ(render("{{ 'a' if true else 'b' }}{{ 'c' if false else 'd' }}[{{ 'e' if false }}]"), "ad[]");
  EXPECT_EQ(render("{{ not x is defined }} {{ x is not defined }}"), "True True");
}

TEST(JinjaExpr, AttributeAndItemAccess) {
  json ctx = {{"m", {{"role", "user"}, {"content", "hi"}}}, {"xs", {10, 20, 30}}};
  EXPECT_EQ(render("{{ m.role }} {{ m['content'] }} {{ xs[0] }} {{ xs[-1] }} {{ xs.1 }}", ctx), "user hi 10 30 20");
  EXPECT_EQ(render("[{{ m.missing }}] {{ m.missing is defined }} {{ xs[9] is defined }}", ctx), "[] False False");
  EXPECT_FALSE(render_error("{{ m.missing.deeper }}", ctx).is_ok());
  EXPECT_FALSE(render_error("{{ nothing.attr }}").is_ok());
}

TEST(JinjaExpr, Slicing) {
  json ctx = {{"xs", {0, 1, 2, 3, 4}}, {"s", "hello"}};
  EXPECT_EQ(render("{{ xs[1:3] }} {{ xs[:2] }} {{ xs[3:] }} {{ xs[::-1] }} {{ xs[-2:] }} {{ xs[::2] }}", ctx),
            "[1, 2] [0, 1] [3, 4] [4, 3, 2, 1, 0] [3, 4] [0, 2, 4]");
  EXPECT_EQ(render("{{ s[1:] }} {{ s[::-1] }} {{ s[-3:-1] }} {{ s[0] }}", ctx), "ello olleh ll h");
}

TEST(JinjaExpr, StringMethods) {
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a-b-c'.split('-', 1) }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b-c']");
  EXPECT_EQ(render("[{{ '  x  '.strip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\nhi\\n'.lstrip('\\n') }}]"
                   "[{{ 'hi  '.rstrip() }}]"),
            "[x][hi][hi\n][hi]");
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }}"),
            "True True True");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'Hi'.upper() }} {{ 'Hi'.lower() }}"),
            "bbb bba HI hi");
  EXPECT_EQ(render("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'abcabc'.find('c') }} "
                   "{{ 'abc'.find('z') }} {{ 'abcabc'.count('ab') }} {{ '-'.join(['a', 'b']) }}"),
            "Hello World Hello 2 -1 2 a-b");
  EXPECT_EQ(render("{{ '<think>a</think>b'.split('</think>')[-1] }}"), "b");
}

TEST(JinjaExpr, DictAndListMethods) {
  json ctx = {{"d", {{"a", 1}, {"b", 2}}}};
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", ctx), "a=1;b=2;");
  EXPECT_EQ(render("{{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }}", ctx),
            "['a', 'b'] [1, 2] 1 None 5");
  EXPECT_EQ(render("{% set xs = [] %}{% set _ = xs.append(1) %}{% do xs.append(2) %}{{ xs }}"), "[1, 2]");
}

TEST(JinjaStmt, IfElifElse) {
  const std::string t = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(render(t, {{"x", 1}}), "one");
  EXPECT_EQ(render(t, {{"x", 2}}), "two");
  EXPECT_EQ(render(t, {{"x", 3}}), "many");
}

TEST(JinjaStmt, ForLoopVariables) {
  json ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", ctx),
            "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }}{% endfor %}", ctx),
            "FalsebTruecTrue-");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.cycle('o', 'e') }}{% endfor %}", ctx), "oeo");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"), "2242");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }},{% endfor %}"), "3,7,");
  EXPECT_EQ(render("{% for c in 'ab' %}{{ c }}.{% endfor %}"), "a.b.");
  EXPECT_EQ(render("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}"
                   "{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(render("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
}

TEST(JinjaStmt, SetScopingAndNamespace) {
  // A plain set inside a loop does not leak out; a namespace attribute does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1,2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = ['x', 'y'] %}{{ c }}{{ d }}"), "12xy");
  EXPECT_EQ(render("{% set body %}  hi {{ 1 + 1 }}{% endset %}[{{ body }}]"), "[  hi 2]");
  EXPECT_EQ(render("{% set body | upper %}abc{% endset %}{{ body }}"), "ABC");
  EXPECT_FALSE(render_error("{% set d = {} %}{% set d.x = 1 %}").is_ok());
}

TEST(JinjaStmt, MacrosAndCall) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"),
            "Hi a! Hi b? Hi c.");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inner{% endcall %}"),
            "<inner>");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% macro bump() %}{% set ns.n = ns.n + 1 %}{% endmacro %}"
                   "{{ bump() }}{{ bump() }}{{ ns.n }}"),
            "2");
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
}

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks drops indentation before it.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("<ul>\n    {% for x in [1,2] %}\n    <li>{{ x }}</li>\n    {% endfor %}\n</ul>"),
            "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>");
  // Expression tags are not block tags: no trimming around them.
  EXPECT_EQ(render("  {{ 1 }}\n{{ 2 }}\n"), "  1\n2");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a\n  {{- 'b' -}}\n  c"), "abc");
  EXPECT_EQ(render("x {# comment #}\ny"), "x y");
  EXPECT_EQ(render("x {% if true %}y{% endif %} z"), "x y z");
  EXPECT_EQ(render("{% if true +%}\nkept{% endif %}"), "\nkept");
  EXPECT_EQ(render("line\n"), "line");
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(JinjaFilters, Strings) {
  EXPECT_EQ(render("[{{ '  a b  ' | trim }}] {{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hello world' | capitalize }} "
                   "{{ 'hello big-world' | title }}"),
            "[a b] ABC abc Hello world Hello Big-World");
  EXPECT_EQ(render("{{ 'a-b-c' | replace('-', '+') }} {{ [1, 'x'] | join(',') }} {{ 'abc' | reverse }} {{ 42 | string }}"),
            "a+b+c 1,x cba 42");
  EXPECT_EQ(render("{{ '<a href=\"x\">&\\'' | escape }}"), "&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ 'héllo' | length }} {{ [1,2] | count }} {{ {'a': 1} | length }} {{ undefined_var | length }}"),
            "5 2 1 0");
}

TEST(JinjaFilters, Defaults) {
  EXPECT_EQ(render("{{ x | default('d') }} {{ x | d('e') }} {{ '' | default('f') }} {{ '' | default('g', true) }}"),
            "d e  g");
  EXPECT_EQ(render("{{ none | default('h') }}"), "None");
  EXPECT_EQ(render("{{ none | trim }} {{ 12 | upper }}"), "None 12");
}

TEST(JinjaFilters, Sequences) {
  json ctx = {{"users",
               {{{"name", "b"}, {"age", 30}, {"admin", true}},
                {{"name", "a"}, {"age", 20}, {"admin", false}},
                {{"name", "c"}, {"age", 40}}}}};
  EXPECT_EQ(render("{{ users | map(attribute='name') | join(',') }}", ctx), "b,a,c");
  EXPECT_EQ(render("{{ users | selectattr('admin') | map(attribute='name') | list }}", ctx), "['b']");
  EXPECT_EQ(render("{{ users | rejectattr('admin') | map(attribute='name') | list }}", ctx), "['a', 'c']");
  EXPECT_EQ(render("{{ users | selectattr('age', 'gt', 25) | map(attribute='name') | join }}", ctx), "bc");
  EXPECT_EQ(render("{{ users | selectattr('name', 'equalto', 'a') | list | length }}", ctx), "1");
  EXPECT_EQ(render("{{ users | sort(attribute='age') | map(attribute='name') | join }}", ctx), "abc");
  EXPECT_EQ(render("{{ users | sort(attribute='name', reverse=true) | map(attribute='name') | join }}", ctx), "cba");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [1, 2, 3, 4] | select('odd') | list }}"),
            "[1, 2, 3] ['A', 'b', 'c'] [1, 3]");
  EXPECT_EQ(render("{{ [1, 2, 3] | reject('equalto', 2) | list }} {{ ['a', 'A', 'b'] | unique | list }}"),
            "[1, 3] ['a', 'b']");
  EXPECT_EQ(render("{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | list }} {{ [1,2,3,4,5] | batch(2) | list }}"),
            "1 3 ['a', 'b', 'c'] [[1, 2], [3, 4], [5]]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }} {{ {'x': 1} | items | list }}"),
            "[('a', 2), ('b', 1)] [('x', 1)]");
  EXPECT_EQ(render("{{ ['a', 'b'] | map('upper') | join }}"), "AB");
}

TEST(JinjaFilters, Numbers) {
  EXPECT_EQ(render("{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '2.5' | float }}"),
            "42 4 0 7 3 2.5");
  EXPECT_EQ(render("{{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.345 | round(1) }} {{ 5 | round }}"),
            "3 2.5 2.0 4.0 2.3 5");
  EXPECT_EQ(render("{{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(0, 'floor') }}"), "3.0 2.0");
}

TEST(JinjaFilters, ToJson) {
  json ctx = json::parse(R"({"t": {"name": "f", "args": [1, true, null, "é\"\n"], "empty": {}, "list": []}})");
  // nlohmann::json orders keys; Python would keep insertion order, so keys here are pre-sorted.
  EXPECT_EQ(render("{{ t | tojson }}", ctx),
            R"({"args": [1, true, null, "é\"\n"], "empty": {}, "list": [], "name": "f"})");
  EXPECT_EQ(render("{{ t | tojson(indent=2) }}", ctx),
            "{\n  \"args\": [\n    1,\n    true,\n    null,\n    \"é\\\"\\n\"\n  ],\n  \"empty\": {},\n  \"list\": [],\n"
            "  \"name\": \"f\"\n}");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }} {{ 1.0 | tojson }} {{ 'a' | tojson }}"), "\"\\u00e9\" 1.0 \"a\"");
  nlohmann::ordered_json octx = nlohmann::ordered_json::parse(R"({"t": {"z": 1, "a": 2}})");
  auto tmpl = Template::parse("{{ t | tojson }}");
  ASSERT_TRUE(tmpl.is_ok());
  auto out = tmpl->render(octx);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out, R"({"z": 1, "a": 2})");
}

TEST(JinjaTests, Builtins) {
  EXPECT_EQ(render("{{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} "
                   "{{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ [] is sequence }}"),
            "True True True True True True True True True");
  EXPECT_EQ(render("{{ true is boolean }} {{ true is true }} {{ false is false }} {{ 1 is true }} {{ 3 is odd }} "
                   "{{ 4 is even }} {{ 2 is in [1, 2] }} {{ 'x' is eq 'x' }} {{ 1 is equalto 2 }} {{ range is callable }}"),
            "True True True False True True True True False True");
  EXPECT_EQ(render("{{ 9 is divisibleby 3 }} {{ 1 is number and 'x' is not number }}"), "True True");
}

TEST(JinjaGlobals, RangeDictRaise) {
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}"),
            "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
  EXPECT_EQ(render("{{ dict(a=1, b='x') }}"), "{'a': 1, 'b': 'x'}");
  Status st = render_error("{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.message(), "Conversation roles must alternate");
  EXPECT_EQ(render("{{ strftime_now('%Y') | length }}"), "4");
}

TEST(JinjaErrors, NameConstructAndPosition) {
  Status st = render_error("line one\n{% extends 'base.html' %}");
  EXPECT_NE(st.message().find("line 2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("extends"), std::string::npos) << st.message();
  st = render_error("{{ x | nosuchfilter }}");
  EXPECT_NE(st.message().find("nosuchfilter"), std::string::npos) << st.message();
  st = render_error("{% if x %}unterminated");
  EXPECT_NE(st.message().find("endif"), std::string::npos) << st.message();
  st = render_error("{{ 'abc }}");
  EXPECT_FALSE(st.is_ok());
  st = render_error("{{ 1 + }}");
  EXPECT_NE(st.message().find("line 1 col"), std::string::npos) << st.message();
}

Status render_error_with(const std::string& src, RenderLimits limits) {
  auto t = Template::parse(src, limits);
  if (!t.is_ok()) return t.status();
  auto r = t->render(json::object());
  return r.is_ok() ? Status::ok() : r.status();
}

TEST(JinjaLimits, RunawayTemplatesFailCleanly) {
  // Default limits: unbounded recursion stops at the call-depth limit.
  Status st = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted) << st.message();
  // Small limits keep the test fast; the checks are the same code paths as the defaults.
  st = render_error_with("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                         RenderLimits{.max_loop_iterations = 1000});
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted) << st.message();
  st = render_error_with("{% for i in range(1000) %}{{ 'xxxxxxxxxx' * 10 }}{% endfor %}",
                         RenderLimits{.max_output_bytes = 10000});
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted) << st.message();
  EXPECT_EQ(render_error("{{ range(100000000) | length }}").code(), ErrorCode::kResourceExhausted);
  // Self-referencing containers: Python prints "[...]" and json.dumps refuses; no stack overflow.
  EXPECT_EQ(render("{% set xs = [1] %}{% do xs.append(xs) %}{% do xs.append(xs) %}{{ xs }} {{ xs == xs }}"),
            "[1, [...], [...]] True");
  EXPECT_FALSE(render_error("{% set xs = [1] %}{% do xs.append(xs) %}{{ xs | tojson }}").is_ok());
  std::string deep(5000, '(');
  st = render_error("{{ " + deep + " }}");
  EXPECT_FALSE(st.is_ok());
  EXPECT_FALSE(render_error("{% for x in xs recursive %}{% endfor %}").is_ok());
}

// Found by fuzz_chat_template (tests/fuzz): values a template builds but never writes must stay
// within the output limit too, and huge counts must not wrap around a size check.
TEST(JinjaLimits, BuiltValuesAreBounded) {
  const RenderLimits small{.max_output_bytes = 1 << 20, .max_loop_iterations = 100000};
  for (const char* src : {
           "{{ 'ab' * 4611686018427387904 }}",   // 2 * 2^62 wraps a 64-bit multiplication
           "{{ [1, 2] * 4611686018427387904 }}",
           "{{ 'x' | indent(1000000000000) }}",
           "{% set ns = namespace(x='ab') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}",
           "{% set x = 'a' * 1000000 %}{% set y = [x] * 1000 %}{{ y }}",
           "{% set x = 'a' * 1000000 %}{% set y = [x] * 1000 %}{{ y | tojson }}",
           "{% set x = 'a' * 1000000 %}{% set y = [x] * 1000 %}{{ y | join }}",
           "{% set x = 'a' * 1000000 %}{% set y = x.replace('a', x) %}",
           "{% set x = 'a' * 1000000 %}{% set y = x | replace('a', 'aa') %}",
           "{% set x = ('a\n' * 400000) | indent(10) %}",
           "{{ range(9223372036854775807) | length }}",
       }) {
    Status st = render_error_with(src, small);
    EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted) << src << ": " << st.to_string();
  }
  // range() near the int64 edges counts like Python's len(range(...)) instead of overflowing.
  EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5) | list }}"),
            "[9223372036854775800, 9223372036854775805]");
  EXPECT_EQ(render("{{ range(5, -5, -3) | list }} {{ range(3, 3) | list }} {{ range(0, 10, 20) | list }}"),
            "[5, 2, -1, -4] [] [0]");
}

TEST(ChatTemplate, RenderChatTemplateApi) {
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ tools is none }}{{ extra }}";
  json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  ChatTemplateOptions opts{.add_generation_prompt = true, .bos_token = "<s>", .eos_token = "</s>",
                           .tools = nullptr, .extra_context = {{"extra", "!"}}};
  auto out = render_chat_template(tmpl, messages, opts);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out, "<s><user>hi</s><assistant>True!");
  // Parse once, render per request: same string.
  auto parsed = Template::parse(tmpl);
  ASSERT_TRUE(parsed.is_ok());
  auto ctx = chat_template_context(messages, opts);
  ASSERT_TRUE(ctx.is_ok());
  auto again = parsed->render(*ctx);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *out);
  EXPECT_FALSE(render_chat_template(tmpl, json::object(), opts).is_ok());  // messages must be a list
}

}  // namespace
}  // namespace frugal::jinja
