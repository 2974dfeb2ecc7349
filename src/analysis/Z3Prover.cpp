#include "analysis/Z3Prover.h"

#include <algorithm>

#ifdef CORA_HAVE_Z3

#include <z3++.h>

#include <map>
#include <optional>

#include "analysis/AuxKind.h"
#include "analysis/IntMath.h"
#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/Tensor.h"
#include "util/Error.h"

namespace cora::ir {

namespace {

/** Translates one query's expressions into Z3, collecting the axioms they need. */
class Encoder {
public:
    explicit Encoder(z3::context &c) : c_(c) {}
    std::vector<z3::expr> axioms;

    /** Prefix sums P(o.., x) = sum_{x' < x} S(o.., x'), S >= 0 (extents are checked
     * non-negative), relate their ground terms pairwise: for equal outer indices o and x1, x2
     * in the array's range, x1 <= x2 -> P(x1) <= P(x2), x1 < x2 -> P(x2) - P(x1) >= S(x1), and
     * x2 = x1 + 1 -> P(x2) = P(x1) + S(x1); P(o.., 0) = 0. (The prelude's arrays are checked
     * against the lengths on every call, so these hold at run time.) Call once per query, after
     * encoding every expression. */
    void add_prefix_sum_axioms() {
        std::vector<PrefixTerm> terms = prefix_terms_; // encoding a summand may add terms
        for (const PrefixTerm &t : terms)
            axioms.push_back(z3::implies(t.args.back() == 0, t.app == 0));
        for (const PrefixTerm &a : terms)
            for (const PrefixTerm &b : terms) {
                if (&a == &b || a.fn != b.fn) continue;
                z3::expr same_row = c_.bool_val(true);
                for (size_t k = 0; k + 1 < a.args.size(); k++)
                    same_row = same_row && a.args[k] == b.args[k];
                z3::expr x1 = a.args.back(), x2 = b.args.back();
                z3::expr valid = same_row && x1 >= 0 && x2 <= b.last;
                z3::expr step = encode(a.summand);
                axioms.push_back(z3::implies(valid && x1 <= x2, a.app <= b.app));
                axioms.push_back(z3::implies(valid && x1 < x2, b.app - a.app >= step));
                axioms.push_back(z3::implies(valid && x2 == x1 + 1, b.app == a.app + step));
            }
    }

    /** Length-array calls as written (e.g. len(batch)) and their terms: shown in counterexamples. */
    std::vector<std::pair<std::string, z3::expr>> shown_terms;
    const std::map<const VarNode *, z3::expr> &vars() const { return vars_; }

    z3::expr var(const VarNode *v) {
        auto it = vars_.find(v);
        if (it != vars_.end()) return it->second;
        z3::expr x = c_.int_const(concat("v", vars_.size(), "_", v->name).c_str());
        if (v->role == VarRole::Param) {
            axioms.push_back(x >= c_.int_val((int64_t)v->min_value));
            axioms.push_back(x <= c_.int_val((int64_t)v->max_value));
        }
        vars_.emplace(v, x);
        return x;
    }

    /** Integer or boolean encoding of e. */
    z3::expr encode(const Expr &e) {
        Type t = e.type();
        if (t.is_float()) return fresh_int(); // only reached through casts: any value
        switch (e.get()->kind) {
        case NodeKind::IntImm: {
            int64_t v = e.as<IntImm>()->value;
            return t.is_bool() ? c_.bool_val(v != 0) : c_.int_val(v);
        }
        case NodeKind::Var: return var(e.as<VarNode>());
        case NodeKind::Add: return encode(e.as<Add>()->a) + encode(e.as<Add>()->b);
        case NodeKind::Sub: return encode(e.as<Sub>()->a) - encode(e.as<Sub>()->b);
        case NodeKind::Mul: return encode(e.as<Mul>()->a) * encode(e.as<Mul>()->b);
        case NodeKind::Div: return floor_div_mod(e.as<Div>()->a, e.as<Div>()->b, true);
        case NodeKind::Mod: return floor_div_mod(e.as<Mod>()->a, e.as<Mod>()->b, false);
        case NodeKind::Min: {
            z3::expr a = encode(e.as<Min>()->a), b = encode(e.as<Min>()->b);
            return z3::ite(a <= b, a, b);
        }
        case NodeKind::Max: {
            z3::expr a = encode(e.as<Max>()->a), b = encode(e.as<Max>()->b);
            return z3::ite(a >= b, a, b);
        }
        case NodeKind::EQ: return compare(e.as<EQ>()->a, e.as<EQ>()->b, [](auto x, auto y) { return x == y; });
        case NodeKind::NE: return compare(e.as<NE>()->a, e.as<NE>()->b, [](auto x, auto y) { return x != y; });
        case NodeKind::LT: return compare(e.as<LT>()->a, e.as<LT>()->b, [](auto x, auto y) { return x < y; });
        case NodeKind::LE: return compare(e.as<LE>()->a, e.as<LE>()->b, [](auto x, auto y) { return x <= y; });
        case NodeKind::GT: return compare(e.as<GT>()->a, e.as<GT>()->b, [](auto x, auto y) { return x > y; });
        case NodeKind::GE: return compare(e.as<GE>()->a, e.as<GE>()->b, [](auto x, auto y) { return x >= y; });
        case NodeKind::And: return encode(e.as<And>()->a) && encode(e.as<And>()->b);
        case NodeKind::Or: return encode(e.as<Or>()->a) || encode(e.as<Or>()->b);
        case NodeKind::Not: return !encode(e.as<Not>()->a);
        case NodeKind::Select: {
            const Select *s = e.as<Select>();
            return z3::ite(encode(s->cond), encode(s->t), encode(s->f));
        }
        case NodeKind::Cast: {
            const Cast *c = e.as<Cast>();
            if (c->value.type().is_bool()) return z3::ite(encode(c->value), c_.int_val(1), c_.int_val(0));
            if (c->value.type().is_int() && t.is_int() && t.bits >= c->value.type().bits) return encode(c->value);
            return t.is_bool() ? fresh_bool() : fresh_int();
        }
        case NodeKind::UFCall: return uf_call(e);
        case NodeKind::Access:
            if (e.as<Access>()->tensor->has_value_range) return ranged_read(e);
            return t.is_bool() ? fresh_bool() : fresh_int();
        default:
            // Loads, tensor reads, reductions: values the prover knows nothing about.
            return t.is_bool() ? fresh_bool() : fresh_int();
        }
    }

private:
    template <typename F> z3::expr compare(const Expr &a, const Expr &b, F op) {
        if (a.type().is_float()) return fresh_bool();
        return op(encode(a), encode(b));
    }

    /** Floor division / modulo: a == b*q + r with r in [0, b) for b > 0 and (b, 0] for b < 0. */
    z3::expr floor_div_mod(const Expr &ea, const Expr &eb, bool want_quotient) {
        z3::expr a = encode(ea);
        const int64_t *cb = as_const_int(eb);
        if (cb && *cb > 0) { // SMT-LIB div/mod are floor semantics for a positive divisor
            z3::expr b = c_.int_val(*cb);
            return want_quotient ? a / b : z3::mod(a, b);
        }
        z3::expr b = encode(eb);
        z3::expr q = fresh_int(), r = fresh_int();
        axioms.push_back(z3::implies(b != 0, a == b * q + r));
        axioms.push_back(z3::implies(b > 0, r >= 0 && r < b));
        axioms.push_back(z3::implies(b < 0, r <= 0 && r > b));
        return want_quotient ? q : r;
    }

    /** Takes the expression, not the node: the terms recorded for the prefix-sum axioms keep it
     * alive, since callers encode temporaries (e.g. fo(x) built for a fusion map's inverse law). */
    z3::expr uf_call(const Expr &e) {
        const UFCall *u = e.as<UFCall>();
        z3::expr_vector args(c_);
        for (const Expr &a : u->args)
            args.push_back(encode(a));
        z3::expr app = declared(fns_, u->fn.get(), "f", u->fn->name, args.size())(args);
        if (u->fn->kind == UFKind::LengthArray) shown_terms.emplace_back(print(e), app);
        const AuxKind *kind = aux_kind_of(*u->fn);
        if (kind && kind->is_prefix_sum()) record_prefix_term(e, *u->fn->aux, app, args);
        // The declared range, instantiated at this ground term only.
        axioms.push_back(app >= c_.int_val((int64_t)u->fn->min_value));
        axioms.push_back(app <= c_.int_val((int64_t)u->fn->max_value));
        // The kind's facts (fusion maps: 0 <= fo(x) < E_o and P(fo(x)) + fi(x) = x; orders: below
        // E), which its build or run-time check makes hold. `value` stands for this very term.
        if (kind) {
            VarPtr value = make_var("value_of_" + u->fn->name, VarRole::Local);
            vars_.emplace(value.get(), app);
            for (const Expr &fact : kind->facts(*u, var_expr(value)))
                axioms.push_back(encode(fact));
            vars_.erase(value.get());
        }
        return app;
    }

    /** A read of an integer tensor with a declared value range (Tensor::index_range): a function
     * of its indices (equal reads are equal) with the range as an axiom at this term, which the
     * kernel's argument checks make hold. */
    z3::expr ranged_read(const Expr &e) {
        const Access *a = e.as<Access>();
        z3::expr_vector args(c_);
        for (const Expr &i : a->indices)
            args.push_back(encode(i));
        z3::expr app = declared(reads_, a->tensor.get(), "t", a->tensor->name, args.size())(args);
        axioms.push_back(app >= c_.int_val((int64_t)a->tensor->min_value));
        axioms.push_back(app <= c_.int_val((int64_t)a->tensor->max_value));
        return app;
    }

    /** The integer function `functions[key]` of `arity` integers, declared on first use (named
     * "<prefix><n>_<name>" for counterexamples). */
    template <typename Key>
    z3::func_decl &declared(std::map<const Key *, z3::func_decl> &functions, const Key *key, const char *prefix,
                            const std::string &name, unsigned arity) {
        auto it = functions.find(key);
        if (it == functions.end()) {
            z3::sort_vector domain(c_);
            for (unsigned i = 0; i < arity; i++)
                domain.push_back(c_.int_sort());
            std::string full = concat(prefix, functions.size(), "_", name);
            it = functions.emplace(key, c_.function(full.c_str(), domain, c_.int_sort())).first;
        }
        return it->second;
    }

    struct PrefixTerm {
        std::shared_ptr<const UFNode> fn;
        z3::expr app;
        std::vector<z3::expr> args;
        z3::expr last; ///< the largest valid last index (the summed range's extent)
        Expr summand;  ///< S at this term's indices
    };

    void record_prefix_term(const Expr &e, const AuxSpec &spec, const z3::expr &app, const z3::expr_vector &args) {
        const UFCall *u = e.as<UFCall>();
        std::map<const VarNode *, Expr> at;
        for (size_t k = 0; k < spec.layout.size() && k < u->args.size(); k++)
            at[spec.layout[k].dim->var.get()] = u->args[k];
        std::vector<z3::expr> a;
        for (unsigned k = 0; k < args.size(); k++)
            a.push_back(args[k]);
        z3::expr last = encode(substitute(spec.layout.back().extent, at)) - 1;
        prefix_terms_.push_back(PrefixTerm{u->fn, app, a, last, substitute(*spec.kind->prefix_summand(), at)});
    }

    z3::expr fresh_int() { return c_.int_const(concat("atom", atoms_++).c_str()); }
    z3::expr fresh_bool() { return c_.bool_const(concat("batom", atoms_++).c_str()); }

    z3::context &c_;
    std::map<const VarNode *, z3::expr> vars_;
    std::map<const UFNode *, z3::func_decl> fns_;
    std::map<const TensorNode *, z3::func_decl> reads_;
    std::vector<PrefixTerm> prefix_terms_;
    int atoms_ = 0;
};

class Z3Prover : public Prover {
public:
    explicit Z3Prover(uint64_t rlimit) : rlimit_(rlimit) {}

    bool prove_nonneg(const Expr &e, const Scope &scope) override {
        try {
            // Created on the first query: most compilations never reach Z3 (the bounds prover
            // settles them), and a context costs milliseconds.
            if (!ctx_) ctx_ = std::make_unique<z3::context>();
            z3::context &ctx = *ctx_;
            Encoder enc(ctx);
            z3::solver s(ctx);
            z3::params p(ctx);
            p.set("rlimit", (unsigned)std::min<uint64_t>(rlimit_, UINT32_MAX));
            s.set(p);
            for (const ScopeEntry &se : scope) {
                z3::expr v = enc.var(se.var), lo = enc.encode(se.min);
                s.add(v >= lo && v < lo + enc.encode(se.extent));
            }
            z3::expr goal = enc.encode(e);
            enc.add_prefix_sum_axioms();
            for (const z3::expr &a : enc.axioms)
                s.add(a);
            s.add(goal < 0);
            z3::check_result r = s.check();
            if (r == z3::unsat) return true;
            failure_ = r == z3::sat ? "Z3 found inputs within the declared ranges where " + print(e) + " < 0" +
                                          counterexample(enc, s.get_model())
                                    : "Z3 could not decide " + print(e) + " >= 0 within its resource limit";
            return false;
        } catch (const z3::exception &ex) {
            failure_ = std::string("Z3 error: ") + ex.msg();
            return false;
        }
    }
    std::string last_failure() const override { return failure_; }

private:
    /** The model's values of the params, dims and length-array elements the query mentions:
     * ", e.g. B = 1, batch = 0, f = 0, len(batch) = 0". */
    static std::string counterexample(Encoder &enc, const z3::model &m) {
        std::vector<std::pair<std::string, std::string>> values;
        for (const auto &[v, x] : enc.vars())
            if (v->role == VarRole::Param || v->role == VarRole::Index)
                values.emplace_back(v->name, m.eval(x, true).to_string());
        for (const auto &[text, x] : enc.shown_terms)
            values.emplace_back(text, m.eval(x, true).to_string());
        std::sort(values.begin(), values.end());
        values.erase(std::unique(values.begin(), values.end()), values.end());
        std::string s;
        for (const auto &[name, value] : values)
            s += (s.empty() ? ", e.g. " : ", ") + name + " = " + value;
        return s;
    }

    std::unique_ptr<z3::context> ctx_;
    uint64_t rlimit_;
    std::string failure_;
};

} // namespace

bool z3_available() { return true; }
std::unique_ptr<Prover> make_z3_prover(uint64_t rlimit) { return std::make_unique<Z3Prover>(rlimit); }

} // namespace cora::ir

#else

namespace cora::ir {
bool z3_available() { return false; }
std::unique_ptr<Prover> make_z3_prover(uint64_t) { return nullptr; }
} // namespace cora::ir

#endif
