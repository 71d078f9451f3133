// The chat-template engine's bounds (RenderLimits, kMaxTemplateNesting,
// kMaxValueNesting) and the defects chat_template_fuzz and its probes found:
// each template below crashed, hung, ran out of memory or overflowed the
// stack, or hit undefined behaviour (UBSan) before its fix. Every one now
// renders what Python's jinja2 renders or fails with one sluice::Error
// naming the line and the limit.
#include <gtest/gtest.h>

#include <string>

#include "chat/parser.h"
#include "chat/template.h"
#include "chat/value.h"
#include "test_support.h"

namespace sluice::chat {
namespace SLUICE_TEST_FILE {

using test::error_of;

std::string render(const std::string& src, const RenderLimits& limits = {}) {
  return Template(src).render({}, limits);
}

// The error message of rendering `src`, "(no error)" if it renders.
std::string fails(const std::string& src, const RenderLimits& limits = {}) {
  return error_of([&] { render(src, limits); });
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

#define EXPECT_FAILS_WITH(src, what) \
  EXPECT_NE(fails(src).find(what), std::string::npos) << fails(src)

TEST(ChatLimits, IntegerArithmeticOverflowIsAnErrorNotAWrap) {
  EXPECT_FAILS_WITH("{{ 9223372036854775807 + 1 }}", "line 1: integer overflow in +");
  EXPECT_FAILS_WITH("{{ -9223372036854775807 - 2 }}", "integer overflow in -");
  EXPECT_FAILS_WITH("{{ 10**18 * 10 }}", "integer overflow in *");
  EXPECT_FAILS_WITH("{{ 3 ** 40 }}", "integer overflow in **");
  EXPECT_FAILS_WITH("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow in //");
  EXPECT_FAILS_WITH("{{ -(-9223372036854775807 - 1) }}", "integer overflow in unary -");
  EXPECT_FAILS_WITH("{{ (-9223372036854775807 - 1)|abs }}", "abs: integer overflow");
  // In range, exact; a huge exponent of -1 is square-and-multiply, not a loop.
  EXPECT_EQ(render("{{ 2 ** 62 }}|{{ (-2) ** 63 }}|{{ (-1) ** 9223372036854775807 }}|{{ 0 ** 0 }}|"
                   "{{ (-9223372036854775807 - 1) % -1 }}"),
            "4611686018427387904|-9223372036854775808|-1|1|0");
}

TEST(ChatLimits, FloatToIntOutsideInt64IsAnError) {
  EXPECT_FAILS_WITH("{{ (1e308 * 10)|int }}", "int: inf does not fit a 64-bit integer");
  EXPECT_FAILS_WITH("{{ 1e19|int }}", "int: 1e+19 does not fit");
  EXPECT_FAILS_WITH("{{ '-1e400'|int }}", "does not fit");
  EXPECT_EQ(render("{{ (2**62)|float|int }}|{{ -2.5|int }}|{{ 'nan'|int(7) }}"),
            "4611686018427387904|-2|7");
}

TEST(ChatLimits, HugeCountsAreRefusedBeforeAllocating) {
  EXPECT_FAILS_WITH("{{ 'ab' * 9223372036854775807 }}",
                    "repeating 2 bytes 9223372036854775807 times passes the limit");
  EXPECT_FAILS_WITH("{{ [1] * 10**9 }}",
                    "repeating 1 items 1000000000 times passes the limit of 1048576");
  EXPECT_FAILS_WITH("{{ range(9223372036854775807)|length }}",
                    "range() of 9223372036854775807 items passes the limit of 1048576");
  EXPECT_FAILS_WITH("{{ range(-9223372036854775807 - 1, 9223372036854775807)|length }}",
                    "range() of 18446744073709551615 items");
  EXPECT_FAILS_WITH("{{ 'x'|indent(10**12) }}",
                    "indent: width 1000000000000 is over the limit of 65536");
  EXPECT_FAILS_WITH("{{ [1]|tojson(indent=10**12) }}", "tojson: width");
  // Python's semantics where they are cheap: a negative width is no indent,
  // an empty range is empty, a negative repeat is empty.
  EXPECT_EQ(render("[{{ 'a\nb'|indent(-5) }}]{{ range(0, 10, -9223372036854775807 - 1)|list }}{{ "
                   "'x' * -3 }}"),
            "[a\nb][]");
  EXPECT_EQ(render("{{ range(9223372036854775806, 9223372036854775807)|list }}"),
            "[9223372036854775806]");
}

TEST(ChatLimits, FormatFieldPastTheArgumentsIsAnError) {
  // std::stoul threw std::out_of_range (not a sluice::Error) on these digits.
  EXPECT_FAILS_WITH("{{ '{99999999999999999999}'.format(1) }}",
                    "format: no argument for field '{99999999999999999999}'");
  EXPECT_EQ(render("{{ '{1}{0}'.format('a', 'b') }}"), "ba");
}

TEST(ChatLimits, StringsThatMultiplyStopAtTheOutputLimit) {
  RenderLimits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(
      fails("{{ range(100)|join('x' * 100) }}", small).find("join: the string passes 1000 bytes"),
      std::string::npos);
  EXPECT_NE(
      fails("{{ ('{0}' * 50).format('y' * 100) }}", small).find("format: the string passes 1000"),
      std::string::npos);
  EXPECT_NE(
      fails("{{ ('\n' * 100)|indent(50, true, true) }}", small).find("indent: the string passes"),
      std::string::npos);
  EXPECT_NE(
      fails("{{ ('a' * 100)|replace('', 'b' * 100) }}", small).find("replace: the string passes"),
      std::string::npos);
  EXPECT_NE(fails("{{ [range(60)]|tojson(indent=40) }}", small).find("tojson: the string passes"),
            std::string::npos);
  EXPECT_NE(fails("{% set ns = namespace(s='ab') %}{% for i in range(20) %}{% set ns.s = ns.s ~ "
                  "ns.s %}{% endfor %}",
                  small)
                .find("line 1: a string passes 1000 bytes"),
            std::string::npos);
  EXPECT_NE(fails("{% for i in range(30) %}{{ 'x' * 40 }}{% endfor %}", small)
                .find("the output passes 1000 bytes"),
            std::string::npos);
  EXPECT_EQ(render("{% for i in range(20) %}{{ 'x' * 40 }}{% endfor %}", small),
            std::string(800, 'x'));
}

TEST(ChatLimits, RunawayLoopsStopAtTheStepLimit) {
  RenderLimits small;
  small.max_steps = 10000;
  // Empty loop bodies count too: 10^6 iterations of nothing used to run on.
  EXPECT_NE(
      fails("{% for i in range(1000) %}\n{% for j in range(1000) %}{% endfor %}{% endfor %}", small)
          .find("line 2: the template ran more than 10000 steps"),
      std::string::npos);
  EXPECT_EQ(
      render("{% for i in range(100) %}{% for j in range(10) %}{% endfor %}{% endfor %}ok", small),
      "ok");
}

TEST(ChatLimits, RecursionStopsAtTheDepthLimit) {
  EXPECT_FAILS_WITH("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(1) }}",
                    "nest deeper than 500 (runaway recursion?)");
  // A recursion that ends is fine.
  EXPECT_EQ(
      render("{% macro f(n) %}{% if n %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}"),
      "54321");
}

TEST(ChatLimits, DeepTemplateNestingIsASyntaxErrorNotAStackOverflow) {
  const std::string deep = "nests deeper than " + std::to_string(kMaxTemplateNesting) + " levels";
  for (const std::string& src :
       {"{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}",
        "{{ " + repeat("not ", 5000) + "1 }}", "{{ " + repeat("-", 5000) + "1 }}",
        "{{ 1" + repeat(" ~ 1", 20000) + " }}", "{{ x" + repeat(".a", 20000) + " }}",
        "{{ x" + repeat("|trim", 20000) + " }}",
        "{{ " + repeat("[", 5000) + repeat("]", 5000) + " }}",
        repeat("{% if 1 %}", 3000) + "x" + repeat("{% endif %}", 3000)})
    EXPECT_NE(fails(src).find(deep), std::string::npos) << src.substr(0, 40) << ": " << fails(src);
  // Up to the bound, it parses and runs.
  EXPECT_EQ(render("{{ " + repeat("(", 90) + "1" + repeat(")", 90) + " }}"), "1");
  EXPECT_EQ(render(repeat("{% if 1 %}", 90) + "x" + repeat("{% endif %}", 90)), "x");
}

TEST(ChatLimits, ANamespaceThatHoldsItselfFailsCleanly) {
  // Each recursed without end (stack overflow) before: tojson and == walk
  // into the cycle; printing a namespace does not.
  const std::string self = "{% set ns = namespace() %}{% set ns.me = ns %}";
  EXPECT_EQ(render(self + "{{ ns }}|{{ ns.me.me.me is defined }}"), "<Namespace 1>|True");
  EXPECT_FAILS_WITH(self + "{{ ns|tojson }}",
                    "tojson: nested deeper than 256 levels (circular reference?)");
  EXPECT_FAILS_WITH(self + "{% set other = namespace(me=ns) %}{{ ns == other }}",
                    "==: values nested deeper than 256");
  // A cycle of two; the render frees it (under ASan, LeakSanitizer checks).
  EXPECT_EQ(render("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = b %}{{ "
                   "a.y.x.y.x is defined }}"),
            "True");
}

TEST(ChatLimits, ValuesBuiltDeeperThanTheNestingBoundAreRefused) {
  // 100k nested lists, then printed and destroyed: a stack overflow before.
  EXPECT_FAILS_WITH(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor "
      "%}"
      "{{ ns.l }}",
      "lists and dicts nest deeper than 256 levels");
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% set ns.l = [ns.l] %}{% "
                   "endfor %}{{ ns.l }}"),
            "[[[[]]]]");
}

}  // namespace
}  // namespace sluice::chat

// This file's macros end with it (tests/CMakeLists.txt: unity build).
#undef EXPECT_FAILS_WITH
