#include "chat/parser.h"

#include "util/error.h"

namespace sluice::chat {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    Body b = parse_body({});
    if (cur().type != T::Eof) fail_here("unexpected '" + cur().text + "'");
    return b;
  }

 private:
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  [[noreturn]] void fail_here(const std::string& what) const {
    throw Error("chat template: line " + std::to_string(cur().line) + ": " + what);
  }
  bool is_op(const char* op) const { return cur().type == T::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::Name && cur().text == n; }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool accept_name(const char* n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) fail_here(std::string("expected '") + op + "'");
  }
  std::string expect_name() {
    if (cur().type != T::Name) fail_here("expected a name");
    return t_[p_++].text;
  }
  void expect_block_end() {
    if (cur().type != T::BlockEnd) fail_here("expected end of tag, got '" + cur().text + "'");
    ++p_;
  }
  // One level of parser recursion for as long as it lives.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.nest_ > kMaxTemplateNesting) p_.fail_here(too_deep());
    }
    ~Nest() { --p_.nest_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };
  static std::string too_deep() {
    return "the template nests deeper than " + std::to_string(kMaxTemplateNesting) + " levels";
  }
  // Sets e's height from its operands (built in loops, a chain like
  // `a ~ b ~ c ~ ...` grows without recursion) and bounds it.
  ExprP sized(ExprP e) {
    for (const auto& x : e->a)
      if (x && x->height >= e->height) e->height = x->height + 1;
    if (e->height > kMaxTemplateNesting) fail_here(too_deep());
    return e;
  }

  ExprP mk(Expr::K k) {
    auto e = std::make_shared<Expr>();
    e->k = k;
    e->line = cur().line;
    return e;
  }

  // Parses nodes until a block tag whose keyword is in `ends` (left unconsumed:
  // p_ points at that keyword) or end of input.
  Body parse_body(const std::vector<std::string>& ends) {
    const Nest nest(*this);
    Body body;
    for (;;) {
      const Token& tk = cur();
      if (tk.type == T::Eof) {
        if (!ends.empty()) fail_here("missing {% " + ends.back() + " %}");
        return body;
      }
      if (tk.type == T::Text) {
        auto n = std::make_shared<Node>();
        n->k = Node::K::Text;
        n->text = tk.text;
        body.push_back(n);
        ++p_;
      } else if (tk.type == T::VarBegin) {
        ++p_;
        auto n = std::make_shared<Node>();
        n->k = Node::K::Output;
        n->line = tk.line;
        n->expr = parse_expr();
        if (cur().type != T::VarEnd) fail_here("expected '}}'");
        ++p_;
        body.push_back(n);
      } else if (tk.type == T::BlockBegin) {
        const std::string kw = peek().type == T::Name ? peek().text : "";
        for (const auto& e : ends)
          if (kw == e) {
            ++p_;
            return body;
          }
        ++p_;
        body.push_back(parse_stmt());
      } else {
        fail_here("unexpected token");
      }
    }
  }

  NodeP parse_stmt() {
    auto n = std::make_shared<Node>();
    n->line = cur().line;
    const std::string kw = expect_name();
    if (kw == "if") {
      n->k = Node::K::If;
      ExprP c = parse_expr();
      expect_block_end();
      for (;;) {
        Body b = parse_body({"elif", "else", "endif"});
        n->branches.emplace_back(c, std::move(b));
        const std::string e = expect_name();
        if (e == "elif") {
          c = parse_expr();
          expect_block_end();
        } else if (e == "else") {
          expect_block_end();
          c = nullptr;
        } else {
          expect_block_end();
          break;
        }
        if (!c) {
          n->branches.emplace_back(nullptr, parse_body({"endif"}));
          expect_name();
          expect_block_end();
          break;
        }
      }
    } else if (kw == "for") {
      n->k = Node::K::For;
      n->targets.push_back(expect_name());
      while (accept_op(",")) n->targets.push_back(expect_name());
      if (!accept_name("in")) fail_here("expected 'in'");
      n->expr = parse_or();  // no ternary here: `if` filters the loop
      if (accept_name("if")) n->cond = parse_expr();
      if (accept_name("recursive")) fail_here("recursive loops are not supported");
      expect_block_end();
      n->body = parse_body({"else", "endfor"});
      if (t_[p_ - 0].text == "else") {
        ++p_;
        expect_block_end();
        n->else_body = parse_body({"endfor"});
      }
      ++p_;
      expect_block_end();
    } else if (kw == "set") {
      n->targets.push_back(expect_name());
      if (accept_op(".")) n->attr = expect_name();
      while (accept_op(",")) n->targets.push_back(expect_name());
      if (accept_op("=")) {
        n->k = Node::K::Set;
        n->expr = parse_tuple_or_expr();
        expect_block_end();
      } else {
        n->k = Node::K::SetBlock;
        if (is_op("|")) n->expr = parse_filter_chain(nullptr);
        expect_block_end();
        n->body = parse_body({"endset"});
        ++p_;
        expect_block_end();
      }
    } else if (kw == "macro") {
      n->k = Node::K::Macro;
      n->text = expect_name();
      expect_op("(");
      while (!accept_op(")")) {
        n->params.push_back(expect_name());
        n->defaults.push_back(accept_op("=") ? parse_expr() : nullptr);
        if (!is_op(")")) expect_op(",");
      }
      expect_block_end();
      n->body = parse_body({"endmacro"});
      ++p_;
      expect_block_end();
    } else if (kw == "filter") {
      n->k = Node::K::FilterBlock;
      n->expr = parse_filter_chain(nullptr, /*first_has_bar=*/false);
      expect_block_end();
      n->body = parse_body({"endfilter"});
      ++p_;
      expect_block_end();
    } else if (kw == "generation") {  // transformers' AssistantTracker: only marks a span
      n->k = Node::K::Scope;
      expect_block_end();
      n->body = parse_body({"endgeneration"});
      ++p_;
      expect_block_end();
    } else if (kw == "break" || kw == "continue") {
      n->k = kw == "break" ? Node::K::Break : Node::K::Continue;
      expect_block_end();
    } else {
      --p_;
      fail_here("unknown tag '" + kw + "'");
    }
    return n;
  }

  ExprP parse_tuple_or_expr() {
    ExprP first = parse_expr();
    if (!is_op(",")) return first;
    auto t = mk(Expr::K::Tuple);
    t->a.push_back(first);
    while (accept_op(",")) {
      if (cur().type == T::BlockEnd) break;
      t->a.push_back(parse_expr());
    }
    return sized(t);
  }

  ExprP parse_expr() {
    const Nest nest(*this);
    ExprP e = parse_or();
    while (is_name("if")) {
      ++p_;
      auto c = mk(Expr::K::Cond);
      c->a.push_back(e);
      c->a.push_back(parse_or());
      c->a.push_back(accept_name("else") ? parse_expr() : nullptr);
      e = sized(c);
    }
    return e;
  }
  ExprP binary(const std::string& op, ExprP l, ExprP r) {
    auto b = mk(Expr::K::Binary);
    b->name = op;
    b->a = {std::move(l), std::move(r)};
    return sized(b);
  }
  ExprP parse_or() {
    ExprP e = parse_and();
    while (accept_name("or")) e = binary("or", e, parse_and());
    return e;
  }
  ExprP parse_and() {
    ExprP e = parse_not();
    while (accept_name("and")) e = binary("and", e, parse_not());
    return e;
  }
  ExprP parse_not() {
    if (is_name("not")) {
      const Nest nest(*this);
      ++p_;
      auto u = mk(Expr::K::Unary);
      u->name = "not";
      u->a.push_back(parse_not());
      return sized(u);
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    ExprP e = parse_math1();
    for (;;) {
      if (cur().type == T::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        const std::string op = t_[p_++].text;
        e = binary(op, e, parse_math1());
      } else if (is_name("in")) {
        ++p_;
        e = binary("in", e, parse_math1());
      } else if (is_name("not") && peek().type == T::Name && peek().text == "in") {
        p_ += 2;
        e = binary("not in", e, parse_math1());
      } else {
        return e;
      }
    }
  }
  ExprP parse_math1() {
    ExprP e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, parse_concat());
    }
    return e;
  }
  ExprP parse_concat() {
    ExprP e = parse_math2();
    while (accept_op("~")) e = binary("~", e, parse_math2());
    return e;
  }
  ExprP parse_math2() {
    ExprP e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, parse_pow());
    }
    return e;
  }
  ExprP parse_pow() {
    ExprP e = parse_unary(true);
    while (accept_op("**")) e = binary("**", e, parse_unary(true));
    return e;
  }
  ExprP parse_unary(bool with_filter) {
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const Nest nest(*this);
      auto u = mk(Expr::K::Unary);
      u->name = t_[p_++].text;
      u->a.push_back(parse_unary(false));
      e = sized(u);
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(e) : e;
  }
  ExprP parse_primary() {
    const Token& tk = cur();
    if (tk.type == T::Name) {
      ++p_;
      if (tk.text == "true" || tk.text == "True") return lit(Value::boolean(true));
      if (tk.text == "false" || tk.text == "False") return lit(Value::boolean(false));
      if (tk.text == "none" || tk.text == "None") return lit(Value::none());
      auto n = mk(Expr::K::Name);
      n->name = tk.text;
      return n;
    }
    if (tk.type == T::String) {
      std::string s;
      while (cur().type == T::String) s += t_[p_++].text;  // adjacent literals concatenate
      return lit(Value::string(s));
    }
    if (tk.type == T::Int) { ++p_; return lit(Value::integer(tk.ival)); }
    if (tk.type == T::Float) { ++p_; return lit(Value::number(tk.fval)); }
    if (accept_op("(")) {
      if (accept_op(")")) return mk(Expr::K::Tuple);
      ExprP e = parse_expr();
      if (is_op(",")) {
        auto t = mk(Expr::K::Tuple);
        t->a.push_back(e);
        while (accept_op(",")) {
          if (is_op(")")) break;
          t->a.push_back(parse_expr());
        }
        e = sized(t);
      }
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto l = mk(Expr::K::List);
      while (!accept_op("]")) {
        l->a.push_back(parse_expr());
        if (!is_op("]")) expect_op(",");
      }
      return sized(l);
    }
    if (accept_op("{")) {
      auto d = mk(Expr::K::Dict);
      while (!accept_op("}")) {
        d->a.push_back(parse_expr());
        expect_op(":");
        d->a.push_back(parse_expr());
        if (!is_op("}")) expect_op(",");
      }
      return sized(d);
    }
    fail_here("unexpected '" + tk.text + "'");
  }
  ExprP lit(Value v) {
    auto e = mk(Expr::K::Lit);
    e->lit = std::move(v);
    return e;
  }
  void parse_args(ExprP& call) {  // after '('
    while (!accept_op(")")) {
      if (cur().type == T::Name && peek().type == T::Op && peek().text == "=") {
        call->kw.push_back(t_[p_].text);
        p_ += 2;
      } else {
        call->kw.push_back("");
      }
      call->a.push_back(parse_expr());
      if (!is_op(")")) expect_op(",");
    }
  }
  ExprP parse_postfix(ExprP e) {
    for (;;) {
      if (accept_op(".")) {
        auto a = mk(Expr::K::Attr);
        if (cur().type == T::Int) a->name = std::to_string(t_[p_++].ival);
        else a->name = expect_name();
        a->a.push_back(e);
        e = sized(a);
      } else if (accept_op("[")) {
        ExprP idx[3];
        bool slice = false;
        for (int part = 0; part < 3; ++part) {
          if (!is_op(":") && !is_op("]")) idx[part] = parse_expr();
          if (part < 2 && accept_op(":")) {
            slice = true;
            continue;
          }
          break;
        }
        // `x[]` is a syntax error in jinja2; here it would leave a null index.
        if (!slice && !idx[0]) fail_here("expected an index or a slice inside []");
        expect_op("]");
        auto s = mk(slice ? Expr::K::Slice : Expr::K::Item);
        s->a.push_back(e);
        if (slice) s->a.insert(s->a.end(), {idx[0], idx[1], idx[2]});
        else s->a.push_back(idx[0]);
        e = sized(s);
      } else if (accept_op("(")) {
        auto c = mk(Expr::K::Call);
        c->a.push_back(e);
        c->kw.push_back("");
        parse_args(c);
        e = sized(c);
      } else {
        return e;
      }
    }
  }
  // `| name(args) | name ...` applied to `operand`.
  ExprP parse_filter_chain(ExprP operand, bool first_has_bar = true) {
    bool first = true;
    while ((first && !first_has_bar) || accept_op("|")) {
      first = false;
      auto f = mk(Expr::K::Filter);
      f->name = expect_name();
      while (accept_op(".")) f->name += "." + expect_name();
      f->a.push_back(operand);
      f->kw.push_back("");
      if (accept_op("(")) parse_args(f);
      operand = sized(f);
    }
    return operand;
  }
  ExprP parse_filter_expr(ExprP e) {
    for (;;) {
      if (is_op("|")) {
        e = parse_filter_chain(e);
        e = parse_postfix(e);
      } else if (is_name("is")) {
        ++p_;
        auto t = mk(Expr::K::Test);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->a.push_back(e);
        t->kw.push_back("");
        if (accept_op("(")) {
          parse_args(t);
        } else if ((cur().type == T::Name || cur().type == T::String || cur().type == T::Int ||
                    cur().type == T::Float || is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and") || is_name("if") || is_name("in") || is_name("is") || is_name("not"))) {
          ExprP arg = parse_postfix(parse_primary());
          t->a.push_back(arg);
          t->kw.push_back("");
        }
        e = sized(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int nest_ = 0;  // current recursion depth (Nest)
};

}  // namespace

Body parse_template(const std::string& source, const LexOptions& opt) { return Parser(lex(source, opt)).parse_all(); }

}  // namespace sluice::chat
