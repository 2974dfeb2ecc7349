#include "ir/IRPrinter.h"

#include <cmath>
#include <sstream>

#include "ir/IRVisitor.h"
#include "ir/Tensor.h"

namespace cora::ir {

namespace {

class Printer : public IRVisitor {
public:
    std::ostringstream os;
    int indent = 0;
    bool aux_by_key = false; ///< structural keys: an aux array is what it computes, not its name
    using IRVisitor::visit;

protected:
    void pad() { os << std::string(indent * 2, ' '); }
    void bin(const Expr &a, const char *op, const Expr &b) {
        os << "(";
        visit(a);
        os << " " << op << " ";
        visit(b);
        os << ")";
    }
    void fn(const char *name, const Expr &a, const Expr &b) {
        os << name << "(";
        visit(a);
        os << ", ";
        visit(b);
        os << ")";
    }
    void list(const std::vector<Expr> &v) {
        for (size_t i = 0; i < v.size(); i++) {
            if (i) os << ", ";
            visit(v[i]);
        }
    }

    void visit_node(const IntImm *op) override { os << op->value; }
    void visit_node(const FloatImm *op) override {
        if (std::isinf(op->value))
            os << (op->value < 0 ? "-inf" : "inf");
        else
            os << op->value << "f";
    }
    void visit_node(const Var *op) override { os << op->name; }
    void visit_node(const Add *op) override { bin(op->a, "+", op->b); }
    void visit_node(const Sub *op) override { bin(op->a, "-", op->b); }
    void visit_node(const Mul *op) override { bin(op->a, "*", op->b); }
    void visit_node(const Div *op) override { bin(op->a, "/", op->b); }
    void visit_node(const Mod *op) override { bin(op->a, "%", op->b); }
    void visit_node(const Min *op) override { fn("min", op->a, op->b); }
    void visit_node(const Max *op) override { fn("max", op->a, op->b); }
    void visit_node(const EQ *op) override { bin(op->a, "==", op->b); }
    void visit_node(const NE *op) override { bin(op->a, "!=", op->b); }
    void visit_node(const LT *op) override { bin(op->a, "<", op->b); }
    void visit_node(const LE *op) override { bin(op->a, "<=", op->b); }
    void visit_node(const GT *op) override { bin(op->a, ">", op->b); }
    void visit_node(const GE *op) override { bin(op->a, ">=", op->b); }
    void visit_node(const And *op) override { bin(op->a, "&&", op->b); }
    void visit_node(const Or *op) override { bin(op->a, "||", op->b); }
    void visit_node(const Not *op) override {
        os << "!";
        visit(op->a);
    }
    void visit_node(const Select *op) override {
        os << "select(";
        list({op->cond, op->t, op->f});
        os << ")";
    }
    void visit_node(const Cast *op) override {
        os << op->type.str() << "(";
        visit(op->value);
        os << ")";
    }
    void visit_node(const Call *op) override {
        os << op->name << "(";
        list(op->args);
        os << ")";
    }
    void visit_node(const UFCall *op) override {
        if (aux_by_key && op->fn->aux)
            os << "{" << op->fn->aux->key << "}(";
        else
            os << op->fn->name << "(";
        list(op->args);
        os << ")";
    }
    void visit_node(const Access *op) override {
        os << op->tensor->name << "[";
        list(op->indices);
        os << "]";
    }
    void visit_node(const Load *op) override {
        os << op->buffer->name << "[";
        visit(op->index);
        os << "]";
    }
    void visit_node(const Reduce *op) override {
        os << reduce_op_name(op->op) << "(" << op->var->name << " < ";
        visit(op->extent);
        os << ": ";
        visit(op->body);
        os << ")";
    }

    void visit_node(const For *op) override {
        pad();
        if (op->for_kind != ForKind::Serial) os << for_kind_name(op->for_kind) << " ";
        if (op->pipeline_stages > 1) os << "pipelined(" << op->pipeline_stages << " stages) ";
        os << "for " << op->var->name << " in [";
        visit(op->min);
        os << ", ";
        visit(op->min);
        os << " + ";
        visit(op->extent);
        os << (op->for_kind == ForKind::Parallel && op->work_split == WorkSplit::Dynamic ? ") dynamic:\n" : "):\n");
        indent++;
        visit(op->body);
        indent--;
    }
    void visit_node(const Provide *op) override {
        pad();
        os << op->tensor->name << "[";
        list(op->indices);
        os << "] = ";
        visit(op->value);
        os << "\n";
    }
    void visit_node(const Store *op) override {
        pad();
        os << op->buffer->name << "[";
        visit(op->index);
        os << "] = ";
        visit(op->value);
        os << "\n";
    }
    void visit_node(const IfThenElse *op) override {
        pad();
        os << "if ";
        visit(op->cond);
        os << ":\n";
        indent++;
        visit(op->then_case);
        indent--;
        if (op->else_case.defined()) {
            pad();
            os << "else:\n";
            indent++;
            visit(op->else_case);
            indent--;
        }
    }
    void visit_node(const LetStmt *op) override {
        pad();
        os << "let " << op->var->name << " = ";
        visit(op->value);
        os << "\n";
        visit(op->body);
    }
    void visit_node(const LocalVar *op) override {
        pad();
        os << "local " << op->var->name << " = ";
        visit(op->init);
        os << "\n";
        visit(op->body);
    }
    void visit_node(const Assign *op) override {
        pad();
        os << op->var->name << " = ";
        visit(op->value);
        os << "\n";
    }
    void visit_node(const Allocate *op) override {
        pad();
        os << (op->memory == MemoryType::Stack       ? "allocate on stack "
               : op->memory == MemoryType::GpuShared ? "allocate in shared memory "
                                                     : "allocate ")
           << op->buffer->name << "[" << op->buffer->type.str() << " * ";
        visit(op->size);
        os << "]\n";
        visit(op->body);
    }
    void visit_node(const Assert *op) override {
        pad();
        os << "assert ";
        visit(op->cond);
        os << ", \"";
        for (size_t i = 0; i < op->values.size(); i++) {
            os << op->text[i] << "{";
            visit(op->values[i]);
            os << "}";
        }
        os << op->text.back() << "\"\n";
    }
    void visit_node(const LaunchKernel *op) override {
        pad();
        os << "launch " << op->kernel << "<<<(";
        list(op->grid);
        os << "), (";
        list(op->threads);
        os << ")>>>(";
        for (size_t i = 0; i < op->args.size(); i++)
            os << (i ? ", " : "") << op->args[i]->name;
        os << ")";
        if (!op->narrow.kernel32.empty()) {
            os << " or " << op->narrow.kernel32 << " when ";
            for (const auto &a : op->narrow.arrays)
                os << a.magnitude->name << " = max |" << a.array->name << "|, ";
            os << "max(";
            list(op->narrow.bounds);
            os << ") <= INT32_MAX";
        }
        os << "\n";
    }
};

} // namespace

std::string print(const Expr &e) {
    if (!e.defined()) return "<undefined>";
    Printer p;
    p.visit(e);
    return p.os.str();
}
std::string print(const Stmt &s) {
    if (!s.defined()) return "<no statement>\n";
    Printer p;
    p.visit(s);
    return p.os.str();
}

std::string structural_key(const Expr &e) {
    // Like print(), but symbols carry their ids so that distinct dims with one name differ, and
    // aux arrays appear as their own keys: their names and ids belong to one AuxTable, the key to
    // the structure, so keys agree between compilations (a RaggedShape shares arrays by key).
    Printer p;
    p.aux_by_key = true;
    p.visit(e);
    std::string out = p.os.str() + " |";
    visit_exprs(e, [&](const Expr &x) {
        if (const VarNode *v = x.as<VarNode>()) out += " " + v->name + "#" + std::to_string(v->id);
        if (const UFCall *u = x.as<UFCall>(); u && !u->fn->aux)
            out += " " + u->fn->name + "#" + std::to_string(u->fn->id);
        if (const Load *l = x.as<Load>()) out += " " + l->buffer->name + "#" + std::to_string(l->buffer->id);
    });
    return out;
}

} // namespace cora::ir
