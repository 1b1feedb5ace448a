"""Every path NumPy has into an array, tried on a rollout's arrays: from a table generated from
NumPy itself, so that a NumPy release adding a path fails here until it is decided.

Decided per path, as the Validation page says: checked (item assignment, in-place operators,
`fill`, `put`), refused loudly (every `out=`, `np.copyto`, `sort`, ..., and the layout
attributes), a plain array (copies), or a documented way out that `revalidate()` catches
(`ufunc.at`, which NumPy lets write into read-only arrays; `setflags(write=True)`).

Generated from NumPy: every callable of `numpy` and its public submodules with an `out`
parameter (ufuncs and their methods included, and `numpy.random.Generator`'s methods), in
keyword and positional forms; every public method and in-place operator of `ndarray`; every
settable attribute of `ndarray`. Each table below must name exactly what NumPy has.
"""

from __future__ import annotations

import importlib
import inspect
import io
import pickle
import pkgutil
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from trajkit import CheckedArray, Rollout, RolloutValidationError

T, B, A = 4, 3, 5
Call = tuple[tuple[Any, ...], dict[str, Any]]
Builder = Callable[[Any], Call | None]


def _rollout() -> Rollout:
    """A rollout whose arrays have every dtype a field can hold, unsorted, none symmetric."""
    rng = np.random.default_rng(5)

    def values(dtype: str, shape: tuple[int, ...] = (T + 1, B)) -> Any:
        return (rng.permutation(np.prod(shape)).reshape(shape) % 3).astype(dtype)

    obses = {dt: values(dt) for dt in ("float32", "float64", "int64", "int32", "uint8", "bool")}
    return Rollout(
        states=rng.normal(size=(T + 1, B, 2)),
        obses=obses,
        rews=rng.normal(size=(T, B)),
        dones=np.zeros((T + 1, B)),
        infos=None,
        model_outs={
            "critic": rng.normal(size=(T + 1, B)),
            "actor": rng.normal(size=(T + 1, B, A)),
            "actions": values("int32") % A,
            "counts": values("int64"),
            "mask": values("bool"),
        },
    )


def _targets(r: Rollout) -> Iterator[tuple[str, Any]]:
    """Every kind of checked array a rollout hands out: field leaves, outputs, rows, views."""
    obses: Any = r.obses
    for dtype, leaf in obses.items():
        yield f"obses[{dtype!r}]", leaf
    yield "rews", r.rews
    yield "states", r.states
    for key, array in r.model_outs.arrays.items():
        yield f"model_outs.arrays[{key!r}]", array
    yield "model_outs[1]['counts']", r.model_outs[1]["counts"]
    yield "rews[1:]", r.rews[1:]


def _stack2(t: Any) -> Any:
    return np.stack([t, t])


# ---------------------------------------------------------------------- callables with `out`


def _public_modules() -> list[ModuleType]:
    """`numpy` and its public submodules, recursively, as users import them (not deprecated)."""
    found = [np]
    todo = [np]
    while todo:
        package = todo.pop()
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_") or info.name in ("tests", "conftest"):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a deprecated module is not a public one
                try:
                    module = importlib.import_module(f"{package.__name__}.{info.name}")
                except (ImportError, Warning):
                    continue
            found.append(module)
            if info.ispkg:
                todo.append(module)
    return sorted(found, key=lambda m: (m is not np, m.__name__))


def _has_out(func: Any) -> bool:
    try:
        return "out" in inspect.signature(func).parameters
    except (TypeError, ValueError):  # no signature: every NumPy callable with `out` has one
        return False


def _callables_with_out() -> dict[str, Any]:
    """Every public callable with an `out` parameter, by its first public name."""
    found: dict[str, Any] = {}
    seen: set[int] = set()

    def add(name: str, func: Any) -> None:
        if id(func) not in seen:
            seen.add(id(func))
            found[name] = func

    for module in _public_modules():
        for name in sorted(n for n in dir(module) if not n.startswith("_")):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated aliases warn when read
                func = getattr(module, name, None)
            if isinstance(func, np.ufunc):
                add(f"ufunc {func.__name__}", func)
            elif callable(func) and not inspect.isclass(func) and _has_out(func):
                add(f"{module.__name__}.{name}", func)
    generator = np.random.default_rng(0)
    for name in sorted(n for n in dir(generator) if not n.startswith("_")):
        method = getattr(generator, name)
        if callable(method) and _has_out(method):
            add(f"numpy.random.Generator.{name}", method)
    return found


def _reduce(t: Any) -> Call:
    return (_stack2(t),), {"axis": 0}


def _arg(t: Any) -> Call | None:
    return ((_stack2(t),), {"axis": 0}) if t.dtype == np.intp else None


def _quantile(q: float) -> Builder:
    return lambda t: ((_stack2(t), q), {"axis": 0})


def _along0(t: Any) -> Call:
    return (t,), {"axis": 0}


def _alone(t: Any) -> Call:
    return (t,), {}


def _two_d(build: Callable[[Any], Call]) -> Builder:
    return lambda t: build(t) if t.ndim == 2 else None


def _dates(t: Any, day: str) -> Any:
    return np.full(t.shape, day, "M8[D]")


_REDUCTIONS = [
    "all",
    "any",
    "amax",
    "amin",
    "max",
    "min",
    "mean",
    "std",
    "var",
    "sum",
    "prod",
    "ptp",
    "median",
    "nanmax",
    "nanmin",
    "nanmean",
    "nanstd",
    "nanvar",
    "nansum",
    "nanprod",
    "nanmedian",
]
_MA_REDUCTIONS = [
    "all",
    "any",
    "max",
    "min",
    "mean",
    "std",
    "var",
    "sum",
    "prod",
    "product",
    "ptp",
    "median",
]

BUILDERS: dict[str, Builder] = {
    **{f"numpy.{name}": _reduce for name in _REDUCTIONS},
    **{f"numpy.ma.{name}": _reduce for name in _MA_REDUCTIONS},
    **{f"numpy.{n}": _arg for n in ("argmax", "argmin", "nanargmax", "nanargmin")},
    **{f"numpy.ma.{n}": _arg for n in ("argmax", "argmin")},
    "numpy.percentile": _quantile(50),
    "numpy.nanpercentile": _quantile(50),
    "numpy.quantile": _quantile(0.5),
    "numpy.nanquantile": _quantile(0.5),
    **{f"numpy.{n}": _along0 for n in ("cumsum", "cumprod", "nancumsum", "nancumprod")},
    **{f"numpy.{n}": _along0 for n in ("cumulative_sum", "cumulative_prod")},
    **{f"numpy.ma.{n}": _along0 for n in ("cumsum", "cumprod")},
    **{f"numpy.{n}": _alone for n in ("fix", "isposinf", "isneginf", "round", "around")},
    "numpy.ma.round": _alone,
    "numpy.clip": lambda t: ((t, 0, 1), {}),
    "numpy.ma.clip": lambda t: ((t, 0, 1), {}),
    "numpy.take": lambda t: ((t, np.arange(len(t))), {"axis": 0}),
    "numpy.ma.take": lambda t: ((t, np.arange(len(t))), {"axis": 0}),
    "numpy.compress": lambda t: ((np.ones(len(t), bool), t), {"axis": 0}),
    "numpy.ma.compress": lambda t: ((np.ones(len(t), bool), t), {"axis": 0}),
    "numpy.choose": lambda t: ((np.zeros(t.shape, np.intp), [t]), {}),
    "numpy.ma.choose": lambda t: ((np.zeros(t.shape, np.intp), [t]), {}),
    "numpy.trace": lambda t: ((np.zeros((2, 2, *t.shape), t.dtype),), {}),
    "numpy.ma.trace": lambda t: ((np.zeros((2, 2, *t.shape), t.dtype),), {}),
    "numpy.dot": _two_d(lambda t: ((np.eye(len(t), dtype=t.dtype), t), {})),
    "numpy.ma.dot": _two_d(lambda t: ((np.eye(len(t), dtype=t.dtype), t), {})),
    "numpy.outer": _two_d(
        lambda t: ((np.ones(t.shape[0], t.dtype), np.ones(t.shape[1], t.dtype)), {})
    ),
    "numpy.linalg.multi_dot": _two_d(lambda t: (([np.eye(len(t), dtype=t.dtype), t],), {})),
    "numpy.einsum": lambda t: (("...->...", t), {}),
    "numpy.concat": lambda t: (([t[:1], t[1:]],), {"axis": 0}),
    "numpy.stack": lambda t: ((list(t),), {"axis": 0}),
    "numpy.ma.stack": lambda t: ((list(t),), {"axis": 0}),
    "numpy.is_busday": lambda t: ((_dates(t, "2024-01-01"),), {}),
    "numpy.busday_count": lambda t: ((_dates(t, "2024-01-01"), _dates(t, "2024-02-01")), {}),
    "numpy.fft.irfft": lambda t: ((np.fft.rfft(t), t.shape[-1]), {}),
    "numpy.fft.hfft": lambda t: ((np.fft.ihfft(t), t.shape[-1]), {}),
    "numpy.fft.irfft2": _two_d(lambda t: ((np.fft.rfft2(t), t.shape), {})),
    "numpy.fft.irfftn": lambda t: ((np.fft.rfftn(t), t.shape), {}),
    "numpy.random.Generator.random": lambda t: ((), {"dtype": t.dtype}),
    "numpy.random.Generator.standard_normal": lambda t: ((), {"dtype": t.dtype}),
    "numpy.random.Generator.standard_exponential": lambda t: ((), {"dtype": t.dtype}),
    "numpy.random.Generator.standard_gamma": lambda t: ((1.0,), {"dtype": t.dtype}),
    "numpy.random.Generator.permuted": _along0,
    **{f"numpy.fft.{n}": _alone for n in ("fft", "ifft", "rfft", "ihfft")},
    **{f"numpy.fft.{n}": _alone for n in ("fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn")},
    "numpy.busday_offset": lambda t: ((_dates(t, "2024-01-01"), 0), {}),
}
"""How to call each callable with `out` so that its result fits a target like `t` (an alias,
such as `concatenate` of `concat`, is named once: by its first name)."""

NO_FIT = {
    **dict.fromkeys(
        ("fft", "ifft", "fft2", "fftn", "ifftn", "rfft", "rfft2", "rfftn", "ihfft"),
        "complex results",
    ),
    "busday_offset": "datetime64 results",
    "numpy.ma.dot": "its out must be a MaskedArray",
}
"""Callables whose `out` no rollout array can be (tried all the same: refused, unchanged)."""


def _real_loop(ufunc: np.ufunc) -> bool:
    """Whether some loop of `ufunc` reads and writes only real numbers (bool, int, float)."""
    return any(
        set(types.replace("->", "")) <= set(np.typecodes["AllInteger"] + "?efdg")
        for types in ufunc.types
    )


def _ufunc_calls(ufunc: np.ufunc, t: Any, target: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """`ufunc` and its methods writing into `target` (inputs like `t`), every form of `out`."""
    inputs = [t] * ufunc.nin
    if ufunc.nout == 1:
        yield "call out=", lambda: ufunc(*inputs, out=target)
        yield "call positional", lambda: ufunc(*inputs, target)
    else:
        spare = [np.empty_like(t) for _ in range(ufunc.nout - 1)]
        yield "call out=(target, ...)", lambda: ufunc(*inputs, out=(target, *spare))
        yield "call out=(..., target)", lambda: ufunc(*inputs, out=(*spare, target))
        yield "call positional", lambda: ufunc(*inputs, target, *spare)
    if ufunc.nin == 2 and ufunc.nout == 1 and ufunc.signature is None:
        yield "reduce out=", lambda: ufunc.reduce(_stack2(t), axis=0, out=target)
        yield "reduce positional", lambda: ufunc.reduce(_stack2(t), 0, None, target)
        yield "accumulate out=", lambda: ufunc.accumulate(t, axis=0, out=target)
        yield "accumulate positional", lambda: ufunc.accumulate(t, 0, None, target)
        doubled, starts = np.concatenate([t, t]), np.arange(0, 2 * len(t), 2)
        yield "reduceat out=", lambda: ufunc.reduceat(doubled, starts, axis=0, out=target)
        yield "reduceat positional", lambda: ufunc.reduceat(doubled, starts, 0, None, target)
        if t.ndim == 2:
            rows, cols = np.ones(t.shape[0], t.dtype), np.ones(t.shape[1], t.dtype)
            yield "outer out=", lambda: ufunc.outer(rows, cols, out=target)


def _function_calls(func: Any, call: Call, target: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """`func(*args, **kwargs)` writing into `target`: `out=` and, where it may be, positional."""
    args, kwargs = call
    yield "out=", lambda: func(*args, **kwargs, out=target)
    params = list(inspect.signature(func).parameters.values())
    at = [p.name for p in params].index("out")
    before = params[:at]
    if params[at].kind not in (params[at].POSITIONAL_ONLY, params[at].POSITIONAL_OR_KEYWORD):
        return
    bound = inspect.signature(func).bind_partial(*args, **kwargs).arguments
    positional = [bound.get(p.name, p.default) for p in before]
    if any(value is inspect.Parameter.empty for value in positional):
        return
    rest = {k: v for k, v in kwargs.items() if k not in {p.name for p in before}}
    yield "positional", lambda: func(*positional, target, **rest)


def _calls(name: str, func: Any, t: Any, target: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    if isinstance(func, np.ufunc):
        yield from _ufunc_calls(func, t, target)
        return
    call = BUILDERS[name](t)
    if call is not None:
        yield from _function_calls(func, call, target)


def _poisoned(t: Any) -> Any:
    """`t` with a NaN where it can hold one: a result a finite field must refuse."""
    if t.dtype.kind != "f":
        return t
    bad = t.copy()
    bad.flat[1] = np.nan
    return bad


def _quietly(call: Callable[[], Any]) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        call()


def _never_invalid(name: str, func: Any) -> int:
    """Call `func` into every checked array, from valid and from poisoned inputs.

    A call that works into a plain copy is, into the rollout's array, refused (nothing
    written) or a checked write (NumPy's result, stored, the rollout valid). Returns how many
    calls worked into a copy.
    """
    tried = 0
    for poison in (False, True):
        r = _rollout()
        for where, target in _targets(r):
            before = np.array(target)
            source = _poisoned(before) if poison else before
            copy = np.array(target)
            for form, control in dict(_calls(name, func, source, copy)).items():
                copy[...] = before
                try:
                    _quietly(control)
                except Exception:
                    continue  # (this array cannot hold the result: nothing to check)
                tried += 1
                real = dict(_calls(name, func, source, target))[form]
                try:
                    _quietly(real)
                except (ValueError, TypeError):
                    np.testing.assert_array_equal(target, before, err_msg=f"{name} {form} {where}")
                else:  # a checked write (nanmedian writes `out[...] = result`): NumPy's result
                    np.testing.assert_array_equal(target, copy, err_msg=f"{name} {form} {where}")
                assert target.shape == before.shape
                assert target.dtype == before.dtype
                r.revalidate()
    return tried


OUT_CALLABLES = _callables_with_out()


def _fits_no_array(name: str) -> bool:
    return name in NO_FIT or name.rsplit(".", 1)[-1] in NO_FIT


def test_the_table_names_every_callable_with_out() -> None:
    functions = {name for name, f in OUT_CALLABLES.items() if not isinstance(f, np.ufunc)}
    assert functions == set(BUILDERS), (
        f"new in NumPy: {sorted(functions - set(BUILDERS))}; "
        f"gone: {sorted(set(BUILDERS) - functions)}"
    )
    assert len(OUT_CALLABLES) > 150  # ufuncs, functions, methods: the walk found them


@pytest.mark.parametrize("name", sorted(OUT_CALLABLES))
def test_out_into_a_rollouts_array_never_stores_what_the_rules_refuse(name: str) -> None:
    func = OUT_CALLABLES[name]
    tried = _never_invalid(name, func)
    fits = not (isinstance(func, np.ufunc) and not _real_loop(func)) and not _fits_no_array(name)
    assert (tried > 0) == fits, (name, tried)


def test_ufunc_at_is_a_way_out_that_revalidate_catches() -> None:
    # NumPy's `ufunc.at` writes into read-only arrays (NumPy 2.4): the one ufunc path no
    # subclass can refuse without a Python `__array_ufunc__` on every operation.
    r = _rollout()
    np.add.at(r.rews, (1, 2), np.inf)
    np.negative.at(r.model_outs.arrays["critic"], (0, 0))
    with pytest.raises(RolloutValidationError, match=re.escape("rews must be finite, got inf")):
        r.revalidate()


# ----------------------------------------------------------- functions that write arguments

WRITERS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "copyto": ("refused", lambda a, v: np.copyto(a, v)),
    "copyto(dst=, src=)": ("refused", lambda a, v: np.copyto(dst=a, src=v)),
    "place": ("refused", lambda a, v: np.place(a, np.ones(a.shape, bool), v)),
    "place(arr=, mask=, vals=)": (
        "refused",
        lambda a, v: np.place(arr=a, mask=np.ones(a.shape, bool), vals=v),
    ),
    "putmask": ("refused", lambda a, v: np.putmask(a, np.ones(a.shape, bool), v)),
    "fill_diagonal": ("refused", lambda a, v: np.fill_diagonal(a, v[1, 0])),
    "fill_diagonal(a=, val=)": ("refused", lambda a, v: np.fill_diagonal(a=a, val=v[1, 0])),
    "random.shuffle": ("refused", lambda a, v: np.random.shuffle(a)),  # noqa: NPY002
    "Generator.shuffle": ("refused", lambda a, v: np.random.default_rng(0).shuffle(a)),
    "ma.putmask": ("refused", lambda a, v: np.ma.putmask(a, np.ones(a.shape, bool), v)),
    "nan_to_num(copy=False)": ("refused", lambda a, v: np.nan_to_num(a, copy=False)),
    "put": ("checked", lambda a, v: np.put(a, np.arange(a.size), v)),
    "put(a=, ind=, v=)": ("checked", lambda a, v: np.put(a=a, ind=np.arange(a.size), v=v)),
    "ma.put": ("checked", lambda a, v: np.ma.put(a, np.arange(a.size), v)),
    "put_along_axis": (
        "checked",
        lambda a, v: np.put_along_axis(a, np.ones((1, *a.shape[1:]), np.intp), v[1:2], 0),
    ),
    "put_along_axis(arr=, ...)": (
        "checked",
        lambda a, v: np.put_along_axis(
            arr=a, indices=np.ones((1, *a.shape[1:]), np.intp), values=v[1:2], axis=0
        ),
    ),
}
"""NumPy's functions that write into an argument other than `out` (its documentation says so),
in positional and keyword forms: refused by NumPy, or checked (they call `put` and item
assignment)."""


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_functions_that_write_an_argument(name: str) -> None:
    kind, write = WRITERS[name]
    r = _rollout()
    before = np.array(r.rews)
    bad = np.full(r.rews.shape, np.nan, np.float32)
    bad[0] = before[0] + 1
    write(before.copy(), bad)  # a valid call: it works on a plain array
    words = {"refused": "read-only", "checked": "^rews must be finite"}[kind]
    with np.errstate(all="ignore"), pytest.raises(ValueError, match=words):
        write(r.rews, bad)
    np.testing.assert_array_equal(r.rews, before)
    if kind == "checked":
        write(r.rews, np.full(r.rews.shape, 0.5, np.float32))
        assert float(r.rews[1, 0]) == 0.5
    r.revalidate()


# ------------------------------------------------------------------ ndarray's own methods


def _to_file(a: Any) -> None:
    with tempfile.TemporaryFile() as file:  # (`tofile` needs a real file)
        a.tofile(file)


READS: dict[str, Callable[[Any], Any]] = {
    "all": lambda a: a.all(),
    "any": lambda a: a.any(0),
    "argmax": lambda a: a.argmax(0),
    "argmin": lambda a: a.argmin(),
    "argpartition": lambda a: a.argpartition(0, axis=0),
    "argsort": lambda a: a.argsort(0),
    "astype": lambda a: a.astype(np.float64),
    "choose": lambda a: np.zeros(a.shape, np.intp).choose([a]),
    "clip": lambda a: a.clip(0, 1),
    "compress": lambda a: a.compress(np.ones(len(a), bool), axis=0),
    "conj": lambda a: a.conj(),
    "conjugate": lambda a: a.conjugate(),
    "copy": lambda a: a.copy(),
    "cumprod": lambda a: a.cumprod(0),
    "cumsum": lambda a: a.cumsum(0),
    "diagonal": lambda a: a.diagonal(),
    "dot": lambda a: a.dot(np.ones(a.shape[-1], a.dtype)),
    "dump": lambda a: a.dump(io.BytesIO()),
    "dumps": lambda a: pickle.loads(a.dumps()),
    "flatten": lambda a: a.flatten(),
    "getfield": lambda a: a.getfield(a.dtype),
    "item": lambda a: a.item(0),
    "max": lambda a: a.max(0),
    "mean": lambda a: a.mean(),
    "min": lambda a: a.min(),
    "nonzero": lambda a: a.nonzero(),
    "prod": lambda a: a.prod(0),
    "ravel": lambda a: a.ravel(),
    "repeat": lambda a: a.repeat(2, axis=0),
    "reshape": lambda a: a.reshape(-1),
    "round": lambda a: a.round(),
    "searchsorted": lambda a: a[0].searchsorted(1),
    "squeeze": lambda a: a.squeeze(),
    "std": lambda a: a.std(0),
    "sum": lambda a: a.sum(0),
    "swapaxes": lambda a: a.swapaxes(0, 1),
    "take": lambda a: a.take([0, 1], axis=0),
    "to_device": lambda a: a.to_device("cpu"),
    "tobytes": lambda a: a.tobytes(),
    "tofile": _to_file,
    "tolist": lambda a: a.tolist(),
    "trace": lambda a: a.trace(),
    "transpose": lambda a: a.transpose(),
    "var": lambda a: a.var(0),
    "view": lambda a: a.view(),
}
"""ndarray's methods that read: on a rollout's array they give what they give on a copy."""

REFUSED: dict[str, Callable[[Any], Any]] = {
    "sort": lambda a: a.sort(axis=0),
    "partition": lambda a: a.partition(1, axis=0),
    "byteswap": lambda a: a.byteswap(inplace=True),
    "setfield": lambda a: a.setfield(a.dtype.type(2), a.dtype),
    "resize": lambda a: a.resize((a.size,), refcheck=False),
    "__setstate__": lambda a: a.__setstate__(np.ones_like(a).__reduce__()[2]),
    "__delitem__": lambda a: a.__delitem__(0),
}
"""ndarray's methods that write, and that a rollout's array refuses (loudly)."""

CHECKED = {"__setitem__", "fill", "put", "setflags"}
"""Checked writes (`setflags(write=True)`: the way out, see below)."""

IN_PLACE = {
    "__iadd__": (np.inf, "must be finite"),
    "__isub__": (-np.inf, "must be finite"),
    "__imul__": (np.inf, "must be finite"),
    "__itruediv__": (0.0, "must be finite"),
    "__ifloordiv__": (0.0, "must be finite"),
    "__imod__": (0.0, "must be finite"),
    "__ipow__": (1e30, "must be finite"),
    "__imatmul__": (None, ""),
    "__ilshift__": (None, ""),
    "__irshift__": (None, ""),
    "__iand__": (None, ""),
    "__ior__": (None, ""),
    "__ixor__": (None, ""),
}
"""The in-place operators: with an operand that makes `rews` non-finite (`None`: no such
operand for floats; checked on integer arrays instead), refused with the rule's message."""


def test_the_tables_name_every_method_of_ndarray() -> None:
    public = {n for n in dir(np.ndarray) if not n.startswith("_")}
    methods = {n for n in public if callable(getattr(np.ndarray, n))}
    mutators = {n for n in dir(np.ndarray) if re.fullmatch(r"__i[a-z]+__", n)} - {
        "__index__",
        "__init__",
        "__int__",
        "__invert__",
        "__iter__",
        "__init_subclass__",
    }
    named = set(READS) | set(REFUSED) | CHECKED
    assert methods | {"__setitem__", "__setstate__", "__delitem__"} == named
    assert mutators == set(IN_PLACE)


@pytest.mark.parametrize("name", sorted(READS))
def test_methods_that_read_give_what_they_give_on_a_copy(name: str) -> None:
    r = _rollout()
    for where, target in _targets(r):
        before = np.array(target)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                expected = READS[name](before)
            except Exception as exc:  # the same refusal on the rollout's array
                with pytest.raises(type(exc)):
                    READS[name](target)
                continue
            got = READS[name](target)
        np.testing.assert_array_equal(before, np.array(target), err_msg=f"{name} wrote {where}")
        if isinstance(expected, np.ndarray):
            np.testing.assert_array_equal(np.asarray(got), expected)
            got_array = got[0] if isinstance(got, tuple) else got
            assert type(got_array) in (np.ndarray, CheckedArray)
    r.revalidate()


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_methods_that_write_are_refused(name: str) -> None:
    r = _rollout()
    for where, target in _targets(r):
        before = np.array(target)
        control = before.copy()
        try:
            REFUSED[name](control)
        except ValueError:
            assert name == "__delitem__"  # ndarray has none: NumPy refuses it anyway
        with pytest.raises((ValueError, TypeError, AttributeError)):
            REFUSED[name](target)
        np.testing.assert_array_equal(np.array(target), before, err_msg=f"{name} {where}")
        assert target.shape == before.shape
    r.revalidate()


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_operators_are_checked(name: str) -> None:
    bad, words = IN_PLACE[name]
    r = _rollout()
    for _, target in _targets(r):
        before = np.array(target)
        operand: Any = 1 if target.dtype.kind in "iub" else np.float32(2)
        if name == "__imatmul__":
            operand = np.eye(target.shape[-1], dtype=target.dtype)
        plain = before.copy()
        with np.errstate(all="ignore"):
            try:
                expected = getattr(plain, name)(operand)
            except Exception as exc:  # as NumPy refuses it (no such loop, say)
                with pytest.raises(type(exc)):
                    getattr(target, name)(operand)
                np.testing.assert_array_equal(np.array(target), before)
                continue
            if name == "__isub__" and target is r.model_outs.arrays["actions"]:
                with pytest.raises(ValueError, match=re.escape("must be in [0, A)")):
                    getattr(target, name)(operand)  # (actions of 0 become -1)
                continue
            assert getattr(target, name)(operand) is target
        np.testing.assert_array_equal(np.array(target), expected)  # NumPy's result, stored
        target[...] = before
    if bad is not None:
        rews = np.array(r.rews)
        with np.errstate(all="ignore"), pytest.raises(ValueError, match=f"^rews {words}"):
            getattr(r.rews, name)(bad)
        np.testing.assert_array_equal(r.rews, rews)
    r.revalidate()


def test_setflags_is_a_way_out_that_revalidate_catches_and_seals() -> None:
    r = _rollout()
    rews = r.rews
    rews.setflags(write=True)
    np.clip(rews, np.inf, None, out=rews)  # NumPy's paths work on it now, unchecked
    with pytest.raises(RolloutValidationError, match=re.escape("rews must be finite, got inf")):
        r.revalidate()
    storage: Any = r.rews.base
    storage[...] = 0
    r.revalidate()
    assert not r.rews.flags.writeable  # sealed again


# ----------------------------------------------------------------- settable attributes


def _settable() -> list[str]:
    """ndarray's attributes that can be set, found by setting each on a plain array."""
    found = []
    for name in dir(np.ndarray):
        if not inspect.isgetsetdescriptor(getattr(np.ndarray, name, None)):
            continue
        array = np.zeros((2, 3), np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (setting `strides` is deprecated)
            try:
                setattr(array, name, getattr(array, name))
            except (AttributeError, TypeError, ValueError):
                continue
        found.append(name)
    return found


def test_the_settable_attributes_are_found() -> None:
    assert {"shape", "strides", "dtype", "flat", "real"} <= set(_settable())


@pytest.mark.parametrize("name", _settable())
def test_setting_an_attribute_of_a_rollouts_array_is_refused(name: str) -> None:
    r = _rollout()
    obses: Any = r.obses
    for where, target in [("rews", r.rews), ("obses['int64']", obses["int64"])]:
        before = np.array(target)
        value = getattr(before, name)
        with pytest.raises((AttributeError, ValueError, TypeError)):
            _quietly(lambda: setattr(target, name, value))  # noqa: B023
        np.testing.assert_array_equal(np.array(target), before, err_msg=where)
        assert target.shape == before.shape
        assert target.dtype == before.dtype
    r.revalidate()


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("shape", AttributeError),
        ("strides", AttributeError),
        ("dtype", AttributeError),
        ("flat", ValueError),  # NumPy refuses these two of a read-only array too, unhelpfully
        ("real", ValueError),
    ],
)
def test_each_refused_attribute_says_what_to_write_instead(
    name: str, error: type[Exception]
) -> None:
    r = _rollout()
    message = (
        f"rews.{name} cannot be set: a rollout's arrays keep their layout and are written "
        "through their checks; write rews[...] = value, and use reshape() or view() for "
        "another layout"
    )
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        setattr(r.rews, name, getattr(np.array(r.rews), name))


def test_views_are_checked_and_views_of_another_dtype_refused() -> None:
    r = _rollout()
    view = r.rews.T[::-1]
    view[0, 1] = 0.25
    assert float(r.rews[1, 2]) == 0.25
    with pytest.raises(ValueError, match=re.escape("rews must be finite, got nan at (t=1, b=2)")):
        r.rews[1:][0].__setitem__(2, np.nan)
    for other in (np.int32, np.uint8, ">f4"):
        with pytest.raises(ValueError, match="a view of it as"):
            r.rews.view(other)[0] = 0
    with pytest.raises(ValueError, match="read-only"):
        r.rews.view(np.ndarray)[0] = 0
    r.revalidate()
