"""Loops over constant ranges written out in a device function's source, before a front end
sees it (:func:`unrolled`).

Why: an accumulator fragment (``cuda.local.array``) stays in registers only while every index
into it is a compile-time constant. numba-cuda's LLVM pipeline unrolls the small constant loops
of our inlined device functions (``for q in range(4): acc[q * 2 + h]``); numba-cuda-mlir's does
not, and each loop left keeps its index dynamic, which sends the whole fragment to local memory
(stack). Writing the loops out in the source gives both front ends straight-line code.
"""

import ast
import copy
import inspect
import textwrap
import types as pytypes

__all__ = ["unrolled", "MAX_TRIPS"]

#: A loop of more iterations than this stays a loop (128: the largest accumulator fragment).
MAX_TRIPS = 128


def unrolled(func):
    """``func`` with each ``for NAME in range(...)`` whose bounds are known when it is defined
    (literals, and globals or closure variables holding ints, or an enclosing loop's variable
    once that loop is written out) replaced by one copy of its body per value, ``NAME`` a
    constant in each. A loop with ``break``, ``continue``, an ``else:``, an assignment to its
    variable, or more than :data:`MAX_TRIPS` iterations stays as it is. Returns ``func`` itself
    when nothing changes or its source cannot be read."""
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return func
    tree = ast.parse(textwrap.dedent("".join(lines)))
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        return func
    fdef.decorator_list = []
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    writer = _Writer(func.__globals__, cells, _local_names(fdef))
    fdef.body = writer.statements(fdef.body)
    if not writer.changed:
        return func
    ast.increment_lineno(tree, first - 1)
    # The function is compiled inside a factory taking its free variables, so that it gets the
    # same closure cells (filled or not yet) and the module's own globals.
    factory = ast.FunctionDef(
        name="_factory", args=ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in cells],
                                            kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(ast.Name(fdef.name, ast.Load()))], decorator_list=[],
        returns=None)
    if "type_params" in ast.FunctionDef._fields:        # Python >= 3.12
        factory.type_params = []
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, func.__code__.co_filename, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, pytypes.CodeType))
    body_code = next(c for c in factory_code.co_consts
                     if isinstance(c, pytypes.CodeType) and c.co_name == fdef.name)
    new = pytypes.FunctionType(body_code, func.__globals__, func.__name__, func.__defaults__,
                               tuple(cells[n] for n in body_code.co_freevars))
    new.__kwdefaults__ = func.__kwdefaults__
    new.__qualname__ = func.__qualname__
    new.__module__ = func.__module__
    new.__doc__ = func.__doc__
    new.__wrapped__ = func
    return new


def _local_names(fdef):
    # Names the function binds (parameters, assignments, loop targets ...): a range bound naming
    # one of them is not known in advance, whatever a global of that name holds.
    names = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    names |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


class _Writer(ast.NodeTransformer):
    def __init__(self, globals_, cells, local_names):
        self.globals = globals_
        self.cells = cells
        self.local = local_names
        self.changed = False

    def _value(self, name):
        if name in self.local:
            raise LookupError(name)
        if name in self.cells:
            return self.cells[name].cell_contents      # ValueError while the cell is empty
        if name in self.globals:
            return self.globals[name]
        raise LookupError(name)

    def _bounds(self, call):
        # The range's int arguments, or None when one is not known in advance.
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "range" and "range" not in self.local
                and "range" not in self.cells and "range" not in self.globals
                and not call.keywords and 1 <= len(call.args) <= 3):
            return None
        values = []
        for arg in call.args:
            try:
                value = _evaluate(arg, self._value)
            except (LookupError, ValueError, TypeError, ArithmeticError):
                return None
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            values.append(value)
        return values

    def statements(self, body):
        out = []
        for statement in body:
            result = self.visit(statement)
            out.extend(result if isinstance(result, list) else [result])
        return out

    def visit_FunctionDef(self, node):
        return node                     # a nested def keeps its own loops

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_For(self, node):
        bounds = self._bounds(node.iter)
        target = node.target
        if (bounds is None or node.orelse or not isinstance(target, ast.Name)
                or _breaks(node.body) or _assigns(node.body, target.id)):
            self.generic_visit(node)
            return node
        values = range(*bounds)
        if len(values) > MAX_TRIPS:
            self.generic_visit(node)
            return node
        self.changed = True
        out = []
        for value in values:            # (inner loops visited with this value known)
            out += self.statements([_Substitute(target.id, value).visit(copy.deepcopy(s))
                                    for s in node.body])
        return out or [ast.Pass()]


class _Substitute(ast.NodeTransformer):
    # The loop variable's loads become the constant.
    def __init__(self, name, value):
        self.name = name
        self.value = value

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node


def _breaks(body):
    # A break or continue of this loop (not of a loop nested in it).
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            stack.extend(getattr(node, "orelse", []))   # a nested loop's else belongs to us
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _assigns(body, name):
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
               for statement in body for n in ast.walk(statement))


_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
              ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b,
              ast.Mod: lambda a, b: a % b, ast.LShift: lambda a, b: a << b,
              ast.RShift: lambda a, b: a >> b, ast.BitAnd: lambda a, b: a & b,
              ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b,
              ast.Pow: lambda a, b: a ** b}


def _evaluate(node, lookup):
    # An int expression of constants, names (lookup) and arithmetic; anything else raises.
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return lookup(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, lookup),
                                         _evaluate(node.right, lookup))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, lookup)
    raise ValueError(ast.dump(node))
