#include "chat/template.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "chat/builtins.h"
#include "chat/parser.h"
#include "util/error.h"

namespace sluice::chat {
namespace {

using K = Value::Kind;
using Frame = std::map<std::string, Value>;

[[noreturn]] void fail_at(int line, const std::string& what) {
  throw Error("chat template: line " + std::to_string(line) + ": " + what);
}

enum class Flow { Normal, Break, Continue };

class Interpreter {
 public:
  ~Interpreter() {
    for (const auto& d : *namespaces_) d->clear();
  }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  Interpreter(const Dict& vars, const RenderLimits& limits) : limits_(limits) {
    auto root = std::make_shared<Frame>();
    for (const auto& [k, v] : vars) (*root)[k] = v;
    install_globals(*root);
    frames_.push_back(root);
  }

  void exec_body(const Body& body, std::string& out) {
    if (exec(body, out) != Flow::Normal) throw Error("chat template: 'break'/'continue' outside a loop");
  }

 private:
  Flow exec(const Body& body, std::string& out) {
    for (const auto& n : body) {
      const Flow f = exec_node(*n, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  // Counts one step and one level of nesting for as long as it lives: every
  // statement and expression passes through one, so a runaway loop, a
  // recursive macro or a deeply nested expression meets a limit.
  class Enter {
   public:
    Enter(Interpreter& in, int line) : in_(in) {
      in_.count_step(line);
      if (++in_.depth_ > in_.limits_.max_depth) {
        --in_.depth_;
        fail_at(line, "expressions, blocks and macro calls nest deeper than " +
                          std::to_string(in_.limits_.max_depth) + " (runaway recursion?)");
      }
    }
    ~Enter() { --in_.depth_; }
    Enter(const Enter&) = delete;
    Enter& operator=(const Enter&) = delete;

   private:
    Interpreter& in_;
  };

  void count_step(int line) {
    if (++steps_ > limits_.max_steps)
      fail_at(line, "the template ran more than " + std::to_string(limits_.max_steps) +
                        " steps (a runaway loop?)");
  }

  void check_output(const std::string& out, int line) const {
    if (out.size() > limits_.max_output_bytes)
      fail_at(line, "the output passes " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
  // Any one string or list a template builds stays within the limits.
  void check_value(const Value& v, int line) const {
    if (v.kind == K::String && v.s.size() > limits_.max_output_bytes)
      fail_at(line, "a string passes " + std::to_string(limits_.max_output_bytes) + " bytes");
    if (v.kind == K::List && v.list->size() > limits_.max_items)
      fail_at(line, "a list passes " + std::to_string(limits_.max_items) + " items");
    if (v.nest > kMaxValueNesting)
      fail_at(line,
              "lists and dicts nest deeper than " + std::to_string(kMaxValueNesting) + " levels");
  }

  Flow exec_node(const Node& n, std::string& out) {
    const Enter enter(*this, n.line);
    const Flow f = exec_node_inner(n, out);
    check_output(out, n.line);
    return f;
  }

  Flow exec_node_inner(const Node& n, std::string& out) {
    switch (n.k) {
      case Node::K::Text: out += n.text; break;
      case Node::K::Output: out += to_str(eval(*n.expr)); break;
      case Node::K::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond).truthy()) return exec(body, out);
        break;
      case Node::K::For: return exec_for(n, out);
      case Node::K::Set: assign(n, eval(*n.expr)); break;
      case Node::K::SetBlock: {
        std::string captured;
        exec_body(n.body, captured);
        Value v = Value::string(captured);
        if (n.expr) v = apply_chain(*n.expr, v);
        assign(n, v);
        break;
      }
      case Node::K::Macro: define_macro(n); break;
      case Node::K::FilterBlock: {
        std::string captured;
        if (Flow f = exec(n.body, captured); f != Flow::Normal) return f;
        out += to_str(apply_chain(*n.expr, Value::string(captured)));
        break;
      }
      case Node::K::Scope: {  // a call block: its own scope
        frames_.push_back(std::make_shared<Frame>());
        std::string captured;
        exec_body(n.body, captured);
        frames_.pop_back();
        out += captured;
        break;
      }
      case Node::K::Break: return Flow::Break;
      case Node::K::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  // A filter chain parsed with a null innermost operand, applied to `v`.
  Value apply_chain(const Expr& chain, const Value& v) {
    if (!chain.a[0]) return apply_filter(chain.name, v, eval_args(chain, 1));
    const Value inner = apply_chain(*chain.a[0], v);
    return apply_filter(chain.name, inner, eval_args(chain, 1));
  }

  void set_var(const std::string& name, Value v) { (*frames_.back())[name] = std::move(v); }

  void assign(const Node& n, const Value& v) {
    if (!n.attr.empty()) {
      Value ns = lookup(n.targets[0]);
      if (!ns.is_namespace) fail_at(n.line, "cannot assign attribute on non-namespace object");
      ns.set(n.attr, v);
      return;
    }
    unpack(n.targets, v, n.line);
  }
  void unpack(const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      set_var(targets[0], v);
      return;
    }
    const List items = iterate(v);
    if (items.size() != targets.size())
      fail_at(line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()));
    for (size_t k = 0; k < targets.size(); ++k) set_var(targets[k], items[k]);
  }

  Flow exec_for(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    if (seq.kind != K::Undefined && seq.kind != K::List && seq.kind != K::Dict && seq.kind != K::String)
      fail_at(n.line, "'" + type_name(seq) + "' object is not iterable");
    List items = iterate(seq);
    if (n.cond) {  // `for x in y if cond`: the loop sees only the kept items
      List kept;
      for (const auto& it : items) {
        frames_.push_back(std::make_shared<Frame>());
        unpack(n.targets, it, n.line);
        if (eval(*n.cond).truthy()) kept.push_back(it);
        frames_.pop_back();
      }
      items = std::move(kept);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      count_step(n.line);  // an iteration is a step even when its body is empty
      // jinja2 gives every iteration a fresh scope: a `set` in the body is
      // seen neither after the loop nor by the next iteration.
      frames_.push_back(std::make_shared<Frame>());
      Value loop = Value::make_dict({
          {"index", Value::integer(k + 1)},
          {"index0", Value::integer(k)},
          {"revindex", Value::integer(len - k)},
          {"revindex0", Value::integer(len - k - 1)},
          {"first", Value::boolean(k == 0)},
          {"last", Value::boolean(k == len - 1)},
          {"length", Value::integer(len)},
          {"depth", Value::integer(1)},
          {"depth0", Value::integer(0)},
          {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("previtem")},
          {"nextitem", k + 1 < len ? items[static_cast<size_t>(k + 1)] : Value::undefined("nextitem")},
          {"cycle", Value::function([k](Args& a) {
             if (a.pos.empty()) throw Error("chat template: loop.cycle: no items given");
             return a.pos[static_cast<size_t>(k) % a.pos.size()];
           })},
      });
      set_var("loop", loop);
      unpack(n.targets, items[static_cast<size_t>(k)], n.line);
      const Flow f = exec(n.body, out);
      frames_.pop_back();
      if (f == Flow::Break) break;
    }
    if (len == 0) return exec(n.else_body, out);
    return Flow::Normal;
  }

  void define_macro(const Node& n) {
    const Node* def = &n;
    Interpreter* self = this;
    set_var(n.text, Value::function([self, def](Args& args) {
      auto frame = std::make_shared<Frame>();
      size_t next = 0;
      for (size_t k = 0; k < def->params.size(); ++k) {
        const Value* v = nullptr;
        for (const auto& [kn, kv] : args.kw)
          if (kn == def->params[k]) v = &kv;
        if (!v && next < args.pos.size()) v = &args.pos[next++];
        if (v) (*frame)[def->params[k]] = *v;
        else if (def->defaults[k]) (*frame)[def->params[k]] = self->eval(*def->defaults[k]);
        else (*frame)[def->params[k]] = Value::undefined(def->params[k]);
      }
      if (next < args.pos.size()) fail_at(def->line, "macro '" + def->text + "' takes not more than " +
                                                        std::to_string(def->params.size()) + " argument(s)");
      std::vector<std::shared_ptr<Frame>> saved = {self->frames_[0], frame};
      std::swap(saved, self->frames_);
      std::string out;
      try {
        self->exec_body(def->body, out);
      } catch (...) {
        std::swap(saved, self->frames_);
        throw;
      }
      std::swap(saved, self->frames_);
      return Value::string(out);
    }));
  }

  Value lookup(const std::string& name) {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto f = (*it)->find(name);
      if (f != (*it)->end()) return f->second;
    }
    return Value::undefined(name);
  }

  Args eval_args(const Expr& e, size_t from) {
    Args args;
    for (size_t k = from; k < e.a.size(); ++k) {
      if (e.kw[k].empty()) args.pos.push_back(eval(*e.a[k]));
      else args.kw.emplace_back(e.kw[k], eval(*e.a[k]));
    }
    return args;
  }

  Value eval(const Expr& e) {
    const Enter enter(*this, e.line);
    try {
      Value v = eval_inner(e);
      check_value(v, e.line);
      return v;
    } catch (const Error& err) {
      const std::string msg = err.what();
      if (msg.rfind("chat template: line ", 0) == 0 || msg.rfind("chat template: raise_exception", 0) == 0) throw;
      fail_at(e.line, msg.substr(msg.rfind("chat template: ", 0) == 0 ? 15 : 0));
    }
  }

  Value eval_inner(const Expr& e) {
    switch (e.k) {
      case Expr::K::Lit: return e.lit;
      case Expr::K::Name: return lookup(e.name);
      case Expr::K::List:
      case Expr::K::Tuple: {
        List l;
        for (const auto& x : e.a) l.push_back(eval(*x));
        return e.k == Expr::K::Tuple ? Value::tuple(std::move(l)) : Value::make_list(std::move(l));
      }
      case Expr::K::Dict: {
        Value d = Value::make_dict();
        for (size_t k = 0; k + 1 < e.a.size(); k += 2) {
          const Value key = eval(*e.a[k]);
          d.set(dict_key(key), eval(*e.a[k + 1]));
        }
        return d;
      }
      case Expr::K::Attr: return get_attr(eval(*e.a[0]), e.name);
      case Expr::K::Item: return get_item(eval(*e.a[0]), eval(*e.a[1]));
      case Expr::K::Slice: {
        const Value obj = eval(*e.a[0]);
        Value b[3];
        for (int k = 0; k < 3; ++k) b[k] = e.a[1 + k] ? eval(*e.a[1 + k]) : Value::none();
        return get_slice(obj, &b[0], &b[1], &b[2]);
      }
      case Expr::K::Call: {
        const Value fn = eval(*e.a[0]);
        if (fn.kind != K::Func) {
          if (fn.is_undefined()) fail_at(e.line, "'" + fn.s + "' is undefined");
          fail_at(e.line, "'" + type_name(fn) + "' object is not callable");
        }
        Args args = eval_args(e, 1);
        return (*fn.fn)(args);
      }
      case Expr::K::Filter: return apply_filter(e.name, eval(*e.a[0]), eval_args(e, 1));
      case Expr::K::Test: {
        const Value v = eval(*e.a[0]);
        return Value::boolean(apply_test(e.name, v, eval_args(e, 1)) != e.negated);
      }
      case Expr::K::Unary: {
        const Value v = eval(*e.a[0]);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.kind == K::Int || v.kind == K::Bool) {
          const int64_t x = v.kind == K::Bool ? v.b : v.i;
          if (e.name == "-" && x == std::numeric_limits<int64_t>::min())
            fail_at(e.line, "integer overflow in unary - (template integers are 64-bit)");
          return Value::integer(e.name == "-" ? -x : x);
        }
        if (v.kind == K::Float) return Value::number(e.name == "-" ? -v.f : v.f);
        fail_at(e.line, "bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      }
      case Expr::K::Binary: return binary(e);
      case Expr::K::Cond:
        if (eval(*e.a[1]).truthy()) return eval(*e.a[0]);
        return e.a[2] ? eval(*e.a[2]) : Value::undefined();
    }
    return Value::undefined();
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value l = eval(*e.a[0]);
    if (op == "and") return l.truthy() ? eval(*e.a[1]) : l;
    if (op == "or") return l.truthy() ? l : eval(*e.a[1]);
    const Value r = eval(*e.a[1]);
    if (op == "==") return Value::boolean(equals(l, r));
    if (op == "!=") return Value::boolean(!equals(l, r));
    if (op == "<") return Value::boolean(compare(l, r) < 0);
    if (op == ">") return Value::boolean(compare(l, r) > 0);
    if (op == "<=") return Value::boolean(compare(l, r) <= 0);
    if (op == ">=") return Value::boolean(compare(l, r) >= 0);
    if (op == "in" || op == "not in") {
      Args a;
      a.pos.push_back(r);
      return Value::boolean(apply_test("in", l, a) == (op == "in"));
    }
    if (op == "~") return Value::string(to_str(l) + to_str(r));
    if (l.is_undefined() || r.is_undefined()) {
      const Value& u = l.is_undefined() ? l : r;
      fail_at(e.line, u.s.empty() ? "value is undefined" : "'" + u.s + "' is undefined");
    }
    if (op == "+") {
      if (l.kind == K::String && r.kind == K::String) {
        if (!l.is_safe && !r.is_safe) return Value::string(l.s + r.s);
        Value v = Value::string((l.is_safe ? l.s : html_escape(l.s)) + (r.is_safe ? r.s : html_escape(r.s)));
        v.is_safe = true;
        return v;
      }
      if (l.kind == K::List && r.kind == K::List) {
        List c = *l.list;
        c.insert(c.end(), r.list->begin(), r.list->end());
        return Value::make_list(std::move(c));
      }
    }
    if (op == "*" && (l.kind == K::String || l.kind == K::List) && (r.kind == K::Int || r.kind == K::Bool)) {
      const int64_t times = std::max<int64_t>(0, r.kind == K::Bool ? r.b : r.i);
      const size_t unit = l.kind == K::String ? l.s.size() : l.list->size();
      const size_t cap = l.kind == K::String ? limits_.max_output_bytes : limits_.max_items;
      if (unit != 0 && static_cast<uint64_t>(times) > cap / unit)
        fail_at(e.line, "repeating " + std::to_string(unit) +
                            (l.kind == K::String ? " bytes " : " items ") + std::to_string(times) +
                            " times passes the limit of " + std::to_string(cap));
      Value out = l.kind == K::String ? Value::string("") : Value::make_list();
      out.nest = l.nest;
      for (int64_t k = 0; k < times; ++k) {
        if (l.kind == K::String) out.s += l.s;
        else out.list->insert(out.list->end(), l.list->begin(), l.list->end());
      }
      return out;
    }
    if (!l.is_number() || !r.is_number())
      fail_at(e.line, "unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" + type_name(r) + "'");
    if (l.kind != K::Float && r.kind != K::Float) {  // exact integer arithmetic (bool counts as int)
      const int64_t x = l.kind == K::Bool ? l.b : l.i, y = r.kind == K::Bool ? r.b : r.i;
      // Python's ints are unbounded; ours are 64-bit: a result that does not
      // fit is an error, never a wrapped (or undefined) value.
      int64_t z = 0;
      auto fits = [&](bool overflow) {
        if (overflow)
          fail_at(e.line, "integer overflow in " + op + " (template integers are 64-bit)");
        return Value::integer(z);
      };
      if (op == "+") return fits(__builtin_add_overflow(x, y, &z));
      if (op == "-") return fits(__builtin_sub_overflow(x, y, &z));
      if (op == "*") return fits(__builtin_mul_overflow(x, y, &z));
      if ((op == "//" || op == "%" || op == "/") && y == 0) fail_at(e.line, "division by zero");
      if ((op == "//" || op == "%") && x == std::numeric_limits<int64_t>::min() && y == -1)
        return op == "%" ? Value::integer(0) : fits(true);
      if (op == "/") return Value::number(static_cast<double>(x) / static_cast<double>(y));
      if (op == "//" || op == "%") {
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }
        return Value::integer(op == "//" ? q : m);
      }
      if (op == "**") {
        if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
        // Square-and-multiply: y may be huge when x is 0, 1 or -1.
        int64_t p = 1, b = x;
        for (int64_t k = y; k > 0; k >>= 1) {
          if ((k & 1) && __builtin_mul_overflow(p, b, &p)) return fits(true);
          if (k > 1 && __builtin_mul_overflow(b, b, &b)) return fits(true);
        }
        return Value::integer(p);
      }
    }
    const double x = l.as_double(), y = r.as_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if ((op == "//" || op == "%" || op == "/") && y == 0) fail_at(e.line, "float division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::number(m);
    }
    if (op == "**") return Value::number(std::pow(x, y));
    fail_at(e.line, "unknown operator " + op);
  }

  void install_globals(Frame& g) {
    const size_t max_items = limits_.max_items;
    g["range"] = Value::function([max_items](Args& a) {
      int64_t start = 0, stop = 0, step = 1;
      auto num = [](const Value& v) {
        if (v.kind != K::Int && v.kind != K::Bool) throw Error("chat template: range: expected integers");
        return v.kind == K::Bool ? int64_t{v.b} : v.i;
      };
      if (a.pos.size() == 1)
        stop = num(a.pos[0]);
      else if (a.pos.size() >= 2) {
        start = num(a.pos[0]);
        stop = num(a.pos[1]);
        if (a.pos.size() > 2) step = num(a.pos[2]);
      } else
        throw Error("chat template: range expected at least 1 argument");
      if (step == 0) throw Error("chat template: range() arg 3 must not be zero");
      // The length, computed without overflow, is checked before any item is made.
      const __int128 span =
          step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
      const __int128 mag = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
      const __int128 len = span <= 0 ? 0 : (span + mag - 1) / mag;
      if (len > static_cast<__int128>(max_items))
        throw Error("chat template: range() of " + std::to_string(static_cast<uint64_t>(len)) +
                    " items passes the limit of " + std::to_string(max_items));
      List out;
      for (__int128 k = 0; k < len; ++k)
        out.push_back(Value::integer(static_cast<int64_t>(start + k * step)));
      return Value::make_list(std::move(out));
    });
    g["dict"] = Value::function([](Args& a) {
      Value d = Value::make_dict();
      for (const auto& p : a.pos)
        for (const auto& [k, v] : *(p.kind == K::Dict ? p.dict : std::make_shared<Dict>())) d.set(k, v);
      for (const auto& [k, v] : a.kw) d.set(k, v);
      return d;
    });
    auto made = namespaces_;
    g["namespace"] = Value::function([made](Args& a) {
      Value d = Value::make_dict();
      d.is_namespace = true;
      made->push_back(d.dict);
      for (const auto& p : a.pos)
        if (p.kind == K::Dict)
          for (const auto& [k, v] : *p.dict) d.set(k, v);
      for (const auto& [k, v] : a.kw) d.set(k, v);
      return d;
    });
  }

  const RenderLimits limits_;
  // Every namespace the render made: the only mutable values, so the only
  // ones that can hold themselves (`{% set ns.me = ns %}`). Emptied when the
  // render ends, which breaks such cycles (shared_ptr alone would leak them)
  // and long chains of namespaces without recursion.
  std::shared_ptr<std::vector<std::shared_ptr<Dict>>> namespaces_ =
      std::make_shared<std::vector<std::shared_ptr<Dict>>>();
  uint64_t steps_ = 0;
  int depth_ = 0;
  std::vector<std::shared_ptr<Frame>> frames_;
};

}  // namespace

Template::Template(const std::string& source, const LexOptions& opt) : body_(parse_template(source, opt)) {}

std::string Template::render(const Dict& vars, const RenderLimits& limits) const {
  const StringBound bound(limits.max_output_bytes);
  Interpreter in(vars, limits);
  std::string out;
  in.exec_body(body_, out);
  return out;
}

}  // namespace sluice::chat
