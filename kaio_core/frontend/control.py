"""Control flow: if / for / while, and break / continue / return lowered to structured IR.

SSA construction is by environment merging: each branch of an ``if`` is lowered with its own
copy of the variable environment; variables that differ afterwards become results of the
``if`` op (yielded from both branches). Loops carry the variables their body assigns as block
arguments. A variable first set to a weak literal (``acc = 0``) gets its loop type from a
scratch lowering of the body (the type it has at the end of one iteration).

``break``, ``continue`` and ``return`` set hidden bool variables (flags); statements after one
that may have executed are guarded by ``if not flag``, and loops test the flags in their exit
condition, so the IR keeps only if/for/while. ``for`` loops with ``break`` or ``return``
become ``while`` loops so they stop early.
"""
from __future__ import annotations

import ast
from contextlib import contextmanager

from .. import dtypes as dt
from ..ir.core import Block, Value
from ..ir.indexmath import IndexMath
from ..ir.rewrite import discard
from ..lang import static_range
from ..records import record
from .analysis import assigned_names, body_exits, exits, is_cheap
from .values import Lit, OwnedMethod, PyObj, TupleV, Undef, describe, is_scalar

MAX_UNROLL = 4096


@record
class LoopCtx:
    brk: str | None
    cont: str | None


class _Slot:
    def __init__(self, i):
        self.i = i


def _leaves(v):
    if isinstance(v, TupleV):
        return [x for item in v.items for x in _leaves(item)]
    return [v]


def _rebuild(template, it):
    if isinstance(template, TupleV):
        return TupleV(tuple(_rebuild(x, it) for x in template.items))
    return next(it)


def _shape(v):
    return tuple(_shape(x) for x in v.items) if isinstance(v, TupleV) else None


def _same_int(v, t) -> bool:
    """Whether ``v`` can carry a loop variable of integer type ``t``: a scalar of that type, or
    an int literal that fits it."""
    if isinstance(v, Value):
        return is_scalar(v) and v.type is t
    return isinstance(v, Lit) and type(v.value) is int and dt.literal_fits(v.value, t)


def _unique(names: list) -> list:
    return list(dict.fromkeys(names))


def _carriable(v) -> bool:
    return all(is_scalar(x) for x in _leaves(v))


def _fill(v, results):
    if isinstance(v, _Slot):
        return results[v.i]
    if isinstance(v, TupleV):
        return TupleV(tuple(_fill(x, results) for x in v.items))
    return v


def _clean(name: str) -> str:
    return name.lstrip("$").rstrip("0123456789") if name.startswith("$") else name


def const_of(v):
    """The Python value of a bool literal or a ``const`` op result, else None."""
    if isinstance(v, Lit):
        return v.value
    op = getattr(v, "owner", None)
    if op is not None and getattr(op, "opcode", None) == "const":
        return op.attrs["value"]
    return None


class ControlMixin:
    # --- statement lists and guards -----------------------------------------------------
    def lower_block(self, stmts):
        for k, s in enumerate(stmts):
            with self.b.located(self.loc(s)):
                self.stmt(s)
            if isinstance(s, (ast.Break, ast.Continue, ast.Return)):
                return  # the rest is unreachable
            ex = exits(s)
            if ex and k + 1 < len(stmts):
                rest = stmts[k + 1:]
                with self.b.located(self.loc(rest[0])):
                    go = self.not_any(self.exit_flags(ex))
                    self.guarded(go, lambda rest=rest: self.lower_block(rest), rest[0])
                return

    def exit_flags(self, ex) -> list:
        loop = self.frame.loops[-1] if self.frame.loops else None
        flags = []
        if "break" in ex and loop is not None and loop.brk:
            flags.append(loop.brk)
        if "continue" in ex and loop is not None and loop.cont:
            flags.append(loop.cont)
        if "return" in ex and self.frame.ret_flag:
            flags.append(self.frame.ret_flag)
        return flags

    def not_any(self, flags):
        acc = None
        for f in flags:
            v = self.env[f]
            c = const_of(v)
            if c is False:
                continue
            if c is True:
                return Lit(False)
            acc = v if acc is None else self.b.binary("or", acc, v)
        return Lit(True) if acc is None else self.b.unary("not", acc)

    def guarded(self, cond, fn, node):
        c = const_of(cond)
        if c is not None:
            if c:
                fn()
            return
        self.lower_if(cond, fn, None, node)

    def set_flag(self, name, value: bool):
        self.env[name] = self.b.const(value, dt.bool_)

    @contextmanager
    def scratch(self):
        """Lower into a throwaway block (used to learn types before emitting for real); its
        ops are then discarded, so the values they used do not keep them as users."""
        trial = Block()
        try:
            with self.b.at(trial):
                yield
        finally:
            for op in reversed(trial.ops):   # users before the ops they use
                discard(op)

    # --- if -----------------------------------------------------------------------------
    def stmt_If(self, s):
        c = self.to_bool(self.expr(s.test), s.test)
        if isinstance(c, Lit):  # static if: only the taken branch exists
            self.lower_block(s.body if c.value else s.orelse)
            return
        self.lower_if(c, lambda: self.lower_block(s.body), lambda: self.lower_block(s.orelse), s)

    def lower_if(self, cond, then_fn, else_fn, node):
        env0 = self.env
        blocks, envs = [], []
        for fn in (then_fn, else_fn):
            blk = Block()
            self.frame.env = dict(env0)
            with self.b.at(blk):
                if fn is not None:
                    fn()
            blocks.append(blk)
            envs.append(self.frame.env)
        self.frame.env = env0
        merged, ys, types, names = self.merge(env0, envs, blocks, node)
        if types:
            for blk, y in zip(blocks, ys):
                with self.b.at(blk):
                    self.b.yield_(*y)
        op = self.b.op("if", [cond], types, regions=blocks)
        for r, n in zip(op.results, names):
            r.name = n
        self.frame.env = {k: _fill(v, op.results) for k, v in merged.items()}

    def merge(self, env0, envs, blocks, node):
        ys, types, names = ([], []), [], []

        def m(name, a, b):
            if a is b or (isinstance(a, Lit) and a.same(b)):
                return a
            if a is None or b is None or isinstance(a, Undef) or isinstance(b, Undef):
                why = a.why if isinstance(a, Undef) else b.why if isinstance(b, Undef) else \
                    "it is assigned on only some paths through an if"
                return Undef(name, why)
            if isinstance(a, TupleV) and isinstance(b, TupleV) and len(a.items) == len(b.items):
                return TupleV(tuple(m(name, x, y) for x, y in zip(a.items, b.items)))
            if is_scalar(a) and is_scalar(b):
                t = self.join_types(name, a, b, node)
                for k, (blk, v) in enumerate(zip(blocks, (a, b))):
                    with self.b.at(blk):
                        ys[k].append(self.convert(v, t, node, f"'{name}'"))
                types.append(t)
                names.append(_clean(name))
                return _Slot(len(types) - 1)
            raise self.err(node, f"'{name}' is {describe(a)} on one path and {describe(b)} on another",
                           hint="only scalar variables (and tuples of them) may differ between branches")

        out = {}
        for name in list(env0) + [n for n in envs[0] if n not in env0] + \
                [n for n in envs[1] if n not in env0 and n not in envs[0]]:
            out[name] = m(name, envs[0].get(name), envs[1].get(name))
        return out, ys, types, names

    def join_types(self, name, a, b, node):
        if isinstance(a, Lit) and isinstance(b, Lit):
            return dt.promote(dt.literal_dtype(a.value), dt.literal_dtype(b.value))
        if isinstance(a, Lit):
            return b.type
        if isinstance(b, Lit) or a.type is b.type:
            return a.type
        raise self.err(node, f"variable '{_clean(name)}' is {a.type.name} on one path and "
                             f"{b.type.name} on another",
                       hint="a variable keeps one type: cast explicitly so both paths agree")

    def value_if(self, cond, then_thunk, else_thunk, node):
        """An expression-level if (short-circuit and/or, ternary with loads): one scalar result."""
        vals, blocks = [], []
        for th in (then_thunk, else_thunk):
            blk = Block()
            with self.b.at(blk):
                vals.append(self.scalar(th(), node, "value of a conditional expression"))
            blocks.append(blk)
        t = self.join_types("value", vals[0], vals[1], node)
        for blk, v in zip(blocks, vals):
            with self.b.at(blk):
                self.b.yield_(self.convert(v, t, node))
        return self.b.op("if", [cond], [t], regions=blocks).result

    # --- break / continue / return ------------------------------------------------------
    def stmt_Break(self, s):
        if not self.frame.loops:
            raise self.err(s, "`break` outside a loop", hint="break can only be used inside for/while")
        self.set_flag(self.frame.loops[-1].brk, True)

    def stmt_Continue(self, s):
        if not self.frame.loops:
            raise self.err(s, "`continue` outside a loop",
                           hint="continue can only be used inside for/while")
        self.set_flag(self.frame.loops[-1].cont, True)

    def stmt_Return(self, s):
        f = self.frame
        has_value = s.value is not None and not (isinstance(s.value, ast.Constant) and s.value.value is None)
        if f.is_kernel:
            if has_value:
                raise self.err(s.value, "a kernel cannot return a value",
                               hint="write results into an Out or Region buffer parameter")
        elif f.trial_returns is not None:
            f.trial_returns.append((s, self.expr(s.value) if has_value else None))
        elif has_value:
            self.env[f.retval] = self.conform(self.expr(s.value), f.ret_template, s.value)
        self.set_flag(f.ret_flag, True)

    def conform(self, v, template, node):
        if isinstance(template, tuple):
            if not (isinstance(v, TupleV) and len(v.items) == len(template)):
                raise self.err(node, f"returns {describe(v)} here but a tuple of {len(template)} elsewhere")
            return TupleV(tuple(self.conform(x, t, node) for x, t in zip(v.items, template)))
        if isinstance(template, Lit):
            template = dt.literal_dtype(template.value)
        return self.convert(v, template, node, "returned value")

    # --- loops: shared machinery --------------------------------------------------------
    def carried_names(self, body, extra=(), exclude=()):
        env = self.env
        extra = list(extra)
        if self.frame.ret_flag and self.frame.ret_flag in extra and self.frame.retval:
            extra.append(self.frame.retval)  # a return inside the loop may set the value
        names = [n for n in sorted(assigned_names(body))
                 if n in env and n not in exclude and _carriable(env[n])]
        return names + [n for n in extra if n and n in env]

    def loop_types(self, names, run):
        """Per carried name, per leaf: its dtype, or None for a literal the loop never changes."""
        env0 = self.env
        init = {n: _leaves(env0[n]) for n in names}
        types = {n: [x.type if isinstance(x, Value) else None for x in init[n]] for n in names}
        for _ in range(len(names) + 2):
            if all(t is not None for ts in types.values() for t in ts):
                break
            trial = dict(env0)
            for n in names:
                trial[n] = _rebuild(env0[n], iter(Value(t, n) if t else x for t, x in zip(types[n], init[n])))
            self.frame.env = trial
            try:
                with self.scratch():
                    run()
                end = self.frame.env
            finally:
                self.frame.env = env0
            changed = False
            for n in names:
                e = end.get(n)
                if _shape(e) != _shape(env0[n]):
                    continue  # reported by the real lowering
                for k, x in enumerate(_leaves(e)):
                    if types[n][k] is not None:
                        continue
                    x0 = init[n][k]
                    if isinstance(x, Value) and is_scalar(x):
                        types[n][k], changed = x.type, True
                    elif isinstance(x, Lit) and not x.same(x0):
                        types[n][k] = dt.promote(dt.literal_dtype(x0.value), dt.literal_dtype(x.value))
                        changed = True
            if not changed:
                break
        return types

    def loop_inits(self, names, types, node):
        inits, slots = [], []
        for n in names:
            for k, (t, x) in enumerate(zip(types[n], _leaves(self.env[n]))):
                if t is not None:
                    inits.append(self.convert(x, t, node, f"initial value of '{_clean(n)}'"))
                    slots.append((n, k))
        return inits, slots

    def bind_slots(self, env0, names, slots, values):
        for v, (n, _) in zip(values, slots):
            v.name = _clean(n)
        by_name = {}
        for (n, k), v in zip(slots, values):
            by_name.setdefault(n, {})[k] = v
        for n in names:
            leaves = _leaves(env0[n])
            repl = by_name.get(n, {})
            self.env[n] = _rebuild(env0[n], iter(repl.get(k, x) for k, x in enumerate(leaves)))

    def carry_out(self, env0, names, types, slots, node):
        out = []
        for n, k in slots:
            e = self.env.get(n)
            if isinstance(e, Undef) or e is None or _shape(e) != _shape(env0[n]):
                raise self.err(node, f"variable '{_clean(n)}' changes shape inside the loop "
                                     f"(it is {describe(env0[n])} before it)",
                               hint="keep each variable's kind and type the same in every iteration")
            x, t = _leaves(e)[k], types[n][k]
            if isinstance(x, Value) and is_scalar(x) and x.type is not t:
                raise self.err(node, f"variable '{_clean(n)}' is {t.name} before the loop but "
                                     f"{x.type.name} at the end of its body",
                               hint=f"a variable keeps one type: cast explicitly, e.g. kaio.{t.name}(...)")
            out.append(self.convert(x, t, node, f"'{_clean(n)}'"))
        return out

    def after_loop(self, env0, end, names, slots, results, targets, node):
        self.frame.env = dict(env0)
        self.bind_slots(env0, names, slots, results)
        for n, v in end.items():
            if n in names:
                continue
            if n in targets:
                self.env[n] = Undef(n, "a loop variable is not available after its loop")
            elif n not in env0 or isinstance(env0[n], Undef):
                self.env[n] = Undef(n, "it is assigned only inside a loop")
            elif not (v is env0[n] or (isinstance(v, Lit) and v.same(env0[n]))):
                raise self.err(node, f"'{_clean(n)}' ({describe(env0[n])}) cannot be reassigned "
                                     "inside a loop", hint="use a new variable name inside the loop")

    def emit_for(self, lb, ub, step, names, bind_iv, body_fn, node, iv_name, attrs=None, targets=()):
        types = self.loop_types(names, lambda: (bind_iv(Value(lb.type, iv_name)), body_fn()))
        env0 = self.env
        inits, slots = self.loop_inits(names, types, node)
        op, body, iv, carried = self.b.for_(lb, ub, step, inits, iv_name=iv_name, attrs=attrs)
        self.frame.env = dict(env0)
        self.bind_slots(env0, names, slots, carried)
        with self.b.at(body):
            bind_iv(iv)
            body_fn()
            self.b.yield_(*self.carry_out(env0, names, types, slots, node))
        self.after_loop(env0, self.frame.env, names, slots, op.results, targets, node)

    def emit_while(self, names, cond_fn, body_fn, node, targets=()):
        types = self.loop_types(names, lambda: (cond_fn(), body_fn()))
        env0 = self.env
        inits, slots = self.loop_inits(names, types, node)
        op, before, after = self.b.while_(inits)
        self.frame.env = dict(env0)
        self.bind_slots(env0, names, slots, before.args)
        with self.b.at(before):
            c = cond_fn()
            if isinstance(c, Lit):
                c = self.b.const(bool(c.value), dt.bool_)
            self.b.condition(c, *before.args)
        self.frame.env = dict(env0)
        self.bind_slots(env0, names, slots, after.args)
        with self.b.at(after):
            body_fn()
            self.b.yield_(*self.carry_out(env0, names, types, slots, node))
        self.after_loop(env0, self.frame.env, names, slots, op.results, targets, node)

    def loop_body(self, body, ctx: LoopCtx):
        if ctx.cont:
            self.set_flag(ctx.cont, False)
        self.frame.loops.append(ctx)
        try:
            self.lower_block(body)
        finally:
            self.frame.loops.pop()

    def loop_flags(self, body):
        ex = body_exits(body)
        brk = self.fresh("brk") if "break" in ex else None
        cont = self.fresh("cont") if "continue" in ex else None
        ret = self.frame.ret_flag if "return" in ex else None
        if brk:
            self.set_flag(brk, False)
        return brk, cont, ret

    # --- for ----------------------------------------------------------------------------
    def stmt_For(self, s):
        if s.orelse:
            raise self.err(s.orelse[0], "`for ... else` is not supported in kernels",
                           hint="set a flag variable before `break` and test it after the loop")
        it = s.iter
        f = self.expr(it.func) if isinstance(it, ast.Call) else None
        if isinstance(f, OwnedMethod):
            return self.for_owned(s, f.buf)
        if isinstance(f, PyObj) and f.obj is range:
            return self.for_range(s)
        if isinstance(f, PyObj) and f.obj is static_range:
            return self.for_static(s)
        raise self.err(it, "a kernel for-loop must iterate over range(...), kaio.static_range(...) "
                           "or y.owned()", hint="loop over indices: for i in range(len(x))")

    def target_name(self, t) -> str:
        if not isinstance(t, ast.Name):
            raise self.err(t, "this loop variable must be a single name", hint="for i in range(n):")
        return t.id

    def range_args(self, s, label):
        args, kwargs = self.call_args(s.iter)
        self.arity(label, args, kwargs, s.iter, 1, 3)
        start, stop, step = (Lit(0), args[0], Lit(1)) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else Lit(1))
        return start, stop, step

    def for_range(self, s):
        target = self.target_name(s.target)
        start, stop, step = self.range_args(s, "range")
        vals = (start, stop, step)
        for v, n in zip(vals, ("start", "stop", "step")):
            self.scalar(v, s.iter, f"range {n}")
            bad = (isinstance(v, Lit) and not (isinstance(v.value, int) and not isinstance(v.value, bool))) \
                or (isinstance(v, Value) and not v.type.is_int)
            if bad:
                raise self.err(s.iter, f"range {n} must be an integer, got {describe(v)}",
                               hint="cast explicitly, e.g. range(kaio.i32(n))")
        typed = [v.type for v in vals if isinstance(v, Value)]
        t = None
        for x in typed:
            t = x if t is None else dt.promote(t, x)
        if t is None:
            t = dt.i32 if all(dt.literal_fits(v.value, dt.i32) for v in vals) else dt.i64
        if isinstance(step, Lit) and step.value == 0:
            raise self.err(s.iter, "range() step must not be zero")
        lb, ub, st = (self.lit_value(v, t, s.iter, "range bound") if isinstance(v, Lit)
                      else self.b.cast(v, t) for v in vals)
        brk, cont, ret = self.loop_flags(s.body)
        # Python keeps the loop variable's last value after the loop (or its old value when the
        # loop does not run): when the name is bound before the loop to a value of the loop's
        # type it is carried like any variable the body assigns; otherwise (unbound, or bound to
        # something else, which the loop rebinds as Python does) it cannot be read after the loop
        prior = target in self.env and _same_int(self.env[target], t)
        keep = [target] if prior else []
        hidden = set() if prior else {target}
        if not brk and not ret:
            names = _unique(self.carried_names(s.body, keep, exclude=hidden))
            self.emit_for(lb, ub, st, names, lambda iv: self.env.__setitem__(target, iv),
                          lambda: self.loop_body(s.body, LoopCtx(None, cont)), s, target,
                          targets=hidden)
            return
        # break/return: a while loop that also stops on the flags
        ivn = self.fresh(f"{target}_iv")
        self.env[ivn] = lb
        names = _unique(self.carried_names(s.body, [brk, ret, ivn] + keep, exclude=hidden))

        def cond_fn():
            iv = self.env[ivn]
            if isinstance(step, Lit):
                more = self.b.cmp("lt" if step.value > 0 else "gt", iv, ub)
            else:
                up = self.b.cmp("gt", st, self.b.const(0, t))
                more = self.b.select(up, self.b.cmp("lt", iv, ub), self.b.cmp("gt", iv, ub))
            go = self.not_any([f for f in (brk, ret) if f])
            return more if isinstance(go, Lit) else self.b.binary("and", go, more)

        def body_fn():
            self.env[target] = self.env[ivn]
            self.loop_body(s.body, LoopCtx(brk, cont))
            self.env[ivn] = self.b.binary("add", self.env[ivn], st)

        self.emit_while(names, cond_fn, body_fn, s, targets=hidden)

    def for_static(self, s):
        target = self.target_name(s.target)
        start, stop, step = self.range_args(s, "kaio.static_range")
        bounds = [self.const_int(v, s.iter, "a kaio.static_range bound") for v in (start, stop, step)]
        if bounds[2] == 0:
            raise self.err(s.iter, "static_range() step must not be zero")
        r = range(*bounds)
        if len(r) > MAX_UNROLL:
            raise self.err(s.iter, f"kaio.static_range of {len(r)} iterations is too long to unroll "
                                   f"(limit {MAX_UNROLL})", hint="use range(...) for long loops")
        brk, cont, ret = self.loop_flags(s.body)
        stop_flags = [f for f in (brk, ret) if f]
        for k, val in enumerate(r):
            def iteration(val=val):
                self.env[target] = Lit(val)
                self.loop_body(s.body, LoopCtx(brk, cont))
            if k > 0 and stop_flags:
                self.guarded(self.not_any(stop_flags), iteration, s)
            else:
                iteration()

    def for_owned(self, s, buf):
        args, kwargs = self.call_args(s.iter)
        self.arity(f"{buf.name}.owned", args, kwargs, s.iter, 0)
        info = self.buf_params.get(buf.id)
        if info is None or info[1] is None:
            raise self.err(s.iter, f"'{buf.name}' has no partition: .owned() needs a Region or Out "
                                   f"buffer parameter", hint="declare it kaio.Region[...] or kaio.Out[...]")
        pname, partition = info
        nd = buf.type.ndim
        t = s.target
        if isinstance(t, ast.Tuple):
            names_t = [self.target_name(e) for e in t.elts]
            if len(names_t) != nd:
                raise self.err(t, f"'{pname}' is {nd}-d: its owned indices have {nd} component(s), "
                                  f"not {len(names_t)}")
        else:
            names_t = [self.target_name(t)]
        spec = partition.owned_spec(IndexMath(self.b), buf)
        ranges = list(spec.ranges or [])
        brk, cont, ret = self.loop_flags(s.body)
        stop_flags = [f for f in (brk, ret) if f]
        ivs = [None] * len(ranges)

        def inner():
            idx = tuple(spec.index(*ivs))
            if len(names_t) == 1:
                self.env[names_t[0]] = idx[0] if nd == 1 else TupleV(idx)
            else:
                for n, v in zip(names_t, idx):
                    self.env[n] = v
            for n in names_t:
                v = self.env[n]
                if isinstance(v, Value) and v.name is None:
                    v.name = n
            run = lambda: self.loop_body(s.body, LoopCtx(brk, cont))  # noqa: E731
            if ranges and stop_flags:
                self.guarded(self.not_any(stop_flags), run, s)
            else:
                run()

        # `for i in y.owned()` over one range: the loop variable is the user's i (in messages)
        iv_names = ([names_t[0]] if len(ranges) == 1 and len(names_t) == 1 and nd == 1
                    else [f"{pname}_r{k}" for k in range(len(ranges))])

        def level(k):
            if k == len(ranges):
                return inner()
            lb, ub, st = ranges[k]
            names = self.carried_names(s.body, [brk, ret], exclude=set(names_t))
            self.emit_for(lb, ub, st, names, lambda iv: ivs.__setitem__(k, iv), lambda: level(k + 1),
                          s, iv_names[k], attrs={"owned": pname}, targets=set(names_t))

        if spec.guard is None:
            level(0)
        else:
            self.guarded(spec.guard, lambda: level(0), s)
        for n in names_t:
            if n in self.env and not isinstance(self.env[n], Undef):
                self.env[n] = Undef(n, "a loop variable is not available after its loop")

    # --- while --------------------------------------------------------------------------
    def stmt_While(self, s):
        if s.orelse:
            raise self.err(s.orelse[0], "`while ... else` is not supported in kernels",
                           hint="set a flag variable before `break` and test it after the loop")
        brk, cont, ret = self.loop_flags(s.body)
        names = self.carried_names(s.body, [brk, ret])

        def cond_fn():
            go = self.not_any([f for f in (brk, ret) if f])
            return self.and_then(go, lambda: self.to_bool(self.expr(s.test), s.test),
                                 is_cheap(s.test), s.test)

        self.emit_while(names, cond_fn, lambda: self.loop_body(s.body, LoopCtx(brk, cont)), s)
