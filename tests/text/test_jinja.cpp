// The Jinja interpreter (core/text/jinja.h) feature by feature, its error paths and its limits
// against hostile templates. Expected strings are what Jinja2 3.1 renders with transformers'
// settings (trim_blocks, lstrip_blocks, ImmutableSandboxedEnvironment, tojson as
// json.dumps(ensure_ascii=False)); the Python semantics they rely on are noted where not obvious.
#include <QtTest/QtTest>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/text/jinja.h"

using grpo::text::jinja::Dict;
using grpo::text::jinja::Limits;
using grpo::text::jinja::Template;

namespace {

Dict context(const nlohmann::ordered_json& j) {
  Dict d;
  for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), grpo::text::jinja::from_json(it.value()));
  return d;
}

std::string render(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   Limits limits = {}) {
  return Template(src, "t", limits).render(context(ctx));
}

// The error (context: message) of parsing and rendering `src`, or "" if none.
std::string error_of(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                     Limits limits = {}) {
  try {
    render(src, ctx, limits);
  } catch (const grpo::Error& e) {
    return e.context() + ": " + e.message();
  }
  return "";
}

#define CHECK_RENDER(src, ctx, expected) \
  QCOMPARE(QString::fromStdString(render(src, ctx)), QString::fromStdString(std::string(expected)))
#define CHECK_ERROR(src, ctx, needle)                                                     \
  do {                                                                                    \
    std::string err_ = error_of(src, ctx);                                                \
    QVERIFY2(err_.find(needle) != std::string::npos, ("got: " + err_).c_str());           \
  } while (0)

const nlohmann::ordered_json kNone = nlohmann::ordered_json::object();

}  // namespace

class TestJinja : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void text_and_output() {
    CHECK_RENDER("Hello {{ name }}!", (nlohmann::ordered_json{{"name", "world"}}), "Hello world!");
    CHECK_RENDER("{{ missing }}|{{ none }}|{{ true }}|{{ 1 }}|{{ 1.0 }}|{{ 0.1 }}|{{ 1e20 }}|{{ 2.5e-5 }}", kNone,
                 "|None|True|1|1.0|0.1|1e+20|2.5e-05");
    // Lists and dicts print as Python's repr.
    CHECK_RENDER("{{ [1, 'a', \"it's\", none, [true]] }} {{ {'k': 'v', 'n': 1} }} {{ (1,) }}", kNone,
                 "[1, 'a', \"it's\", None, [True]] {'k': 'v', 'n': 1} (1,)");
    CHECK_RENDER("{# a comment #}x{# another\nline #}y", kNone, "xy");
    // One trailing newline of the template is dropped (keep_trailing_newline=False); \r\n becomes \n.
    CHECK_RENDER("a\r\nb\n", kNone, "a\nb");
  }

  void whitespace_control() {
    CHECK_RENDER("a  {{- 'b' -}}  c", kNone, "abc");
    CHECK_RENDER("a\n  {%- if true %}b{% endif -%}\n  c", kNone, "abc");
    // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it goes.
    CHECK_RENDER("{% for x in [1, 2] %}\n    {% if x %}\n{{ x }}\n    {% endif %}\n{% endfor %}\n", kNone, "1\n2\n");
    // Not after {{ }}: only block tags and comments trim.
    CHECK_RENDER("{{ 'a' }}\nb", kNone, "a\nb");
    CHECK_RENDER("  {# c #}\nx", kNone, "x");
    // `+` turns lstrip_blocks / trim_blocks off for that tag.
    CHECK_RENDER("  {%+ if true %}x{% endif +%}\ny", kNone, "  x\ny");
    // lstrip only when the tag starts its line.
    CHECK_RENDER("a  {% if true %}x{% endif %}", kNone, "a  x");
  }

  void literals_and_operators() {
    CHECK_RENDER("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}",
                 kNone, "7 9 3 -4 2 3.5 1024");
    CHECK_RENDER("{{ 'a' ~ 1 ~ none ~ missing }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ [1] + [2] }}", kNone,
                 "a1None abcd ababab [1, 2]");
    CHECK_RENDER("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 'b' >= 'a' }}", kNone,
                 "True False True True True");
    CHECK_RENDER("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 1 in missing }}", kNone,
                 "True True True True False");
    CHECK_RENDER("{{ not true }} {{ not 0 and 1 }} {{ 0 or 'x' }} {{ '' or [] }} {{ 1 and 2 }}", kNone, "False 1 x [] 2");
    CHECK_RENDER("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} {{ 'yes' if 0 }}|", kNone, "yes no |");
    CHECK_RENDER("{{ 'a' 'b' }} {{ \"q\\\"\\n\\t\\u00e9\" }}", kNone, "ab q\"\n\té");
    CHECK_RENDER("{{ -3 | abs }} {{ - 2 ** 2 }} {{ 1_000 }}", kNone, "3 4 1000");
    // Filters bind tighter than unary minus' operand: -x|abs is (-x)|abs.
  }

  void subscripts_and_slices() {
    nlohmann::ordered_json ctx = {{"s", "héllo"}, {"l", {1, 2, 3, 4, 5}}, {"d", {{"a", {{"b", 7}}}}}};
    CHECK_RENDER("{{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s[:-2] }}", ctx, "é o él olléh hél");
    CHECK_RENDER("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[::2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[10:] }}", ctx,
                 "1 5 [2, 3, 4, 5] [1, 3, 5] [5, 4, 3, 2, 1] [4, 5] []");
    CHECK_RENDER("{{ d.a.b }} {{ d['a']['b'] }} {{ d.a.c }}|{{ l[9] }}|{{ l.0 }}", ctx, "7 7 ||1");
  }

  void statements() {
    nlohmann::ordered_json ctx = {{"items", {"a", "b", "c"}}, {"d", {{"x", 1}, {"y", 2}}}};
    CHECK_RENDER("{% for x in items %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", ctx,
                 "1a,2b,3c");
    CHECK_RENDER("{% for x in items %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.length }}"
                 "{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}",
                 ctx, "03True3b;12False3ac;21False3b;");
    CHECK_RENDER("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}", ctx, "x=1 y=2 ");
    CHECK_RENDER("{% for k in d %}{{ k }}{% endfor %}", ctx, "xy");
    CHECK_RENDER("{% for x in items if x != 'b' %}{{ loop.index }}{{ x }}{% endfor %}", ctx, "1a2c");
    CHECK_RENDER("{% for x in [] %}x{% else %}empty{% endfor %}", ctx, "empty");
    CHECK_RENDER("{% for x in items %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}"
                 "{{ x }}{% endfor %}",
                 ctx, "a");
    CHECK_RENDER("{% for x in items %}{{ loop.cycle('o', 'e') }}{% endfor %}", ctx, "oeo");
    CHECK_RENDER("{% if 0 %}a{% elif 1 %}b{% else %}c{% endif %}{% if 0 %}a{% elif 0 %}b{% else %}c{% endif %}", ctx, "bc");
    // set in a loop does not leak out; a namespace does.
    CHECK_RENDER("{% set n = 0 %}{% set ns = namespace(n=0, seen=false) %}{% for x in items %}{% set n = n + 1 %}"
                 "{% set ns.n = ns.n + 1 %}{% endfor %}{{ n }} {{ ns.n }} {{ ns.seen }}",
                 ctx, "0 3 False");
    CHECK_RENDER("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}", ctx, "12(1, 2)");
    CHECK_RENDER("{% set x %}  inner {{ 1 }}  {% endset %}[{{ x }}]{% set y | trim %}  z  {% endset %}[{{ y }}]", ctx,
                 "[  inner 1  ][z]");
    CHECK_RENDER("{% if true %}{% set inside = 'yes' %}{% endif %}{{ inside }}", ctx, "yes");
    CHECK_RENDER("{% filter upper %}ab{{ 'c' }}{% endfilter %}", ctx, "ABC");
    CHECK_RENDER("{% generation %}kept{% endgeneration %}", ctx, "kept");
  }

  void macros() {
    CHECK_RENDER("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                 "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
                 kNone, "Hi a! Hi b? Hi c.");
    // Macros see template variables; their own sets stay inside.
    CHECK_RENDER("{% set g = 'G' %}{% macro m() %}{% set g = 'local' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}", kNone,
                 "localG");
    CHECK_RENDER("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", kNone, "321");
    CHECK_RENDER("{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, k=2) }}", kNone, "[1]{'k': 2}");
  }

  void filters() {
    nlohmann::ordered_json ctx = {
        {"msgs", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}, {{"role", "user"}, {"content", "V"}}}},
        {"t", "  pad \n"}};
    CHECK_RENDER("[{{ t | trim }}] {{ 'abc' | length }} {{ msgs | count }} {{ missing | length }} {{ 'aB' | upper }}"
                 "{{ 'aB' | lower }} {{ 'hello wORLD' | title }} {{ 'hello wORLD' | capitalize }}",
                 ctx, "[pad] 3 3 0 ABab Hello World Hello world");
    CHECK_RENDER("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}", ctx, "U, V");
    CHECK_RENDER("{{ msgs | rejectattr('role', 'eq', 'user') | list | length }} {{ msgs | map(attribute='role') | unique | list }}",
                 ctx, "1 ['system', 'user']");
    CHECK_RENDER("{{ [1, 0, 2] | select | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ ['a', 'B'] | map('upper') | join }}",
                 ctx, "[1, 2] [2, 4] AB");
    CHECK_RENDER("{{ missing | default('d') }} {{ '' | default('d') }} {{ '' | default('d', true) }} {{ none | d('x') }}", ctx,
                 "d  d None");
    CHECK_RENDER("{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort(reverse=true) }}",
                 ctx, "32 [1, 2, 3] ['c', 'b', 'A']");
    CHECK_RENDER("{{ {'b': 1, 'a': 2} | items | list }} {{ {'b': 1, 'a': 2} | dictsort }}", ctx,
                 "[('b', 1), ('a', 2)] [('a', 2), ('b', 1)]");
    CHECK_RENDER("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ '3' | int + 1 }} {{ 'x' | int }}"
                 " {{ '2.5' | float }} {{ 2.567 | round(2) }} {{ 3 | string ~ 'x' }} {{ [1, 2] | sum }} {{ [1, 3, 2] | max }}",
                 ctx, "a+b+c bba 4 0 2.5 2.57 3x 3 3");
    CHECK_RENDER("{{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ '<a>' | e }}|{{ '%s-%d' | format('x', 3) }}", ctx,
                 "a\n  b|  a\n  b|&lt;a&gt;|x-3");
    CHECK_RENDER("{{ 'abc' | list }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }} {{ 1 | safe }}", ctx,
                 "['a', 'b', 'c'] [2, 1] cba 1");
  }

  void tojson() {
    nlohmann::ordered_json ctx = {{"v", {{"name", "f"}, {"args", {{"x", 1.5}, {"é", "ü\"\n"}}}, {"list", {1, true, nullptr}}, {"e", nlohmann::ordered_json::object()}}}};
    // Python json.dumps: ", " and ": " separators, keys in insertion order, ensure_ascii=False.
    CHECK_RENDER("{{ v | tojson }}", ctx,
                 "{\"name\": \"f\", \"args\": {\"x\": 1.5, \"é\": \"ü\\\"\\n\"}, \"list\": [1, true, null], \"e\": {}}");
    CHECK_RENDER("{{ v.list | tojson(indent=2) }}", ctx, "[\n  1,\n  true,\n  null\n]");
    CHECK_RENDER("{{ {'b': 1, 'a': [1.0]} | tojson(sort_keys=true) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ 'x' | tojson }}",
                 ctx, "{\"a\": [1.0], \"b\": 1} \"\\u00e9\" \"x\"");
    CHECK_RENDER("{{ {'a': 1} | tojson(separators=(',', ':')) }}", ctx, "{\"a\":1}");
    CHECK_ERROR("{{ missing | tojson }}", ctx, "not JSON serializable");
  }

  void tests() {
    nlohmann::ordered_json ctx = {{"d", {{"k", "v"}}}, {"s", "x"}, {"n", nullptr}, {"i", 3}, {"f", 1.5}, {"b", true}};
    CHECK_RENDER("{{ d is defined }}{{ missing is defined }}{{ missing is undefined }}{{ n is none }}{{ s is not none }}", ctx,
                 "TrueFalseTrueTrueTrue");
    CHECK_RENDER("{{ s is string }}{{ d is mapping }}{{ s is iterable }}{{ d is sequence }}{{ i is number }}{{ f is integer }}"
                 "{{ i is integer }}{{ b is boolean }}{{ b is true }}{{ b is false }}",
                 ctx, "TrueTrueTrueTrueTrueFalseTrueTrueTrueFalse");
    CHECK_RENDER("{{ i is odd }}{{ i is even }}{{ i is divisibleby 3 }}{{ i is divisibleby(2) }}{{ s is equalto 'x' }}"
                 "{{ i is eq(3) }}{{ s is in 'xyz' }}{{ i is gt 2 }}",
                 ctx, "TrueFalseTrueFalseTrueTrueTrueTrue");
  }

  void methods() {
    nlohmann::ordered_json ctx = {{"s", "  <think>a</think> b  "}, {"d", {{"k", "v"}}}, {"l", {1, 2, 1}}};
    CHECK_RENDER("[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxaxx'.strip('x') }}]", ctx,
                 "[<think>a</think> b][<think>a</think> b  ][  <think>a</think> b][a]");
    CHECK_RENDER("{{ s.split('</think>')[0].split('<think>')[-1] }} {{ s.split() }} {{ 'a,b,c'.split(',', 1) }}", ctx,
                 "a ['<think>a</think>', 'b'] ['a', 'b,c']");
    CHECK_RENDER("{{ s.strip().startswith('<think>') }}{{ s.endswith(('x', ' ')) }}{{ 'ab'.replace('a', 'c') }}"
                 "{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}{{ 'ab cd'.title() }}{{ 'a'.find('b') }}{{ '{}-{x}'.format(1, x=2) }}",
                 ctx, "TrueTruecbABabAb Cd-11-2");
    CHECK_RENDER("{{ d.get('k') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d.values() | list }}"
                 " {{ l.count(1) }} {{ l.index(2) }} {{ ', '.join(['a', 'b']) }}",
                 ctx, "v None dflt ['k'] ['v'] 2 1 a, b");
  }

  void globals() {
    CHECK_RENDER("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}", kNone,
                 "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
    CHECK_RENDER("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}", kNone, "{'a': 1, 'b': 'x'} 1");
    QCOMPARE(render("{{ strftime_now('%Y') }}").size(), size_t(4));
    // Context variables shadow globals.
    CHECK_RENDER("{{ range }}", (nlohmann::ordered_json{{"range", "mine"}}), "mine");
  }

  void raise_exception_carries_the_message() {
    try {
      render("line one\n{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}");
      QFAIL("expected an error");
    } catch (const grpo::Error& e) {
      QCOMPARE(e.message(), std::string("Conversation roles must alternate user/assistant/user/assistant/..."));
      QCOMPARE(e.context(), std::string("t 2:4"));
    }
  }

  void syntax_errors_name_the_position() {
    CHECK_ERROR("{% if x %}a", kNone, "t 1:12: unexpected end of template: expected {% endif %} to close {% if %} at 1:1");
    CHECK_ERROR("{% for x in y %}{% endif %}", kNone, "t 1:17: unknown tag 'endif'");
    CHECK_ERROR("ab\n  {{ 1 + }}", kNone, "t 2:10: expected an expression, got '}}'");
    CHECK_ERROR("{{ 'abc }}", kNone, "t 1:4: unterminated string literal");
    CHECK_ERROR("{# never closed", kNone, "t 1:1: unclosed comment");
    CHECK_ERROR("{{ a b }}", kNone, "expected '}}', got 'b'");
    CHECK_ERROR("{% include 'x' %}", kNone, "the tag 'include' is not supported");
    CHECK_ERROR("{% foo %}", kNone, "unknown tag 'foo'");
    CHECK_ERROR("{{ x | }}", kNone, "expected a filter name");
    CHECK_ERROR("{% set %}", kNone, "expected a variable name");
    CHECK_ERROR("{{ 1 ? 2 }}", kNone, "t 1:6: unexpected character '?'");
    CHECK_ERROR("{{ (1 }}", kNone, "t 1:8: unexpected '}'");
    CHECK_ERROR("{{ 99999999999999999999 }}", kNone, "too large");
  }

  void runtime_errors() {
    CHECK_ERROR("{{ missing.attr }}", kNone, "t 1:4: 'missing' is undefined");
    CHECK_ERROR("{{ d.nope.deeper }}", (nlohmann::ordered_json{{"d", {{"k", 1}}}}), "'dict object' has no attribute 'nope'");
    CHECK_ERROR("{{ 'a' + 1 }}", kNone, "can only concatenate str (not \"int\") to str");
    CHECK_ERROR("{{ 1 / 0 }}", kNone, "division by zero");
    CHECK_ERROR("{{ 1 < 'a' }}", kNone, "'<' not supported between instances of 'int' and 'str'");
    CHECK_ERROR("{{ x | nofilter }}", kNone, "no filter named 'nofilter'");
    CHECK_ERROR("{{ x is notatest }}", kNone, "no test named 'notatest'");
    CHECK_ERROR("{{ 'x'() }}", kNone, "'str' object is not callable");
    CHECK_ERROR("{% for x in 1 %}{% endfor %}", kNone, "'int' object is not iterable");
    CHECK_ERROR("{% set a, b = [1] %}", kNone, "not enough values to unpack");
    CHECK_ERROR("{% set s = 'x' %}{% set s.attr = 1 %}", kNone, "cannot assign attribute on non-namespace object");
    // The sandbox: lists and dicts cannot be modified.
    CHECK_ERROR("{% set l = [1] %}{{ l.append(2) }}", kNone, "access to attribute 'append' of 'list' object is unsafe");
    CHECK_ERROR("{% set d = {} %}{{ d.update({'a': 1}) }}", kNone, "is unsafe");
    CHECK_ERROR("{{ 9223372036854775807 + 1 }}", kNone, "integer overflow");
  }

  void limits_stop_hostile_templates() {
    // Deep nesting in the parser.
    std::string deep = "{{ ";  // built with += (GCC 12 warns falsely on "literal" + std::string here)
    deep.append(5000, '(').append("1").append(5000, ')').append(" }}");
    CHECK_ERROR(deep, kNone, "nesting deeper than 64 levels");
    std::string nots = "{{ " + [] { std::string s; for (int i = 0; i < 1000; ++i) s += "not "; return s; }() + "1 }}";
    CHECK_ERROR(nots, kNone, "nesting deeper than 64 levels");
    std::string blocks;
    for (int i = 0; i < 200; ++i) blocks += "{% if 1 %}";
    CHECK_ERROR(blocks, kNone, "nesting deeper than 64 levels");
    // Long operator chains are deep trees too.
    std::string chain = "{{ 1";
    for (int i = 0; i < 100000; ++i) chain += " + 1";
    CHECK_ERROR(chain + " }}", kNone, "expression nested deeper than 256 levels");
    std::string filters = "{{ 'x'";
    for (int i = 0; i < 5000; ++i) filters += " | trim";
    CHECK_ERROR(filters + " }}", kNone, "expression nested deeper than 256 levels");
    // Recursion through macros that nest expressions: bounded by the render depth.
    Limits shallow;
    shallow.max_render_depth = 50;
    QVERIFY(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", kNone, shallow).find("rendering nested deeper than 50") !=
            std::string::npos);
    // Huge loops.
    CHECK_ERROR("{% for i in range(100000000) %}{% endfor %}", kNone, "exceeds the limit of 1000000");
    CHECK_ERROR("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
                kNone, "more than 1000000 loop iterations");
    // Output size.
    Limits small;
    small.max_output_bytes = 1000;
    QVERIFY(error_of("{% for i in range(200) %}0123456789{% endfor %}", kNone, small).find("exceeds the limit of 1000 bytes") !=
            std::string::npos);
    CHECK_ERROR("{{ 'x' * 100000000 }}", kNone, "exceeds the limit of 16777216 bytes");
    CHECK_ERROR("{% set s = 'xxxxxxxxxx' %}{% for i in range(30) %}{% set s = s ~ s %}{% endfor %}", kNone,
                "exceeds the limit of 16777216 bytes");
    // Recursive macros.
    CHECK_ERROR("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", kNone, "macro calls nested deeper than 32 (recursion?)");
    // Template size.
    Limits tiny;
    tiny.max_template_bytes = 10;
    QVERIFY(error_of("{{ 'a long template' }}", kNone, tiny).find("exceeds the limit of 10 bytes") != std::string::npos);
    // Not UTF-8.
    CHECK_ERROR(std::string("{{ '\xff' }}"), kNone, "not valid UTF-8");
  }
};

QTEST_GUILESS_MAIN(TestJinja)
#include "test_jinja.moc"
